# Run at install time (install(CODE)): the installed headers include each other as
# "ddp/<module>/x.h", so a program puts only <prefix>/include on its include path and writes
# #include <ddp/comm/init.h>. In the source tree they are "<module>/x.h" (the project root is
# the include root); the engine's own headers are "ddp/x.h" in both.
function(ddp_rewrite_includes root)
  file(GLOB_RECURSE _headers "${root}/*.h")
  foreach(_h ${_headers})
    file(READ "${_h}" _text)
    string(REGEX REPLACE "#include \"(common|rendezvous|comm)/" "#include \"ddp/\\1/" _new "${_text}")
    if(NOT _new STREQUAL _text)
      file(WRITE "${_h}" "${_new}")
    endif()
  endforeach()
endfunction()
