# ddp_module(NAME SOURCES ... DEPS ...): one static, PIC library per module folder.
# Modules are folded into the shared libddp (see DdpInstall.cmake); tests link them directly.
function(ddp_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${M_SOURCES})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/ddp>)
  target_link_libraries(${name} PUBLIC ${M_DEPS} PRIVATE ${M_PRIVATE_DEPS})
  set_property(GLOBAL APPEND PROPERTY DDP_LIB_MODULES ${name})
endfunction()
