// bfloat16 mixed precision (Precision::bf16) against the CPU in float64/float32: the executor's
// logits, every gradient and the running statistics; the engine's loss, gradients and
// parameters after one AdamW step; and the bfloat16 weight copies following the float masters
// through the optimizer and load_state.
//
// Tolerances come from PyTorch, not from an estimate. On an H100 (2026-11-22) PyTorch's own
// autocast bf16 gradients of this network, batch and start (tests/gpu/mixed_precision_oracle.py,
// 6 seeds per stem) lay from float64 by up to 285 u in relative L2 (u = 2^-9, bfloat16's unit
// roundoff), in layer1.0.bn1.bias, and single elements by up to 429 u of (the tensor's largest
// |value| + their own). A batch of 4 with moved BatchNorm parameters is ill-conditioned: even
// PyTorch's float32 lies 2% from float64 in its worst tensor. Each tensor here is checked twice,
// with 1.5 times PyTorch's worst as the limit:
//   - its relative L2 error, ||got - want|| / ||want||, within kNormRel = 432u;
//   - every element within kElementRel = 640u of (the tensor's largest |value| + its own
//     |value|): a NaN, an unwritten element or a wrong channel still fails.
// The tests print the worst errors they met, in u, beside these limits.
// Gradients are poisoned with NaN before the step, so an element that no kernel wrote fails.
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/cuda_engine.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/cuda/handles.h"
#include "resnet_ddp/cuda/layer_kernels.h"
#include "resnet_ddp/engine.h"
#include "resnet_ddp/rng.h"
#include "support/device_has_bf16.h"
#include "support/engine_batches.h"
#include "support/engine_configs.h"
#include "support/executor_check.h"
#include "support/first_step_check.h"
#include "support/mixed_precision_check.h"
#include "support/test_tensors.h"

using namespace rddp;
using cuda::DeviceBuffer;
using testing::Batch;
using testing::random_batch;
using testing::heuristic_options;
using testing::small_image_config;
using testing::device_has_bf16;

