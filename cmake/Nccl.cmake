# NCCL for the multi-GPU lab: the header and library from the CUDA toolkit's folders (NVIDIA's packages and the
# CUDA containers put them there), the system's (Debian/Ubuntu libnccl-dev: /usr/include, /usr/lib/<arch>), or
# $NCCL_HOME. Defines the imported target LabKit::nccl and LABS_NCCL_FOUND; included once, from any lab that
# needs it.
if(TARGET LabKit::nccl)
  return()
endif()
find_path(LABS_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include)
# libnccl.so.2 too: a runtime-only install (libnccl2 without libnccl-dev) has no unversioned link.
find_library(LABS_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{NCCL_HOME}/lib $ENV{NCCL_HOME}/lib64)
if(LABS_NCCL_INCLUDE_DIR AND LABS_NCCL_LIBRARY)
  add_library(LabKit::nccl SHARED IMPORTED GLOBAL)
  set_target_properties(LabKit::nccl PROPERTIES IMPORTED_LOCATION ${LABS_NCCL_LIBRARY}
                                                INTERFACE_INCLUDE_DIRECTORIES ${LABS_NCCL_INCLUDE_DIR})
  set(LABS_NCCL_FOUND TRUE CACHE INTERNAL "")
  message(STATUS "NCCL: ${LABS_NCCL_LIBRARY} (header in ${LABS_NCCL_INCLUDE_DIR})")
else()
  set(LABS_NCCL_FOUND FALSE CACHE INTERNAL "")
endif()
