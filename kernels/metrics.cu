// Adds one step's loss and accuracy to running sums on the device, so that a step never waits
// for its metrics: the host reads the sums only when it asks for them (Engine::take_metrics).
#include <cuda_runtime.h>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/layer_kernels.h"

namespace rddp::cuda {
namespace {

__global__ void accumulate_metrics_kernel(const XentMetrics* step, int batch, MetricSums* sums,
                                          bool drop_nonfinite) {
  const XentMetrics m = *step;
  if (drop_nonfinite && !isfinite(m.loss)) {
    sums->nonfinite_losses += 1;
    sums->bad_labels += m.bad_labels;
    return;
  }
  // The step's loss is a mean; the sum weights it by the batch, as the CPU engine does.
  sums->loss_sum += m.loss * batch;
  sums->correct += m.correct;
  sums->correct_top5 += m.correct_top5;
  sums->count += batch;
  sums->bad_labels += m.bad_labels;
}

}  // namespace

void accumulate_metrics(const XentMetrics* step, int batch, MetricSums* sums, cudaStream_t stream,
                        bool drop_nonfinite) {
  accumulate_metrics_kernel<<<1, 1, 0, stream>>>(step, batch, sums, drop_nonfinite);
  RDDP_CUDA_CHECK_LAUNCH("accumulate_metrics_kernel");
}

}  // namespace rddp::cuda
