# Chooses the CUDA compiler and, unless CMAKE_CUDA_ARCHITECTURES or the CUDAARCHS environment
# variable names them, the architectures: A100 (80) and H100 (90), plus V100 (70) where the
# toolkit still supports it (CUDA 12 and older; CUDA 13 dropped Volta). The architectures
# follow the nvcc the build will use, named (first that is set wins) by
#   -DCMAKE_CUDA_COMPILER=/path/bin/nvcc, -DCUDAToolkit_ROOT=/path, the CUDACXX environment
#   variable, the CUDAToolkit_ROOT environment variable;
# else nvcc on PATH, else /usr/local/cuda/bin/nvcc.
# Included before project(), and on its own by tests/cli/cuda_arch_defaults.

set(_rddp_nvcc "")
set(_rddp_named_by "")
set(_rddp_root_set FALSE)
if(DEFINED CUDAToolkit_ROOT AND NOT CUDAToolkit_ROOT STREQUAL "")
  set(_rddp_root_set TRUE)
endif()
if(DEFINED CMAKE_CUDA_COMPILER AND NOT CMAKE_CUDA_COMPILER STREQUAL "")
  set(_rddp_nvcc "${CMAKE_CUDA_COMPILER}")
  set(_rddp_named_by "CMAKE_CUDA_COMPILER")
elseif(NOT "$ENV{CUDACXX}" STREQUAL "" AND NOT _rddp_root_set)
  # CMake's CUDA language takes CUDACXX itself, with any arguments it carries.
  get_filename_component(_rddp_nvcc "$ENV{CUDACXX}" PROGRAM)
  set(_rddp_named_by "the CUDACXX environment variable")
else()
  if(_rddp_root_set)
    set(_rddp_root "${CUDAToolkit_ROOT}")
    set(_rddp_named_by "CUDAToolkit_ROOT")
  elseif(NOT "$ENV{CUDAToolkit_ROOT}" STREQUAL "")
    set(_rddp_root "$ENV{CUDAToolkit_ROOT}")
    set(_rddp_named_by "the CUDAToolkit_ROOT environment variable")
  else()
    set(_rddp_root "")
  endif()
  if(NOT _rddp_root STREQUAL "")
    # CMake's CUDA language looks for nvcc on PATH, not in CUDAToolkit_ROOT.
    if(NOT EXISTS "${_rddp_root}/bin/nvcc")
      message(FATAL_ERROR "resnet_ddp: ${_rddp_named_by} is ${_rddp_root}, which has no "
        "bin/nvcc. Point it at the CUDA toolkit's top folder (the one holding bin/nvcc).")
    endif()
    set(_rddp_nvcc "${_rddp_root}/bin/nvcc")
  else()
    find_program(_rddp_nvcc_found nvcc PATHS /usr/local/cuda/bin NO_CACHE)
    if(_rddp_nvcc_found)
      set(_rddp_nvcc "${_rddp_nvcc_found}")
      set(_rddp_named_by "PATH or /usr/local/cuda")
    endif()
  endif()
  if(NOT _rddp_nvcc STREQUAL "")
    # Pinned, so that the language is enabled with the nvcc whose version chose the
    # architectures.
    set(CMAKE_CUDA_COMPILER "${_rddp_nvcc}" CACHE FILEPATH "CUDA compiler")
  endif()
endif()

set(_rddp_cuda_release "")
if(NOT _rddp_nvcc STREQUAL "")
  execute_process(COMMAND "${_rddp_nvcc}" --version OUTPUT_VARIABLE _rddp_nvcc_version
                  ERROR_QUIET RESULT_VARIABLE _rddp_nvcc_result)
  if(_rddp_nvcc_result EQUAL 0 AND _rddp_nvcc_version MATCHES "release ([0-9]+)\\.([0-9]+)")
    set(_rddp_cuda_release "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
    set(_rddp_cuda_major "${CMAKE_MATCH_1}")
  endif()
endif()

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  if(NOT "$ENV{CUDAARCHS}" STREQUAL "")
    set(_rddp_archs "$ENV{CUDAARCHS}")
  elseif(NOT _rddp_cuda_release STREQUAL "" AND _rddp_cuda_major LESS 13)
    set(_rddp_archs "70;80;90")
  else()
    set(_rddp_archs "80;90")
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${_rddp_archs}" CACHE STRING
      "CUDA architectures to build for (70=V100, 80=A100, 90=H100)")
endif()

if(_rddp_nvcc STREQUAL "")
  message(STATUS "resnet_ddp: no nvcc named or found; "
                 "CUDA architectures ${CMAKE_CUDA_ARCHITECTURES}")
elseif(_rddp_cuda_release STREQUAL "")
  message(STATUS "resnet_ddp: nvcc ${_rddp_nvcc} (from ${_rddp_named_by}) printed no release "
                 "with --version; CUDA architectures ${CMAKE_CUDA_ARCHITECTURES}")
else()
  message(STATUS "resnet_ddp: nvcc ${_rddp_nvcc} (CUDA ${_rddp_cuda_release}, from "
                 "${_rddp_named_by}); CUDA architectures ${CMAKE_CUDA_ARCHITECTURES}")
endif()
