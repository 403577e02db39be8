// NCCL collectives on device buffers, on a stream of their own, ordered against the
// engine's compute stream by events.
#include "resnet_ddp/ddp/nccl_comm.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <exception>
#include <mutex>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/ddp/nccl_check.h"
#include "resnet_ddp/ddp/context.h"
#include "resnet_ddp/ddp/fatal.h"
#include "resnet_ddp/ddp/gpu_assignment.h"
#include "resnet_ddp/ddp/mpi_check.h"
#include "resnet_ddp/ddp/watchdog.h"

namespace rddp::ddp {

namespace {

ncclDataType_t nccl_type(DataType type) {
  switch (type) {
    case DataType::f32: return ncclFloat32;
    case DataType::f64: return ncclFloat64;
    case DataType::i64: return ncclInt64;
    case DataType::u8: return ncclUint8;
    case DataType::bf16: return ncclBfloat16;  // NCCL 2.10 or later, built with CUDA 11 or later
  }
  RDDP_ASSERT(false);
  return ncclFloat32;
}

ncclRedOp_t nccl_op(Reduction op) {
  switch (op) {
    case Reduction::sum: return ncclSum;
    // For floats NCCL multiplies each input by 1/ranks before summing, as the MPI comm does.
    case Reduction::average: return ncclAvg;
    case Reduction::min: return ncclMin;
    case Reduction::max: return ncclMax;
  }
  RDDP_ASSERT(false);
  return ncclSum;
}

// Completion of one operation: an event recorded right after it on the stream it ran on (the
// comm stream; the compute stream for a replayed graph).
class NcclRequest final : public CommRequest {
 public:
  NcclRequest(int device, cudaStream_t ran_on, cudaStream_t compute_stream)
      : device_(device), compute_stream_(compute_stream) {
    RDDP_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    RDDP_CUDA_CHECK(cudaEventRecord(done_, ran_on));
  }
  ~NcclRequest() override { cudaEventDestroy(done_); }
  NcclRequest(const NcclRequest&) = delete;
  NcclRequest& operator=(const NcclRequest&) = delete;

  bool test() override {
    const cudaError_t status = cudaEventQuery(done_);
    if (status == cudaErrorNotReady) return false;
    RDDP_CUDA_CHECK(status);
    return true;
  }
  void wait() override { RDDP_CUDA_CHECK(cudaStreamWaitEvent(compute_stream_, done_, 0)); }
  void synchronize() override { RDDP_CUDA_CHECK(cudaEventSynchronize(done_)); }
  // From the watchdog's thread too. Its device is selected first: a thread's first CUDA call
  // would otherwise create a context on device 0, taking memory there from every rank. An
  // error counts as complete here, since the owner's next call reports it with its cause.
  bool observed_complete() const override {
    if (cudaSetDevice(device_) != cudaSuccess) return true;
    return cudaEventQuery(done_) != cudaErrorNotReady;
  }

 private:
  int device_;
  cudaStream_t compute_stream_;
  cudaEvent_t done_ = nullptr;
};

// A start-up call that blocks inside NCCL, watched like a collective: ncclCommInitRank waits for
// every rank, and a rank that never arrives (or a network NCCL cannot cross) would hang it.
class BlockingCall final : public CommRequest {
 public:
  std::atomic<bool> returned{false};
  bool test() override { return returned.load(); }
  void wait() override {}
  void synchronize() override {}
  bool observed_complete() const override { return returned.load(); }
};

class NcclComm final : public Comm {
 public:
  NcclComm(const DistributedContext& context, int device, void* compute_stream, Watchdog* watchdog)
      : watchdog_(watchdog),
        device_(device),
        compute_stream_(static_cast<cudaStream_t>(compute_stream)),
        rank_(context.rank()),
        size_(context.world_size()) {
    check_one_rank_per_gpu(context, device);
    ncclUniqueId id{};
    if (rank_ == 0) RDDP_NCCL_CHECK(ncclGetUniqueId(&id));
    RDDP_MPI_CHECK(MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, context.world()));
    RDDP_CUDA_CHECK(cudaSetDevice(device_));
    auto init = std::make_shared<BlockingCall>();
    if (watchdog_) watchdog_->watch("NCCL's start-up (ncclCommInitRank) of " + std::to_string(size_) + " ranks", init);
    RDDP_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
    init->returned = true;
    RDDP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    RDDP_CUDA_CHECK(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming));
    RDDP_CUDA_CHECK(cudaMalloc(&barrier_word_, sizeof(int32_t)));
    RDDP_CUDA_CHECK(cudaMemset(barrier_word_, 0, sizeof(int32_t)));
    register_abortable(this);
    if (watchdog_) error_source_ = watchdog_->add_error_source([this] { return async_error(); });
  }

