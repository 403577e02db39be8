#include "resnet_ddp/cuda/handles.h"

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/cudnn_check.h"
#include "resnet_ddp/cuda/cublas_check.h"

namespace rddp::cuda {

namespace {

// What NVIDIA recommends for cuBLAS on Hopper (32 MiB); older GPUs need less.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

}  // namespace

Stream::Stream() { RDDP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

Stream::~Stream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void Stream::synchronize() const { RDDP_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

Event::Event(EventTiming timing) {
  RDDP_CUDA_CHECK(cudaEventCreateWithFlags(
      &event_, timing == EventTiming::on ? cudaEventDefault : cudaEventDisableTiming));
}

Event::~Event() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

ComputeContext::ComputeContext() : cublas_workspace_(kCublasWorkspaceBytes) {
  cudnnHandle_t cudnn = nullptr;
  RDDP_CUDNN_CHECK(cudnnCreate(&cudnn));
  cudnn_.reset(cudnn);
  RDDP_CUDNN_CHECK(cudnnSetStream(cudnn_.get(), stream_.get()));
  cublasHandle_t cublas = nullptr;
  RDDP_CUBLAS_CHECK(cublasCreate(&cublas));
  cublas_.reset(cublas);
  // cublasSetStream resets the handle to cuBLAS's own workspace pool, so the workspace is set
  // after it.
  RDDP_CUBLAS_CHECK(cublasSetStream(cublas_.get(), stream_.get()));
  RDDP_CUBLAS_CHECK(
      cublasSetWorkspace(cublas_.get(), cublas_workspace_.get(), cublas_workspace_.bytes()));
}

ComputeContext::~ComputeContext() {
  // Work still queued may use the handles and the workspace: let it finish before they go.
  cudaStreamSynchronize(stream_.get());
}

}  // namespace rddp::cuda
