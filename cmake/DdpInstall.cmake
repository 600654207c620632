# libddp.so: the library modules folded into one shared library with the tcp backend; gloo,
# mpi and nccl are plugins beside it (libddp_backend_<name>.so, comm/backend_plugin.h), loaded
# on first use, so libddp itself needs neither MPI, Gloo, NCCL nor CUDA. Plus the public
# headers, a CMake package (find_package(ddp) -> ddp::ddp) and a pkg-config file.
get_property(_modules GLOBAL PROPERTY DDP_LIB_MODULES)
# Not folded in: the launcher, the plugin backends, and ddp_init, whose compile-time registry
# is replaced by the plugin registry (its other sources are compiled again below).
list(REMOVE_ITEM _modules ddp_launcher ddp_init ddp_comm_gloo ddp_comm_mpi ddp_comm_nccl)
add_library(ddp SHARED cmake/libddp.cc
  comm/init.cc comm/init_store.cc comm/group_factory.cc comm/backend_plugins.cc comm/staging_on_demand.cc)
add_library(ddp::ddp ALIAS ddp)
set_source_files_properties(cmake/libddp.cc PROPERTIES COMPILE_DEFINITIONS DDP_VERSION="${PROJECT_VERSION}")
foreach(_m ${_modules})
  target_sources(ddp PRIVATE $<TARGET_OBJECTS:${_m}>)