  ~NcclComm() override {
    if (watchdog_) watchdog_->remove_error_source(error_source_);
    unregister_abortable(this);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!aborted_ && std::uncaught_exceptions() > 0) {
      // An error is on its way to fatal_abort(); waiting for peers that may have failed would
      // hang, so the communicator is aborted, as fatal_abort() would have done.
      ncclCommAbort(comm_);
    } else if (!aborted_) {
      // Outstanding operations finish first; nothing may throw from here.
      cudaStreamSynchronize(stream_);
      ncclCommDestroy(comm_);
    }
    cudaFree(barrier_word_);
    cudaEventDestroy(compute_done_);
    cudaStreamDestroy(stream_);
  }

  const char* backend() const override { return "nccl"; }
  DeviceKind memory() const override { return DeviceKind::cuda; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::shared_ptr<CommRequest> start_allreduce(void* data, size_t count, DataType type, Reduction op,
                                               const std::string& what) override {
    if (op == Reduction::average && (type == DataType::i64 || type == DataType::u8))
      fail("internal error: an average of ", what, " needs floating-point values");
    // The MPI comm offers only the sum on bfloat16; the same contract here keeps the backends
    // interchangeable.
    if (type == DataType::bf16 && op != Reduction::sum)
      fail("internal error: ", what, " asks for a ", to_string(op), " of bfloat16 values; only the sum is offered");
    after_compute();
    RDDP_NCCL_CHECK(ncclAllReduce(data, data, count, nccl_type(type), nccl_op(op), comm_, stream_));
    return watched(what);
  }

  std::shared_ptr<CommRequest> start_broadcast(void* data, size_t bytes, int root,
                                               const std::string& what) override {
    if (root < 0 || root >= size_) fail("internal error: broadcast of ", what, " from rank ", root, " of ", size_);
    after_compute();
    RDDP_NCCL_CHECK(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_));
    return watched(what);
  }

  std::shared_ptr<CommRequest> start_barrier(const std::string& what) override {
    // NCCL has no barrier: an allreduce of one word completes on no rank before all join.
    RDDP_NCCL_CHECK(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, comm_, stream_));
    return watched(what);
  }

  std::shared_ptr<CommRequest> watch_compute(const std::string& what) override {
    auto request = std::make_shared<NcclRequest>(device_, compute_stream_, compute_stream_);
    if (watchdog_) watchdog_->watch(what, request);
    return request;
  }

  std::string async_error() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) return {};
    ncclResult_t result = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &result) != ncclSuccess || result == ncclSuccess || result == ncclInProgress)
      return {};
    std::string message = std::string("NCCL reported an asynchronous error: ") + ncclGetErrorString(result);
    const char* last = ncclGetLastError(comm_);
    if (last != nullptr && last[0] != '\0') message += std::string(": ") + last;
    return message + ". Another rank or the network failed: look at the other ranks' messages first; "
                     "rerun with NCCL_DEBUG=WARN for NCCL's own account";
  }

  void abort() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) return;
    aborted_ = true;
    ncclCommAbort(comm_);
  }

 private:
  // The comm stream waits for what the engine has enqueued so far (the gradients of a bucket,
  // the buffers to broadcast) without blocking the host.
  void after_compute() {
    RDDP_CUDA_CHECK(cudaEventRecord(compute_done_, compute_stream_));
    RDDP_CUDA_CHECK(cudaStreamWaitEvent(stream_, compute_done_, 0));
  }

  // While the compute stream is being captured into a CUDA graph the operation only joins the
  // graph: its event cannot be waited for from the host until a replay runs it, so the
  // watchdog is not given it (the replay is watched instead: watch_compute).
  std::shared_ptr<CommRequest> watched(const std::string& what) {
    auto request = std::make_shared<NcclRequest>(device_, stream_, compute_stream_);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    RDDP_CUDA_CHECK(cudaStreamIsCapturing(compute_stream_, &capture));
    if (watchdog_ && capture == cudaStreamCaptureStatusNone) watchdog_->watch(what, request);
    return request;
  }

  Watchdog* watchdog_;
  int device_;
  cudaStream_t compute_stream_;
  int rank_, size_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t compute_done_ = nullptr;
  int32_t* barrier_word_ = nullptr;
  int error_source_ = -1;
  std::mutex mutex_;  // between abort() on the fatal path and the watchdog's polls
  bool aborted_ = false;
};

}  // namespace

std::unique_ptr<Comm> make_nccl_comm(const DistributedContext& context, int device, void* compute_stream,
                                     Watchdog* watchdog) {
  return std::make_unique<NcclComm>(context, device, compute_stream, watchdog);
}

}  // namespace rddp::ddp
