# Finds every external dependency and fails once, at configure time, listing each missing
# one with how to get it. Produces the interface target rddp::deps.

set(_rddp_missing "")
macro(rddp_require found what how)
  if(NOT ${found})
    string(APPEND _rddp_missing "\n  - ${what}: ${how}")
  endif()
endmacro()

# CUDA toolkit: runtime and cuBLAS.
find_package(CUDAToolkit QUIET)
rddp_require(CUDAToolkit_FOUND "CUDA Toolkit (cudart, cuBLAS)"
  "Debian/Ubuntu: NVIDIA's cuda-toolkit package; cluster: `module load cuda`; or -DCUDAToolkit_ROOT=/path/to/cuda")
if(CUDAToolkit_FOUND AND NOT TARGET CUDA::cublas)
  set(_rddp_cublas_found FALSE)
  rddp_require(_rddp_cublas_found "cuBLAS" "install the CUDA Toolkit's libcublas (cuda-libraries-dev)")
endif()

# cuDNN and NCCL ship without CMake config files; look beside the toolkit, in *_ROOT, and in
# the usual system places.
set(_rddp_lib_hints ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib64)
set(_rddp_inc_hints ${CUDAToolkit_INCLUDE_DIRS})
foreach(_dep CUDNN NCCL)
  set(${_dep}_ROOT "${${_dep}_ROOT}" CACHE PATH "Where ${_dep} is installed")
endforeach()
find_path(CUDNN_INCLUDE_DIR cudnn.h
  HINTS ${CUDNN_ROOT} ENV CUDNN_ROOT ENV CUDNN_HOME ${_rddp_inc_hints} PATH_SUFFIXES include)
# pip's wheels (nvidia-cudnn-cu12, nvidia-nccl-cu12) ship only the versioned file names.
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 libcudnn.so.8 NAMES_PER_DIR
  HINTS ${CUDNN_ROOT} ENV CUDNN_ROOT ENV CUDNN_HOME ${_rddp_lib_hints} PATH_SUFFIXES lib64 lib)
set(_rddp_cudnn_found FALSE)
if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
  set(_rddp_cudnn_found TRUE)
endif()
rddp_require(_rddp_cudnn_found "cuDNN 8 or 9 (cudnn.h, libcudnn)"
  "Debian/Ubuntu: cudnn9-cuda-13 (or libcudnn9-dev-cuda-12); cluster: `module load cudnn`; \
or -DCUDNN_ROOT=/path/to/cudnn (pip's nvidia-cudnn-cu12: site-packages/nvidia/cudnn)")

find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${NCCL_ROOT} ENV NCCL_ROOT ENV NCCL_HOME ${_rddp_inc_hints} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
  HINTS ${NCCL_ROOT} ENV NCCL_ROOT ENV NCCL_HOME ${_rddp_lib_hints} PATH_SUFFIXES lib64 lib)
set(_rddp_nccl_found FALSE)
if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  set(_rddp_nccl_found TRUE)
endif()
rddp_require(_rddp_nccl_found "NCCL 2 (nccl.h, libnccl)"
  "Debian/Ubuntu: libnccl-dev; cluster: `module load nccl`; or -DNCCL_ROOT=/path/to/nccl \
(pip's nvidia-nccl-cu12: site-packages/nvidia/nccl)")