namespace {

constexpr double kBf16Roundoff = 0x1p-9;
constexpr double kNormRel = 432 * kBf16Roundoff;
constexpr double kElementRel = 640 * kBf16Roundoff;

const testing::MixedTolerance kTolerance{kElementRel, kNormRel};
testing::ErrorLedger ledger;  // the worst errors of the current test case, printed at its end

template <typename Got, typename Ref>
void check_flat(const ParamLayout& layout, TensorRole role, const char* what,
                const std::vector<Got>& got, const std::vector<Ref>& want) {
  testing::check_mixed_flat(layout, role, what, got, want, kTolerance, &ledger);
}

void poison(float* device, size_t count, cudaStream_t stream) {
  // All bits set: a NaN in float.
  RDDP_CUDA_CHECK(cudaMemsetAsync(device, 0xff, count * sizeof(float), stream));
  RDDP_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// Forward (training and evaluation) and backward of the bfloat16 NCHW executor against the CPU
// executor in double, on both stems, with `batchnorm`'s kernels.
void check_executor(BatchNormImpl batchnorm) {
  for (Stem stem : {Stem::cifar, Stem::imagenet})
    testing::check_executor_against_cpu({stem, /*bf16=*/true, CUDNN_TENSOR_NCHW, batchnorm},
                                        kTolerance, &ledger);
}

}  // namespace

TEST_CASE("the bfloat16 executor matches the CPU executor in double within bfloat16's precision") {
  if (!device_has_bf16("bfloat16 cases")) return;
  ledger = {};
  check_executor(BatchNormImpl::cudnn);
  MESSAGE(ledger.summary(kBf16Roundoff, kTolerance));
}

// NCHW is the default layout at every precision, so this is what `--precision bf16 --batchnorm
// fused` runs: our kernels with the ReLU and the residual add folded in, NCHW's per-plane walk.
TEST_CASE("the bfloat16 executor with fused BatchNorm matches the CPU executor in double") {
  if (!device_has_bf16("bfloat16 cases")) return;
  ledger = {};
  check_executor(BatchNormImpl::fused);
  MESSAGE(ledger.summary(kBf16Roundoff, kTolerance));
}

// The fastest configuration's layout and BatchNorm with the graph API's convolutions: the same
// tolerance as the legacy algorithms'.
TEST_CASE("the bfloat16 NHWC executor with cuDNN's graph API for convolutions matches the CPU") {
  if (!device_has_bf16("bfloat16 cases")) return;
  ledger = {};
  testing::ExecutorSetting setting{Stem::imagenet, /*bf16=*/true, CUDNN_TENSOR_NHWC,
                                   BatchNormImpl::fused, cuda::ConvAlgorithmSearch::timed};
  setting.api = cuda::ConvApi::graph;
  const testing::ExecutorRun run =
      testing::check_executor_against_cpu(setting, kTolerance, &ledger);
  CHECK_MESSAGE(run.algorithms.find(": algorithm") == std::string::npos,
                "a convolution fell back to the legacy API:\n" << run.algorithms);
  MESSAGE(ledger.summary(kBf16Roundoff, kTolerance));
}

TEST_CASE("one bfloat16 AdamW step of the CUDA engine matches the CPU engine's float32 step") {
  ledger = {};
  if (!device_has_bf16("bfloat16 cases")) return;
  for (Stem stem : {Stem::cifar, Stem::imagenet}) {
    const std::string stem_name = to_string(stem);
    CAPTURE(stem_name);
    EngineConfig config = small_image_config(stem, 4, Precision::bf16);
    EngineConfig cpu_config = config;
    cpu_config.precision = Precision::fp32;
    auto cpu = make_cpu_engine(cpu_config, 5);
    auto gpu = make_cuda_engine(config, heuristic_options(), 5);

    ModelState<float> cpu_model(config.spec), gpu_model(config.spec);
    OptimizerState cpu_opt, gpu_opt;
    cpu->save_state(cpu_model, cpu_opt);
    const std::vector<float> params_before = cpu_model.params;
    cudaStream_t stream = static_cast<cudaStream_t>(gpu->compute_stream());
    poison(gpu->grads(), gpu_model.layout.parameter_elements(), stream);

    const Batch data = random_batch(config, 3, 31);  // below max_batch: prepared on first use
    const double lr = config.optimizer.lr;
    cpu->train_step(data.view(), lr, nullptr);
    gpu->train_step(data.view(), lr, nullptr);
    const Metrics cpu_metrics = cpu->take_metrics(), gpu_metrics = gpu->take_metrics();
    CHECK(gpu_metrics.count == 3);
    CHECK(std::fabs(gpu_metrics.loss_sum - cpu_metrics.loss_sum) <=
          16 * kBf16Roundoff * (1.0 + std::fabs(cpu_metrics.loss_sum)));

    cpu->save_state(cpu_model, cpu_opt);
    gpu->save_state(gpu_model, gpu_opt);
    check_flat(gpu_model.layout, TensorRole::parameter, "gradient", gpu_model.grads,
               cpu_model.grads);
    check_flat(gpu_model.layout, TensorRole::running_stat, "running", gpu_model.running,
               cpu_model.running);
    CHECK(gpu_opt.step_count == 1);
    CHECK(gpu_opt.first_moment.size() == cpu_opt.first_moment.size());

    // Where the gradients agree in sign both engines move p alike (first_step_check.h); the
    // float master update itself rounds as in float32.
    testing::check_first_step(gpu_model.layout, config.optimizer, params_before, cpu_model.grads,
                              kElementRel, gpu_model.params, cpu_model.params);
  }
  MESSAGE(ledger.summary(kBf16Roundoff, kTolerance));
}

TEST_CASE("the bfloat16 weight copies follow the optimizer and load_state") {
  if (!device_has_bf16("bfloat16 cases")) return;
  EngineConfig config = small_image_config(Stem::cifar, 4, Precision::bf16);
  // A step that moves this batch's loss from about 10.2 to 4.2 (the CPU engine in float32), far
  // beyond the tolerance, so that a stale copy shows. Much larger steps are no better: AdamW's
  // first step moves every weight by lr with the gradient's sign, and with the running
  // statistics still near their start the evaluated logits grow with each layer (lr 0.05: a loss
  // of 5e9), where bfloat16's rounding is amplified beyond any fixed relative tolerance.
  config.optimizer.lr = 3e-3;
  EngineConfig cpu_config = config;
  cpu_config.precision = Precision::fp32;
  auto cpu = make_cpu_engine(cpu_config, 9);
  auto gpu = make_cuda_engine(config, heuristic_options(), 9);
  const Batch data = random_batch(config, 4, 41);
  const auto eval_loss = [&](Engine& engine) {
    engine.eval_step(data.view());
    return engine.take_metrics().loss_sum;
  };
  const auto loss_tolerance = [](double loss) {
    return 16 * kBf16Roundoff * (1.0 + std::fabs(loss));
  };

  const double before = eval_loss(*cpu);
  CHECK(std::fabs(eval_loss(*gpu) - before) <= loss_tolerance(before));

  cpu->train_step(data.view(), config.optimizer.lr, nullptr);
  gpu->train_step(data.view(), config.optimizer.lr, nullptr);
  cpu->take_metrics();
  gpu->take_metrics();
  const double after_step = eval_loss(*cpu);
  const double moved = std::fabs(after_step - before);
  REQUIRE(moved > 4 * loss_tolerance(before));  // the test can tell
  // A stale copy would leave the GPU's loss near `before`, a whole `moved` away. The step's
  // bfloat16 rounding moves the evaluated loss by more than loss_tolerance (0.52 from 4.24 on an
  // H100), so the copy is judged against the step's size instead.
  CHECK(std::fabs(eval_loss(*gpu) - after_step) <= 0.25 * moved);

  // load_state replaces the float masters; the copies must follow before the next step. The
  // GPU engine loads the CPU engine's initial model back (saved from a fresh one).
  auto fresh = make_cpu_engine(cpu_config, 9);
  ModelState<float> initial(config.spec);
  OptimizerState unused;
  fresh->save_state(initial, unused);
  gpu->load_state(initial, nullptr);
  CHECK(std::fabs(eval_loss(*gpu) - before) <= loss_tolerance(before));
}

TEST_CASE("convert rounds float to the nearest bfloat16 and widens bfloat16 exactly") {
  cuda::Stream stream;
  Rng rng(3);
  // Random values of many magnitudes, plus the special cases of rounding.
  std::vector<float> values;
  for (int i = 0; i < 5000; ++i)
    values.push_back(static_cast<float>(rng.normal() * std::ldexp(1.0, i % 40 - 20)));
  for (float v : {0.0f, -0.0f, 1.0f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, 1.0f + 3 * 0x1p-8f,
                  3.4e38f, -3.4e38f, 1e-40f, INFINITY, -INFINITY, NAN})
    values.push_back(v);
  const size_t count = values.size();
  DeviceBuffer<float> d_values(count), d_back(count);
  DeviceBuffer<__nv_bfloat16> d_bf16(count);
  cuda::copy_to_device(d_values.get(), values.data(), count, stream.get());
  RDDP_CUDA_CHECK(cudaMemsetAsync(d_bf16.get(), 0xff, d_bf16.bytes(), stream.get()));
  RDDP_CUDA_CHECK(cudaMemsetAsync(d_back.get(), 0xff, d_back.bytes(), stream.get()));
  cuda::convert(static_cast<int64_t>(count), d_values.get(), d_bf16.get(), stream.get());
  cuda::convert(static_cast<int64_t>(count), d_bf16.get(), d_back.get(), stream.get());
  const auto bf16 = cuda::download(d_bf16.get(), count, stream.get());
  const auto back = cuda::download(d_back.get(), count, stream.get());
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    const __nv_bfloat16 want = __float2bfloat16_rn(values[i]);
    const float widened = static_cast<float>(want);
    // NaN payloads may differ between the host's and the device's conversions: NaN is enough.
    const bool nan = std::isnan(values[i]);
    const bool same_bf16 = nan ? std::isnan(static_cast<float>(bf16[i]))
                               : std::memcmp(&bf16[i], &want, sizeof(want)) == 0;
    const bool same_back =
        nan ? std::isnan(back[i]) : std::memcmp(&back[i], &widened, sizeof(widened)) == 0;
    if ((!same_bf16 || !same_back) && bad++ < 5)
      FAIL_CHECK("convert(" << values[i] << ") = " << back[i] << ", expected " << widened);
  }
  CHECK(bad == 0);
}
