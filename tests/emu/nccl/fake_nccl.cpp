// The NCCL calls of src/ddp/nccl_comm.cpp on the emulated device, so that the CUDA path's
// multi-rank code runs on the CPU under mpiexec: a communicator is an MPI communicator over the
// ranks that joined with one unique id, and a collective is an MPI nonblocking collective on
// the buffers (host memory under the emulator). Each collective starts in its stream's order and
// stays in flight on the stream until every rank has joined (emu::enqueue_async), as an NCCL
// kernel does, so the events that order the comm stream against the compute stream, the
// watchdog's view of an unfinished collective and ncclCommAbort are all exercised. A collective
// enqueued on a stream being captured is a node of the graph, started anew by each replay.
//
// Limits: every rank of MPI_COMM_WORLD must make its communicators in the same order (they are
// made by MPI_Comm_split over the world); buffers must be emulated device memory, as NCCL's must
// be device memory; only the types and reductions the project uses are offered, and anything
// else is refused with ncclInvalidArgument and a message from ncclGetLastError.
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "resnet_ddp/ddp/bf16_gradients.h"
#include "stream_work.h"

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0;
  int size = 0;
  std::atomic<bool> aborted{false};
};

namespace {

thread_local std::string last_error;

ncclResult_t refuse(ncclResult_t result, const std::string& why) {
  last_error = "emulated NCCL: " + why;
  return result;
}

size_t size_of(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

MPI_Datatype mpi_type(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: return MPI_INT8_T;
    case ncclUint8: return MPI_UINT8_T;
    case ncclInt32: return MPI_INT32_T;
    case ncclUint32: return MPI_UINT32_T;
    case ncclInt64: return MPI_INT64_T;
    case ncclUint64: return MPI_UINT64_T;
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    case ncclBfloat16: return MPI_UINT16_T;  // raw bits, summed by bf16_sum()
    default: return MPI_DATATYPE_NULL;
  }
}

void sum_bf16(void* in, void* inout, int* count, MPI_Datatype*) {
  rddp::ddp::accumulate_bf16(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout),
                              static_cast<size_t>(*count));
}

MPI_Op bf16_sum() {
  static MPI_Op op = [] {
    MPI_Op made = MPI_OP_NULL;
    MPI_Op_create(&sum_bf16, 1, &made);
    return made;
  }();
  return op;
}

// For floats, ncclAvg multiplies each rank's values by 1/ranks before the sum.
template <typename T>
void scale_into(const void* from, void* to, size_t count, T factor) {
  const T* in = static_cast<const T*>(from);
  T* out = static_cast<T*>(to);
  for (size_t i = 0; i < count; ++i) out[i] = in[i] * factor;
}

// One collective in flight: an MPI request, tested under a lock, since MPI forbids two threads
// completing one request, and the watchdog's thread tests it beside the owner's.
class Collective final : public emu::AsyncWork {
 public:
  explicit Collective(const ncclComm* comm) : comm_(comm) {}
  MPI_Request* request() { return &request_; }

  bool test() override {
    std::lock_guard<std::mutex> lock(mutex_);
    // An aborted communicator's operations return, complete or not, as after ncclCommAbort.
    if (done_ || comm_->aborted.load()) return true;
    int flag = 0;
    MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);
    done_ = flag != 0;
    return done_;
  }

 private:
  const ncclComm* comm_;
  std::mutex mutex_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool done_ = false;
};

ncclResult_t check_comm(ncclComm_t comm) {
  if (comm == nullptr) return refuse(ncclInvalidArgument, "the communicator is null");
  if (comm->aborted.load()) return refuse(ncclInvalidUsage, "the communicator was aborted");
  return ncclSuccess;
}

ncclResult_t check_buffer(const void* buffer, size_t bytes, const char* which) {
  if (bytes == 0 || emu::is_device_memory(buffer, bytes)) return ncclSuccess;
  return refuse(ncclInvalidArgument, std::string(which) + " (" + std::to_string(bytes) +
                                         " bytes) is not memory from cudaMalloc; NCCL needs device buffers");
}

