// bench/kernel_times.h on a GPU: the kernels `cuda_step_bench --kernel-csv` traces through CUPTI
// come back by name, one record a launch, launched on a stream or replayed from a CUDA graph that
// was instantiated before tracing started (as the benchmark's graph is). A machine without CUPTI
// says so and passes: the trace is a diagnostic the benchmark does without.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "kernel_times.h"
#include "resnet_ddp/cuda/check.h"

namespace {

__global__ void kernel_times_marker_kernel(float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = static_cast<float>(i);
}

// The launches of the marker kernel among the totals.
rddp::bench::KernelTotal marker_of(const rddp::bench::KernelTotals& totals) {
  for (const rddp::bench::KernelTotal& kernel : totals.sorted())
    if (kernel.name.find("kernel_times_marker_kernel") != std::string::npos) return kernel;
  return {};
}

}  // namespace

TEST_CASE("kernel times: CUPTI records each launch by name, from a stream and from a graph") {
  std::unique_ptr<rddp::bench::KernelTimes> times;
  try {
    times = std::make_unique<rddp::bench::KernelTimes>();
  } catch (const std::exception& error) {
    MESSAGE("no kernel times on this machine (cuda_step_bench --kernel-csv says the same): ",
            error.what());
    return;
  }
  constexpr int kValues = 1024;
  float* out = nullptr;
  RDDP_CUDA_CHECK(cudaMalloc(&out, kValues * sizeof(float)));
  cudaStream_t stream = nullptr;
  RDDP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // A graph of three launches, instantiated before the trace starts.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t replay = nullptr;
  RDDP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < 3; ++i)
    kernel_times_marker_kernel<<<kValues / 256, 256, 0, stream>>>(out, kValues);
  RDDP_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  RDDP_CUDA_CHECK(cudaGraphInstantiate(&replay, graph, 0));
  RDDP_CUDA_CHECK(cudaDeviceSynchronize());

  times->start();
  for (int i = 0; i < 5; ++i)
    kernel_times_marker_kernel<<<kValues / 256, 256, 0, stream>>>(out, kValues);
  RDDP_CUDA_CHECK(cudaGetLastError());
  for (int i = 0; i < 2; ++i) RDDP_CUDA_CHECK(cudaGraphLaunch(replay, stream));
  RDDP_CUDA_CHECK(cudaStreamSynchronize(stream));
  const rddp::bench::KernelTotals totals = times->stop();

  const rddp::bench::KernelTotal marker = marker_of(totals);
  MESSAGE("CUPTI recorded ", totals.launches(), " launches; the marker's: ", marker.launches,
          " under the name '", marker.name, "', ", marker.total_ns, " ns in all");
  CHECK(marker.launches == 5 + 2 * 3);
  CHECK(marker.total_ns > 0);
  CHECK(marker.min_ns <= marker.max_ns);
  // Demangled, as Nsight Systems prints it: the parameter list is there, the mangling is not.
  CHECK(marker.name.find("(float*, int)") != std::string::npos);

  RDDP_CUDA_CHECK(cudaGraphExecDestroy(replay));
  RDDP_CUDA_CHECK(cudaGraphDestroy(graph));
  RDDP_CUDA_CHECK(cudaStreamDestroy(stream));
  RDDP_CUDA_CHECK(cudaFree(out));
}
