# Default CUDA architectures: A100 (80) and H100 (90), plus V100 (70) where the toolkit
# still supports it (CUDA 12 and older; CUDA 13 dropped Volta). Override with
# -DCMAKE_CUDA_ARCHITECTURES=90 for a single, faster build.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(_rddp_archs "80;90")
  find_program(_rddp_nvcc nvcc HINTS ENV CUDACXX ENV CUDA_HOME ENV CUDA_PATH
               PATH_SUFFIXES bin PATHS /usr/local/cuda/bin)
  if(_rddp_nvcc)
    execute_process(COMMAND ${_rddp_nvcc} --version OUTPUT_VARIABLE _rddp_nvcc_version)
    if(_rddp_nvcc_version MATCHES "release ([0-9]+)\\.")
      if(CMAKE_MATCH_1 LESS 13)
        set(_rddp_archs "70;80;90")
      endif()
    endif()
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${_rddp_archs}" CACHE STRING
      "CUDA architectures to build for (70=V100, 80=A100, 90=H100)")
endif()
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
endif()