// Starts `post` (which posts the MPI operation into the request) on `stream`.
ncclResult_t start_on(cudaStream_t stream, ncclComm_t comm, const std::function<void(MPI_Request*)>& post) {
  // By value: a stream being captured keeps the start for the graph's replays.
  const cudaError_t status = emu::enqueue_async(stream, [comm, post] {
    auto work = std::make_shared<Collective>(comm);
    post(work->request());
    return work;
  });
  if (status != cudaSuccess)
    return refuse(ncclInvalidUsage, "a collective on the legacy default stream spoils a CUDA graph capture");
  return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return refuse(ncclInvalidArgument, "version is null");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return refuse(ncclInvalidArgument, "the unique id is null");
  static std::atomic<int> made{0};
  *id = ncclUniqueId{};
  std::snprintf(id->internal, sizeof id->internal, "emulated nccl id %ld.%d", static_cast<long>(getpid()),
                made.fetch_add(1));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (comm == nullptr) return refuse(ncclInvalidArgument, "the communicator pointer is null");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return refuse(ncclInvalidUsage, "MPI must be initialized first: communicators are MPI's");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return refuse(ncclInvalidArgument, "rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  // Ranks with the same id get the same colour, so they form one communicator.
  uint32_t colour = 2166136261u;
  for (char byte : id.internal) colour = (colour ^ static_cast<unsigned char>(byte)) * 16777619u;
  auto made = std::make_unique<ncclComm>();
  MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(colour & 0x7fffffff), rank, &made->mpi);
  MPI_Comm_rank(made->mpi, &made->rank);
  MPI_Comm_size(made->mpi, &made->size);
  if (made->size != nranks || made->rank != rank) {
    const std::string why = "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " joined a group of " +
                            std::to_string(made->size) + " ranks as rank " + std::to_string(made->rank);
    MPI_Comm_free(&made->mpi);
    return refuse(ncclInvalidUsage, why);
  }
  *comm = made.release();
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (!comm->aborted.load()) MPI_Comm_free(&comm->mpi);
  delete comm;
  return ncclSuccess;
}

// Operations in flight return at once. The communicator is left allocated: their completion
// tests still read it, and the process is ending.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm != nullptr) comm->aborted.store(true);
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* result) {
  if (comm == nullptr || result == nullptr) return refuse(ncclInvalidArgument, "null argument");
  *result = ncclSuccess;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t) { return last_error.c_str(); }

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t bad = check_comm(comm)) return bad;
  const MPI_Datatype datatype = mpi_type(type);
  if (datatype == MPI_DATATYPE_NULL) return refuse(ncclInvalidArgument, "data type " + std::to_string(type) + " is not emulated");
  const bool floating = type == ncclFloat32 || type == ncclFloat64;
  if (type == ncclBfloat16 && op != ncclSum) return refuse(ncclInvalidArgument, "bfloat16 offers only the sum here");
  if (op == ncclAvg && !floating) return refuse(ncclInvalidArgument, "ncclAvg is emulated for float and double only");
  MPI_Op reduction = MPI_OP_NULL;
  switch (op) {
    case ncclSum: case ncclAvg: reduction = type == ncclBfloat16 ? bf16_sum() : MPI_SUM; break;
    case ncclProd: reduction = MPI_PROD; break;
    case ncclMax: reduction = MPI_MAX; break;
    case ncclMin: reduction = MPI_MIN; break;
    default: return refuse(ncclInvalidArgument, "reduction " + std::to_string(op) + " is not emulated");
  }
  const size_t bytes = count * size_of(type);
  if (ncclResult_t bad = check_buffer(send, bytes, "the send buffer")) return bad;
  if (ncclResult_t bad = check_buffer(recv, bytes, "the receive buffer")) return bad;
  if (count > static_cast<size_t>(INT32_MAX)) return refuse(ncclInvalidArgument, "more elements than MPI counts");
  const int n = static_cast<int>(count);
  return start_on(stream, comm, [=](MPI_Request* request) {
    if (op == ncclAvg) {
      if (type == ncclFloat32) scale_into<float>(send, recv, count, 1.0f / static_cast<float>(comm->size));
      else scale_into<double>(send, recv, count, 1.0 / comm->size);
      MPI_Iallreduce(MPI_IN_PLACE, recv, n, datatype, reduction, comm->mpi, request);
    } else {
      MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, n, datatype, reduction, comm->mpi, request);
    }
  });
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t bad = check_comm(comm)) return bad;
  const size_t bytes = count * size_of(type);
  if (size_of(type) == 0) return refuse(ncclInvalidArgument, "data type " + std::to_string(type) + " is not emulated");
  if (root < 0 || root >= comm->size) return refuse(ncclInvalidArgument, "root " + std::to_string(root));
  if (ncclResult_t bad = check_buffer(recv, bytes, "the receive buffer")) return bad;
  if (comm->rank == root)
    if (ncclResult_t bad = check_buffer(send, bytes, "the send buffer")) return bad;
  if (bytes > static_cast<size_t>(INT32_MAX)) return refuse(ncclInvalidArgument, "more bytes than MPI counts");
  return start_on(stream, comm, [=](MPI_Request* request) {
    if (comm->rank == root && send != recv) std::memmove(recv, send, bytes);
    MPI_Ibcast(recv, static_cast<int>(bytes), MPI_BYTE, root, comm->mpi, request);
  });
}

}  // extern "C"
