#pragma once
// Collectives on device memory over NCCL, for the CUDA engine. The communicator runs on its own
// stream: each operation first waits (by an event) for the work already enqueued on the
// engine's compute stream, and wait() makes the compute stream wait for the operation, so the
// host never blocks to order the two.
#include <memory>

#include "resnet_ddp/ddp/comm.h"

namespace rddp::ddp {

// Selects `device`, refuses MIG instances and two ranks on one GPU (check_one_rank_per_gpu),
// then rank 0 makes the NCCL unique id, MPI broadcasts it, and every rank joins with
// ncclCommInitRank. Collective over the context's ranks. Registers itself with the fatal
// path (ncclCommAbort) and its asynchronous errors with the watchdog, if any.
std::unique_ptr<Comm> make_nccl_comm(const DistributedContext& context, int device,
                                     void* compute_stream, Watchdog* watchdog);

}  // namespace rddp::ddp
