// Each of our CUDA kernels against its CPU twin on fresh random inputs, through the checks
// shared with the emulated tests (support/xent_kernel_check.h, support/optimizer_kernel_check.h)
// at the GPU's sizes, and a captured AdamW step, which only a GPU can replay.
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <vector>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/kernels.h"
#include "resnet_ddp/model_spec.h"
#include "resnet_ddp/optimizer.h"
#include "resnet_ddp/param_layout.h"
#include "resnet_ddp/rng.h"
#include "support/device_array.h"
#include "support/optimizer_kernel_check.h"
#include "support/test_tensors.h"
#include "support/xent_kernel_check.h"

using namespace rddp;
using namespace rddp::testing;
using namespace rddp::testing::optimizer_check;

namespace {

size_t resnet18_parameter_elements() {
  return ParamLayout(describe(ModelSpec{})).parameter_elements();
}

}  // namespace

TEST_CASE("softmax_cross_entropy kernel matches its CPU twin") {
  Stream stream;
  // 256 and 257 classes sit on either side of the switch from a warp to a block per row.
  xent_check::check_random_logits({1, 2, 31, 64, 513}, {2, 10, 256, 257, 1000, 1001}, stream);
}

TEST_CASE("softmax_cross_entropy kernel: ties, huge logits, reproducible bits") {
  Stream stream;
  xent_check::check_ties_huge_and_bits(513, {10, 1000}, stream);
}

TEST_CASE("softmax_cross_entropy kernel flags labels outside [0, classes)") {
  Stream stream;
  xent_check::check_bad_labels(stream);
}

TEST_CASE("adamw kernel matches the CPU optimizer") {
  Stream stream;
  // 1001: a tail after the vector loop; offset 1: misaligned, one element at a time.
  check_adamw({{64, 0}, {1001, 0}, {1001, 1}, {1 << 20, 0}, {1 << 20, 1},
               {resnet18_parameter_elements(), 0}},
              4096, stream);
}

TEST_CASE("sgd kernel matches the CPU optimizer") {
  Stream stream;
  check_sgd({{1001, 1}, {1 << 20, 0}, {resnet18_parameter_elements(), 0}}, stream);
}

TEST_CASE("optimizer kernels leave the masked parameters out of weight decay") {
  Stream stream;
  check_no_decay_mask(stream);
}

TEST_CASE("a captured adamw step follows the schedule through its device scalars") {
  Stream stream;
  OptimizerConfig config;
  const size_t elements = 4096;
  Rng rng(17);
  std::vector<float> cpu_params = normal_floats(rng, elements, 1.0);
  const std::vector<float> grads = normal_floats(rng, elements, 0.1);
  CpuOptimizer<float> twin(config, elements);

  DeviceArray<float> params(elements), exp_avg(elements), exp_avg_sq(elements), d_grads(elements);
  DeviceArray<adamw::Scalars<float>> scalars(1);
  params.upload(cpu_params);
  d_grads.upload(grads);
  RDDP_CUDA_CHECK(cudaMemset(exp_avg.get(), 0, elements * sizeof(float)));
  RDDP_CUDA_CHECK(cudaMemset(exp_avg_sq.get(), 0, elements * sizeof(float)));

  cudaGraph_t graph;
  RDDP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cuda::adamw_step(params.get(), d_grads.get(), exp_avg.get(), exp_avg_sq.get(), elements,
                   static_cast<const adamw::Scalars<float>*>(scalars.get()), stream);
  RDDP_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  RDDP_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

  for (double lr : kLearningRates) {
    twin.step(cpu_params.data(), grads.data(), lr);
    scalars.upload({adamw::scalars<float>(lr, config.weight_decay, config.beta1, config.beta2,
                                          config.eps, twin.step_count())});
    RDDP_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    stream.sync();
  }
  RDDP_CUDA_CHECK(cudaGraphExecDestroy(exec));
  RDDP_CUDA_CHECK(cudaGraphDestroy(graph));
  check_buffer(params.download(), cpu_params, "params");
  check_buffer(exp_avg.download(), twin.first_moment(), "exp_avg");
  check_buffer(exp_avg_sq.download(), twin.second_moment(), "exp_avg_sq");
}

TEST_CASE("the optimizer kernels round every updated parameter into the bfloat16 copy") {
  Stream stream;
  // 1001 aligned: vector loop and tail; offset 1: one element at a time.
  check_weight_copy<__nv_bfloat16>({{1001, 0}, {1001, 1}, {1 << 20, 0}}, stream);
}
