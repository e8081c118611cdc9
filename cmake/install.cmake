# `cmake --install`: the binaries, the runtime and SavedModel libraries, their public headers under
# include/tfserve/ and pkg-config files, so C programs can load and run SavedModels (see
# examples/c-api/). The libraries are static archives, so each .pc file lists what its archive
# needs in Libs.private / Requires.private (`pkg-config --static`).
include(GNUInstallDirs)

# Installed names say whose libraries they are; tfs-proto (the generated protobuf code the loader
# links) goes along as an archive of its own because static archives do not carry their
# dependencies.
set_target_properties(tfs-runtime PROPERTIES OUTPUT_NAME tfserve-runtime)
set_target_properties(tfs-savedmodel PROPERTIES OUTPUT_NAME tfserve-savedmodel)
set_target_properties(tfs-proto PROPERTIES OUTPUT_NAME tfserve-proto)
set(_tfs_install_libs tfs-runtime tfs-savedmodel tfs-proto)

install(TARGETS tfserve tfserve-train tfserve-inspect RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${_tfs_install_libs} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The CUDA module, opened at run time by tfserve and by programs linking the runtime (it looks
# beside the executable, in ../lib from it, then in this directory; runtime/cuda/module.c).
if(TFS_HAVE_CUDA)
  install(TARGETS tfserve-cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

# What a program needs to load a SavedModel and run a signature: savedmodel.h and the runtime
# headers its umbrella runtime/runtime.h includes, read from the umbrella itself so that a header
# added there is installed too. Never the -impl.h headers. Includes stay rooted as in the tree
# ("runtime/tensor.h"), so the .pc files add -I<includedir>/tfserve.
file(STRINGS ${PROJECT_SOURCE_DIR}/runtime/runtime.h _tfs_umbrella REGEX "^#include \"runtime/")
set(_tfs_runtime_headers ${PROJECT_SOURCE_DIR}/runtime/runtime.h)
foreach(_line IN LISTS _tfs_umbrella)
  string(REGEX REPLACE "^#include \"(runtime/[^\"]+)\".*" "\\1" _header "${_line}")
  list(APPEND _tfs_runtime_headers ${PROJECT_SOURCE_DIR}/${_header})
endforeach()
install(FILES ${_tfs_runtime_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tfserve/runtime)
install(FILES ${PROJECT_SOURCE_DIR}/savedmodel/savedmodel.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tfserve/savedmodel)

# With the CUDA executor the runtime opens its module with dlopen (libdl before glibc 2.34); it
# links no CUDA library.
set(TFS_PC_CUDA_LIBS "")
if(TFS_HAVE_CUDA)
  set(TFS_PC_CUDA_LIBS "-ldl")
endif()

# The prefix is the one `cmake --install --prefix` installs to, known only at install time: the
# .pc files are configured here with everything else and again, for the prefix, when installed.
set(TFS_PC_PREFIX "@TFS_PC_PREFIX@")
foreach(_pc tfserve-runtime tfserve-savedmodel)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${_pc}.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/${_pc}.pc.in
    @ONLY)
  install(CODE "set(TFS_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    configure_file(\"${PROJECT_BINARY_DIR}/pkgconfig/${_pc}.pc.in\"
                   \"${PROJECT_BINARY_DIR}/pkgconfig/${_pc}.pc\" @ONLY)")
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/${_pc}.pc
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