endforeach()
# The folded modules' outside dependencies, named here: linking the module targets would drag
# the backends in through ddp_init.
find_library(DDP_LIBRT_SHARED rt)
target_include_directories(ddp PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(ddp PRIVATE spdlog::spdlog nlohmann_json::nlohmann_json OpenSSL::Crypto CURL::libcurl Threads::Threads
  ${CMAKE_DL_LIBS} $<$<BOOL:${DDP_LIBRT_SHARED}>:${DDP_LIBRT_SHARED}>)
target_link_libraries(ddp INTERFACE Threads::Threads)
target_include_directories(ddp INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(ddp PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION 0 OUTPUT_NAME ddp)
# Only the API is exported (cmake/libddp.map: what the installed headers below declare).
target_link_options(ddp PRIVATE "LINKER:--version-script=${PROJECT_SOURCE_DIR}/cmake/libddp.map")
set_property(TARGET ddp APPEND PROPERTY LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/libddp.map)

# Install components: runtime (libddp and its plugins), python (the module ddp_torch) and the
# rest (headers, package files, programs): `cmake --install --component runtime` installs only
# what a program that loads libddp needs; setup.py installs runtime and python.
install(TARGETS ddp EXPORT ddpTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime)

# The plugins: each backend's objects and its entry point, linked against libddp.so and the
# backend's own dependency; they export the entry point only.
set(_plugin_deps_gloo gloo spdlog::spdlog)
set(_plugin_deps_mpi MPI::MPI_C spdlog::spdlog)
set(_plugin_deps_nccl CUDA::cudart ${NCCL_LIBRARY} spdlog::spdlog)
foreach(_b gloo mpi nccl)
  if(TARGET ddp_comm_${_b})
    add_library(ddp_backend_${_b} MODULE comm/${_b}/plugin.cc $<TARGET_OBJECTS:ddp_comm_${_b}>)
    target_include_directories(ddp_backend_${_b} PRIVATE ${PROJECT_SOURCE_DIR})
    # The internals a backend shares with libddp (logging, settings, TaskThread, the reduce
    # kernels) are not exported: each plugin takes its own copy from the static modules.
    target_link_libraries(ddp_backend_${_b} PRIVATE ddp ddp_comm ${_plugin_deps_${_b}})
    set_target_properties(ddp_backend_${_b} PROPERTIES PREFIX "lib" OUTPUT_NAME ddp_backend_${_b})
    target_link_options(ddp_backend_${_b} PRIVATE "LINKER:--version-script=${PROJECT_SOURCE_DIR}/cmake/backend_plugin.map")
    install(TARGETS ddp_backend_${_b} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime)
  endif()
endforeach()
# What the Python package holds (setup.py: `pip install .`), built by one target.
if(TARGET ddp_torch_python)
  add_custom_target(ddp_python_package)
  add_dependencies(ddp_python_package ddp ddp_torch_python)
  foreach(_b gloo mpi nccl)
    if(TARGET ddp_backend_${_b})
      add_dependencies(ddp_python_package ddp_backend_${_b})
    endif()
  endforeach()
endif()
# ddp::torch, the package's torch component (find_package(ddp COMPONENTS torch)):
# DistributedDataParallel for LibTorch programs as libddp_torch.so over libddp.so and LibTorch
# (the build tree's ddp_torch objects, linked again), its headers as <ddp/torch/x.h>. Its own
# export set, which the package config loads only where LibTorch is found.
if(TARGET ddp_torch)
  add_library(ddp_torch_shared SHARED $<TARGET_OBJECTS:ddp_torch> $<TARGET_OBJECTS:ddp_torch_tensor>)
  target_link_libraries(ddp_torch_shared PUBLIC ddp ${TORCH_LIBRARIES})
  # The engine's internals it calls (broadcast_coalesced, verify_same_across_ranks) are not
  # exported: from the static module, the archive alone (its targets would bring the backends).
  target_link_libraries(ddp_torch_shared PRIVATE $<TARGET_FILE:ddp_ddp> ddp_comm)
  add_dependencies(ddp_torch_shared ddp_ddp)
  set_target_properties(ddp_torch_shared PROPERTIES OUTPUT_NAME ddp_torch EXPORT_NAME torch
    VERSION ${PROJECT_VERSION} SOVERSION 0)
  install(TARGETS ddp_torch_shared EXPORT ddpTorchTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT ddpTorchTargets NAMESPACE ddp:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ddp)
endif()
# The public API: the headers a program includes and those they include, nothing found by a
# glob (docs/design.md, "The installed API", lists the same set; install_test checks the
# installed tree against that list and compiles each header alone). Installed as
# <ddp/module/x.h>, the engine's as <ddp/x.h>, their includes rewritten to match
# (cmake/DdpRewriteIncludes.cmake). cmake/libddp.map exports what they declare.
set(DDP_PUBLIC_HEADERS
  common/error.h common/timeouts.h
  common/deadline.h common/fd.h common/socket.h  # for TCPStore's header: Endpoint, Fd, Deadline
  rendezvous/store.h rendezvous/prefix_store.h rendezvous/hash_store.h rendezvous/file_store.h
  rendezvous/tcp_store.h
  rendezvous/key_table.h  # for HashStore's header
  comm/init.h comm/init_store.h comm/group_factory.h comm/backend.h comm/process_group.h
  comm/group_memory.h comm/types.h comm/work.h
  ddp/engine.h ddp/options.h ddp/param.h ddp/bucket_assignment.h ddp/timeline.h ddp/comm_hook.h
  ddp/join.h ddp/post_local_sgd_hook.h ddp/powersgd.h ddp/device_ops.h ddp/ddp_c.h
  ddp/elastic/elastic.h ddp/elastic/round_watcher.h)
# With LibTorch: ddp::torch's headers, <ddp/torch/x.h>.
set(DDP_PUBLIC_TORCH_HEADERS
  ddp/torch/distributed_data_parallel.h ddp/torch/module_engine.h ddp/torch/grad_hooks.h
  ddp/torch/tensor_buffer.h ddp/torch/sync_batch_norm.h ddp/torch/zero_optimizer.h
  ddp/torch/model_averaging.h ddp/torch/elastic_state.h ddp/torch/powersgd_random.h)
set(_installed_headers ${DDP_PUBLIC_HEADERS})
if(TARGET ddp_torch)
  list(APPEND _installed_headers ${DDP_PUBLIC_TORCH_HEADERS})
endif()
foreach(_h ${_installed_headers})
  get_filename_component(_dir ${_h} DIRECTORY)
  string(REGEX REPLACE "^ddp/?" "" _dir "${_dir}")  # ddp/x.h -> <ddp/x.h>, comm/x.h -> <ddp/comm/x.h>
  install(FILES ${PROJECT_SOURCE_DIR}/${_h} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ddp/${_dir})
endforeach()
install(CODE "include(\"${PROJECT_SOURCE_DIR}/cmake/DdpRewriteIncludes.cmake\")
ddp_rewrite_includes(\"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_INCLUDEDIR}/ddp\")")
# The job config's JSON Schema, for editors and CI checks of configs.
install(FILES ${PROJECT_SOURCE_DIR}/configs/ddp-launch.schema.json DESTINATION ${CMAKE_INSTALL_DATADIR}/ddp)
install(EXPORT ddpTargets NAMESPACE ddp:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ddp)
include(CMakePackageConfigHelpers)
configure_package_config_file(cmake/ddpConfig.cmake.in ${CMAKE_BINARY_DIR}/ddpConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ddp)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/ddpConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/ddpConfig.cmake ${CMAKE_BINARY_DIR}/ddpConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ddp)
# The .pc file finds its prefix relative to itself, so `cmake --install --prefix X` works too.
file(RELATIVE_PATH DDP_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" DDP_PC_TO_PREFIX "${DDP_PC_TO_PREFIX}")
configure_file(cmake/ddp.pc.in ${CMAKE_BINARY_DIR}/ddp.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/ddp.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
foreach(_bin ddp-launch ddp-bench)
  if(TARGET ${_bin})
    install(TARGETS ${_bin} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

# ddp-launch(1), generated from --help and --version by help2man (so it never drifts from the
# program), and the bash completion (which reads --help at completion time).
find_program(DDP_HELP2MAN help2man)
if(DDP_HELP2MAN AND TARGET ddp-launch)
  set(_man ${CMAKE_BINARY_DIR}/man/ddp-launch.1)
  add_custom_command(OUTPUT ${_man}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
    COMMAND ${DDP_HELP2MAN} --no-info --no-discard-stderr --section 1
            --name "launch and supervise data-parallel training workers (a drop-in for torchrun)"
            --output ${_man} $<TARGET_FILE:ddp-launch>
    DEPENDS ddp-launch VERBATIM)
  add_custom_target(ddp-launch-man ALL DEPENDS ${_man})
  install(FILES ${_man} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "ddp-launch.1: not generated (no help2man: apt-get install help2man)")
endif()
install(FILES ${PROJECT_SOURCE_DIR}/scripts/completion/ddp-launch.bash
  DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME ddp-launch)