include(${CMAKE_CURRENT_LIST_DIR}/CudaToolkitMatch.cmake)
if(CUDAToolkit_FOUND)
  set(_rddp_cuda_major ${CUDAToolkit_VERSION_MAJOR})
  rddp_require_same_cuda("CUDA runtime and cuBLAS"
    "install them into that toolkit, or name a complete one with -DCMAKE_CUDA_COMPILER"
    CUDA_cudart_LIBRARY CUDA_cublas_LIBRARY CUDA_cublasLt_LIBRARY)
  rddp_require_same_cuda("cuDNN" "-DCUDNN_ROOT=/path/to/a cuDNN for CUDA ${_rddp_cuda_major} \
(pip's nvidia-cudnn-cu${_rddp_cuda_major}: site-packages/nvidia/cudnn)"
    CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
  rddp_require_same_cuda("NCCL" "-DNCCL_ROOT=/path/to/an NCCL for CUDA ${_rddp_cuda_major} \
(pip's nvidia-nccl-cu${_rddp_cuda_major}: site-packages/nvidia/nccl)"
    NCCL_INCLUDE_DIR NCCL_LIBRARY)
endif()

find_package(MPI QUIET COMPONENTS CXX)
rddp_require(MPI_CXX_FOUND "MPI (Open MPI, MPICH or a vendor MPI)"
  "Debian/Ubuntu: libopenmpi-dev openmpi-bin; cluster: `module load openmpi`; or -DMPI_HOME=/path/to/mpi")

# Only the tests use stb, to write the images they decode (every format decodes by Pillow's rules
# in src/data).
if(RDDP_BUILD_TESTS)
  find_path(STB_INCLUDE_DIR stb_image_write.h PATH_SUFFIXES stb HINTS ${STB_ROOT} ENV STB_ROOT)
  rddp_require(STB_INCLUDE_DIR "stb_image_write (stb_image_write.h), for the tests"
    "Debian/Ubuntu: libstb-dev; or -DSTB_ROOT=/dir/holding/stb_image_write.h; or -DRDDP_BUILD_TESTS=OFF")
endif()

# JPEGs decode with libjpeg-turbo, Pillow's decoder, so that their pixels are torchvision's.
# Its static archive, where installed, is preferred: the programs then run on nodes that have
# no libjpeg, or another one (a login node's modules differ from a compute node's).
option(RDDP_STATIC_JPEG "Link libjpeg's static archive when it is installed" ON)
if(RDDP_STATIC_JPEG)
  find_library(JPEG_LIBRARY_RELEASE NAMES libjpeg.a libjpeg-static.a
               HINTS ${JPEG_ROOT} ENV JPEG_ROOT PATH_SUFFIXES lib lib64)
endif()
find_package(JPEG QUIET)
rddp_require(JPEG_FOUND "libjpeg-turbo (jpeglib.h, libjpeg)"
  "Debian/Ubuntu: libjpeg62-turbo-dev (Ubuntu: libjpeg-turbo8-dev); RHEL: libjpeg-turbo-devel; or -DJPEG_ROOT=/path")

if(RDDP_BUILD_TESTS)
  find_path(DOCTEST_INCLUDE_DIR doctest/doctest.h HINTS ${DOCTEST_ROOT} ENV DOCTEST_ROOT PATH_SUFFIXES include)
  rddp_require(DOCTEST_INCLUDE_DIR "doctest (doctest/doctest.h), for the tests"
    "Debian/Ubuntu: doctest-dev; or -DDOCTEST_ROOT=/path; or -DRDDP_BUILD_TESTS=OFF")
endif()

find_package(Threads REQUIRED)
# The CPU executor parallelises its loops with OpenMP (GCC and Clang ship it).
find_package(OpenMP QUIET COMPONENTS CXX)
rddp_require(OpenMP_CXX_FOUND "OpenMP for C++" "Debian/Ubuntu: it comes with g++; for clang: libomp-dev")
find_package(ZLIB QUIET)
rddp_require(ZLIB_FOUND "zlib (gzip-compressed idx files)" "Debian/Ubuntu: zlib1g-dev")

if(_rddp_missing)
  message(FATAL_ERROR "resnet_ddp: missing dependencies:${_rddp_missing}\n"
                      "Run scripts/setup.sh (as root it installs Debian's packages).")
endif()

message(STATUS "resnet_ddp: CUDA ${CUDAToolkit_VERSION}, cuDNN ${CUDNN_LIBRARY}, NCCL ${NCCL_LIBRARY}, "
               "MPI ${MPI_CXX_VERSION}, libjpeg ${JPEG_LIBRARIES}, CUDA archs ${CMAKE_CUDA_ARCHITECTURES}")

add_library(rddp_deps INTERFACE)
add_library(rddp::deps ALIAS rddp_deps)
target_include_directories(rddp_deps SYSTEM INTERFACE ${CUDNN_INCLUDE_DIR} ${NCCL_INCLUDE_DIR})
target_link_libraries(rddp_deps INTERFACE
  CUDA::cudart CUDA::cublas CUDA::nvtx3 ${CUDNN_LIBRARY} ${NCCL_LIBRARY} MPI::MPI_CXX ZLIB::ZLIB JPEG::JPEG OpenMP::OpenMP_CXX Threads::Threads)
