#pragma once
// Checks for MPI calls: RDDP_MPI_CHECK(MPI_Allgather(...)). Our communicators return errors
// (MPI_ERRORS_RETURN) rather than abort inside the library, so a failure becomes an Error that
// names file:line, the call and MPI's own description, and reaches the fatal path, which ends
// the whole job with the rank's message.
#include <mpi.h>

#include <string>

#include "resnet_ddp/error.h"

namespace rddp::ddp {

inline void check_mpi(int status, const char* call, const char* file, int line) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(status, text, &length) != MPI_SUCCESS) text[0] = '\0';
  fail("MPI call failed at ", file, ":", line, ": ", call, " returned ", status, " (", text,
       "). Another rank may have died or the network failed: look at the other ranks' messages "
       "first; Open MPI explains more with --mca btl_base_verbose 100");
}

}  // namespace rddp::ddp

#define RDDP_MPI_CHECK(call) ::rddp::ddp::check_mpi((call), #call, __FILE__, __LINE__)
