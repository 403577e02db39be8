# A library found for one CUDA toolkit must not come from another toolkit's folder: with the
# compiler named as CUDA 12 while /usr/local/cuda (on PATH) is CUDA 13, the search for cuDNN
# falls back to /usr/local/cuda, and the program would be built for one CUDA and load another.

# rddp_cuda_major_of_toolkit_holding(PATH OUT): the major release of the nvcc in the nearest
# folder at most three levels above PATH that holds bin/nvcc, and that folder; empty if none.
function(rddp_cuda_major_of_toolkit_holding path out_major out_root)
  set(${out_major} "" PARENT_SCOPE)
  set(${out_root} "" PARENT_SCOPE)
  set(dir "${path}")
  if(NOT IS_DIRECTORY "${dir}")
    get_filename_component(dir "${dir}" DIRECTORY)
  endif()
  foreach(level RANGE 3)
    if(EXISTS "${dir}/bin/nvcc")
      execute_process(COMMAND "${dir}/bin/nvcc" --version OUTPUT_VARIABLE text ERROR_QUIET)
      if(text MATCHES "release ([0-9]+)\\.")
        set(${out_major} "${CMAKE_MATCH_1}" PARENT_SCOPE)
        set(${out_root} "${dir}" PARENT_SCOPE)
      endif()
      return()
    endif()
    get_filename_component(dir "${dir}" DIRECTORY)
  endforeach()
endfunction()

# rddp_require_same_cuda(WHAT HOW VAR...): when a path held by one of the cache variables VAR
# lies in a CUDA toolkit of another major release than CUDAToolkit_VERSION, adds WHAT with HOW
# to the missing dependencies and forgets every VAR, so that the next configure searches again.
function(rddp_require_same_cuda what how)
  foreach(var ${ARGN})
    if(NOT ${var} OR NOT EXISTS "${${var}}")
      continue()
    endif()
    rddp_cuda_major_of_toolkit_holding("${${var}}" major root)
    if(major STREQUAL "" OR major EQUAL CUDAToolkit_VERSION_MAJOR)
      continue()
    endif()
    set(_rddp_missing "${_rddp_missing}\n  - ${what}: ${${var}} belongs to the CUDA ${major} \
toolkit in ${root}, but this build compiles with CUDA ${CUDAToolkit_VERSION} \
(${CMAKE_CUDA_COMPILER}); ${how}" PARENT_SCOPE)
    foreach(stale ${ARGN})
      unset(${stale} CACHE)
    endforeach()
    return()
  endforeach()
endfunction()
