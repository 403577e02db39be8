#include "resnet_ddp/cuda/captured_graph.h"

#include <exception>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/error.h"

namespace rddp::cuda {

CapturedGraph::~CapturedGraph() { reset(); }

void CapturedGraph::reset() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
}

std::string CapturedGraph::capture(cudaStream_t stream, const std::function<void()>& enqueue) {
  reset();
  RDDP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  std::string failure;
  try {
    enqueue();
  } catch (const std::exception& error) {
    failure = error.what();
  }
  // Ending the capture is what takes the stream out of capture mode, whatever happened: a
  // stream left capturing would refuse all later work, and a host waiting on it would hang.
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (failure.empty() && ended != cudaSuccess)
    failure = std::string("cudaStreamEndCapture returned ") + cudaGetErrorName(ended) + " (" +
              cudaGetErrorString(ended) + "): a call in the step is not capturable";
  if (failure.empty() && graph == nullptr) failure = "cudaStreamEndCapture returned no graph";
  if (failure.empty()) {
    graph_ = graph;
    const cudaError_t made = cudaGraphInstantiate(&exec_, graph_, 0);
    if (made != cudaSuccess) {
      failure = std::string("cudaGraphInstantiate returned ") + cudaGetErrorName(made) + " (" +
                cudaGetErrorString(made) + ")";
      exec_ = nullptr;
    }
  } else if (graph != nullptr) {
    cudaGraphDestroy(graph);
  }
  if (!failure.empty()) {
    reset();
    // Capture errors are not sticky; clear the last error so that the next checked call does
    // not report it as its own.
    (void)cudaGetLastError();
  }
  return failure;
}

void CapturedGraph::replay(cudaStream_t stream) const {
  RDDP_ASSERT(exec_ != nullptr);
  RDDP_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
}

size_t CapturedGraph::nodes() const {
  if (graph_ == nullptr) return 0;
  size_t count = 0;
  RDDP_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &count));
  return count;
}

}  // namespace rddp::cuda
