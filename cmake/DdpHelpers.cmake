# Unity builds (CMake's UNITY_BUILD) for the library modules and ddp-bench: a target's files
# compile in batches of DDP_UNITY_BATCH as one translation unit each, so the headers they share
# are parsed once a batch: about half the compile time of a cold build (CI's), for slower
# incremental ones. A file's anonymous-namespace names must then differ from its target's other
# files'.
option(DDP_UNITY_BUILD "Compile each library module in batches of files (unity build)" ON)
set(DDP_UNITY_BATCH 8 CACHE STRING "Files per translation unit of a unity build")
function(ddp_unity target)
  if(NOT DDP_UNITY_BUILD)
    return()
  endif()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${DDP_UNITY_BATCH})
  # A class of a file that holds a member of that file's anonymous-namespace type is fine alone;
  # GCC warns only because the batch includes the file.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
  endif()
endfunction()

# ddp_module(NAME SOURCES ... DEPS ...): one static, PIC library per module folder.
# Modules are folded into the shared libddp (see DdpInstall.cmake); tests link them directly.
function(ddp_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${M_SOURCES})
  ddp_unity(${name})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/ddp>)
  target_link_libraries(${name} PUBLIC ${M_DEPS} PRIVATE ${M_PRIVATE_DEPS})
  set_property(GLOBAL APPEND PROPERTY DDP_LIB_MODULES ${name})
endfunction()
