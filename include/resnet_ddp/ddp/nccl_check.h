#pragma once
// RDDP_NCCL_CHECK(ncclAllReduce(...)): a failed NCCL call throws as cuda/check.h says.
#include <nccl.h>

#include <string>

#include "resnet_ddp/cuda/check.h"

namespace rddp::ddp {

namespace detail {

inline const char* nccl_hint(ncclResult_t status) {
  switch (status) {
    case ncclUnhandledCudaError:
      return "A CUDA call inside NCCL failed: rerun with NCCL_DEBUG=WARN to see which one";
    case ncclSystemError:
      return "A system call or the network failed inside NCCL (sockets, InfiniBand, shared "
             "memory): rerun with NCCL_DEBUG=INFO; in containers make /dev/shm large enough, and "
             "check that every node reaches the others (NCCL_SOCKET_IFNAME picks the interface)";
    case ncclRemoteError:
      return "Another rank or the network failed: look at the other ranks' messages first";
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return "NCCL was used wrongly, e.g. ranks that disagree on a buffer size: rerun with "
             "NCCL_DEBUG=WARN and report it with the command line";
    case ncclInternalError:
      return "NCCL failed internally: check that every node runs the same NCCL version, rerun "
             "with NCCL_DEBUG=INFO";
    default:
      return "Rerun with NCCL_DEBUG=INFO for NCCL's own account of what happened";
  }
}

}  // namespace detail

inline void check_nccl(ncclResult_t status, const char* call, const char* file, int line) {
  if (status == ncclSuccess) return;
  std::string what = ncclGetErrorString(status);
  // NCCL keeps a line about its last failure; it often names the peer or the interface.
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') what += std::string(": ") + last;
  cuda::detail::fail_call("NCCL", call, file, line, what, detail::nccl_hint(status));
}

}  // namespace rddp::ddp

#define RDDP_NCCL_CHECK(call) ::rddp::ddp::check_nccl((call), #call, __FILE__, __LINE__)
