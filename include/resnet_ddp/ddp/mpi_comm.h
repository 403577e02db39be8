#pragma once
// Collectives on host memory over MPI, for the CPU engine and for host-side values (metrics,
// agreement checks) in any run.
#include <memory>

#include "resnet_ddp/ddp/comm.h"

namespace rddp::ddp {

// Over a duplicate of the context's world communicator, so its collectives never match
// another layer's. `watchdog` may be null; it must outlive the comm.
std::unique_ptr<Comm> make_mpi_comm(const DistributedContext& context, Watchdog* watchdog);

}  // namespace rddp::ddp
