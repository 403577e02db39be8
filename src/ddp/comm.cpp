// What every communicator shares: data type sizes, names, and the choice of backend.
#include "resnet_ddp/ddp/comm.h"

#include "resnet_ddp/ddp/mpi_comm.h"
#include "resnet_ddp/ddp/nccl_comm.h"
#include "resnet_ddp/error.h"

namespace rddp::ddp {

size_t size_of(DataType type) {
  switch (type) {
    case DataType::f32: return 4;
    case DataType::f64: return 8;
    case DataType::i64: return 8;
    case DataType::u8: return 1;
    case DataType::bf16: return 2;
  }
  RDDP_ASSERT(false);
  return 0;
}

const char* to_string(Reduction op) {
  switch (op) {
    case Reduction::sum: return "sum";
    case Reduction::average: return "average";
    case Reduction::min: return "min";
    case Reduction::max: return "max";
  }
  return "?";
}

std::shared_ptr<CommRequest> Comm::watch_compute(const std::string& what) {
  fail("internal error: the ", backend(), " communicator cannot watch a point of a compute stream (",
       what, "); please report this");
}

std::unique_ptr<Comm> make_comm(DeviceKind memory, const DistributedContext& context,
                                const CommOptions& options) {
  if (memory == DeviceKind::cpu) return make_mpi_comm(context, options.watchdog);
  return make_nccl_comm(context, options.device, options.compute_stream, options.watchdog);
}

}  // namespace rddp::ddp
