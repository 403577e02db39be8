// float16 mixed precision with dynamic loss scaling (Precision::fp16) against the CPU engine in
// float32, and the loss scaling's rules as torch.cuda.amp.GradScaler applies them: a step with
// an Inf gradient is skipped (parameters, moments and step count bit-unchanged) and halves the
// scale, finite steps grow it after the growth interval, the unscale by a power-of-two scale is
// exact, and a checkpoint brings the scale and the step count back.
//
// Tolerances come from PyTorch, as test_cuda_bf16.cpp explains: on an H100 (2026-11-22)
// PyTorch's autocast fp16 gradients of this network, batch and start lay from float64 by up to
// 485 u in relative L2 (u = 2^-11, float16's unit roundoff) and single elements by up to 1282 u
// of (the tensor's largest |value| + their own) (tests/gpu/mixed_precision_oracle.py, 6 seeds per
// stem, loss scale 1024). With 1.5 times that as the limit: each tensor's relative L2 error
// within 720u, each element within 1920u. The loss scale is a power of two, so scaling
// d(loss)/d(logits) and unscaling the gradients round nothing: the same relative tolerances
// apply to the gradients once divided by the scale.
#include <doctest/doctest.h>

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/cuda_engine.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/cuda/handles.h"
#include "resnet_ddp/cuda/kernels.h"
#include "resnet_ddp/engine.h"
#include "resnet_ddp/rng.h"
#include "support/engine_batches.h"
#include "support/engine_configs.h"
#include "support/first_step_check.h"
#include "support/mixed_precision_check.h"
#include "support/test_tensors.h"

using namespace rddp;
using cuda::DeviceBuffer;
using testing::Batch;
using testing::random_batch;
using testing::exact_options;
using testing::with_batchnorm;
using testing::heuristic_options;
using testing::small_image_config;

namespace {

constexpr double kFp16Roundoff = 0x1p-11;
constexpr double kNormRel = 720 * kFp16Roundoff;
constexpr double kElementRel = 1920 * kFp16Roundoff;

// A quarter of ResNet-18's widths, for the loss-scaling tests: skipping, halving and growing do
// not depend on them, and the emulated engine (tests/emu) runs these tests in CI on the CPU.
constexpr std::array<int, 4> kNarrow = {16, 32, 64, 128};

const testing::MixedTolerance kTolerance{kElementRel, kNormRel};
testing::ErrorLedger ledger;  // the worst errors of the current test case, printed at its end

// `got` divided by `divisor` (the loss scale) against `want`, both checks of the header.
void check_tensor(const std::string& name, const float* got, double divisor, const float* want,
                  size_t count) {
  testing::check_mixed_tensor(name, got, want, count, kTolerance, &ledger, divisor);
}

void poison(float* device, size_t count, cudaStream_t stream) {
  RDDP_CUDA_CHECK(cudaMemsetAsync(device, 0xff, count * sizeof(float), stream));
  RDDP_CUDA_CHECK(cudaStreamSynchronize(stream));
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Writes `value` into one gradient element once backward (and, in a job, the allreduce) is done,
// in stream order before the optimizer: what an overflow in float16 leaves behind.
class InjectGradient final : public StepHooks {
 public:
  InjectGradient(Engine& engine, size_t index, float value)
      : engine_(engine), index_(index), value_(value) {}
  void grad_ready(const TensorInfo&) override {}
  void before_optimizer() override {
    RDDP_CUDA_CHECK(cudaMemcpyAsync(engine_.grads() + index_, &value_, sizeof(float),
                                    cudaMemcpyHostToDevice,
                                    static_cast<cudaStream_t>(engine_.compute_stream())));
    RDDP_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(engine_.compute_stream())));
  }

 private:
  Engine& engine_;
  size_t index_;
  float value_;
};

}  // namespace

TEST_CASE("one float16 AdamW step of the CUDA engine matches the CPU engine's float32 step") {
  ledger = {};
  // cuDNN's BatchNorm and ours (with the ReLU and the residual add folded in), both stems.
  struct Case {
    Stem stem;
    BatchNormImpl batchnorm;
  };
  for (const Case& c : {Case{Stem::cifar, BatchNormImpl::cudnn},
                        Case{Stem::imagenet, BatchNormImpl::cudnn},
                        Case{Stem::cifar, BatchNormImpl::fused},
                        Case{Stem::imagenet, BatchNormImpl::fused}}) {
    const std::string stem_name = to_string(c.stem), batchnorm_name = to_string(c.batchnorm);
    CAPTURE(stem_name);
    CAPTURE(batchnorm_name);
    const EngineConfig config = small_image_config(c.stem, 4, Precision::fp16);
    CudaEngineOptions options = with_batchnorm(heuristic_options(), c.batchnorm);
    // The scale the PyTorch measurement of the header used; a power of two, so that the
    // unscale rounds nothing.
    options.loss_scale.init_scale = 1024.0;
    EngineConfig cpu_config = config;
    cpu_config.precision = Precision::fp32;
    auto cpu = make_cpu_engine(cpu_config, 5);
    auto gpu = make_cuda_engine(config, options, 5);

    ModelState<float> cpu_model(config.spec), gpu_model(config.spec);
    OptimizerState cpu_opt, gpu_opt;
    cpu->save_state(cpu_model, cpu_opt);
    const std::vector<float> params_before = cpu_model.params;
    cudaStream_t stream = static_cast<cudaStream_t>(gpu->compute_stream());
    // Each gradient tensor, not the padding between them, which backward never writes: NaN
    // there would reach the non-finite check and skip the step (as it did on an H100).
    for (const TensorInfo& info : gpu_model.layout.tensors())
      if (info.role == TensorRole::parameter) poison(gpu->grads() + info.offset, info.numel, stream);

    const Batch data = random_batch(config, 3, 31);
    const double lr = config.optimizer.lr;
    cpu->train_step(data.view(), lr, nullptr);
    gpu->train_step(data.view(), lr, nullptr);
    const Metrics cpu_metrics = cpu->take_metrics(), gpu_metrics = gpu->take_metrics();
    CHECK(gpu_metrics.count == 3);
    CHECK(gpu_metrics.skipped_steps == 0);
    // The reported loss is the loss, not the scaled one.
    CHECK(std::fabs(gpu_metrics.loss_sum - cpu_metrics.loss_sum) <=
          16 * kFp16Roundoff * (1.0 + std::fabs(cpu_metrics.loss_sum)));

    cpu->save_state(cpu_model, cpu_opt);
    gpu->save_state(gpu_model, gpu_opt);
    // The gradients in the engine are those of the scaled loss (as .grad before unscale_).
    const double scale = options.loss_scale.init_scale;
    for (const TensorInfo& info : gpu_model.layout.tensors())
      if (info.role == TensorRole::parameter)
        check_tensor("gradient " + info.name, gpu_model.grads.data() + info.offset, scale,
                     cpu_model.grads.data() + info.offset, info.numel);
    CHECK(gpu_opt.step_count == 1);
    CHECK(gpu_opt.has_loss_scale);
    CHECK(gpu_opt.loss_scale.scale == options.loss_scale.init_scale);
    CHECK(gpu_opt.loss_scale.growth_tracker == 1);

    // As the bfloat16 test: where the gradients agree in sign AdamW's first step moves p alike.
    testing::check_first_step(gpu_model.layout, config.optimizer, params_before, cpu_model.grads,
                              kElementRel, gpu_model.params, cpu_model.params);
  }
  MESSAGE(ledger.summary(kFp16Roundoff, kTolerance));
}

TEST_CASE("a float16 step with an Inf gradient is skipped and halves the scale") {
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::sgd}) {
    const std::string optimizer = to_string(kind);
    CAPTURE(optimizer);
    EngineConfig config = small_image_config(Stem::cifar, 4, Precision::fp16);
    config.spec.widths = kNarrow;
    config.optimizer.kind = kind;
    if (kind == OptimizerKind::sgd) config.optimizer.momentum = 0.9;
    auto gpu = make_cuda_engine(config, heuristic_options(), 3);
    const Batch data = random_batch(config, 4, 51);
    // One finite step first, so that the moments hold values a skip must keep.
    gpu->train_step(data.view(), config.optimizer.lr, nullptr);
    ModelState<float> before(config.spec), after(config.spec);
    OptimizerState opt_before, opt_after;
    gpu->save_state(before, opt_before);
    REQUIRE(opt_before.step_count == 1);
    REQUIRE(opt_before.loss_scale.scale == 65536.0f);

    for (const float bad : {std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()}) {
      CAPTURE(bad);
      gpu->save_state(before, opt_before);
      InjectGradient inject(*gpu, before.layout.at("layer2.0.conv1.weight").offset + 5, bad);
      gpu->train_step(data.view(), config.optimizer.lr, &inject);
      gpu->save_state(after, opt_after);
      CHECK(same_bits(after.params, before.params));
      CHECK(same_bits(opt_after.first_moment, opt_before.first_moment));
      CHECK(same_bits(opt_after.second_moment, opt_before.second_moment));
      CHECK(opt_after.step_count == opt_before.step_count);
      CHECK(opt_after.loss_scale.scale == opt_before.loss_scale.scale * 0.5f);
      CHECK(opt_after.loss_scale.growth_tracker == 0);
    }
    const Metrics metrics = gpu->take_metrics();
    CHECK(metrics.skipped_steps == 2);
    CHECK(std::isfinite(metrics.loss_sum));

    // Training goes on: the next finite step is taken with the lowered scale.
    gpu->train_step(data.view(), config.optimizer.lr, nullptr);
    gpu->save_state(after, opt_after);
    CHECK(opt_after.step_count == 2);
    CHECK(opt_after.loss_scale.scale == 16384.0f);
    CHECK_FALSE(same_bits(after.params, before.params));
    CHECK(gpu->take_metrics().skipped_steps == 0);
  }
}

TEST_CASE("the float16 loss scale grows after growth_interval finite steps, and resumes exactly") {
  EngineConfig config = small_image_config(Stem::cifar, 4, Precision::fp16);
  config.spec.widths = kNarrow;
  // Deterministic algorithms: the resumed engine below must reproduce this one's bits.
  CudaEngineOptions options = exact_options();
  options.loss_scale.init_scale = 1024.0f;
  options.loss_scale.growth_interval = 3;
  auto gpu = make_cuda_engine(config, options, 4);
  const Batch data = random_batch(config, 4, 61);
  ModelState<float> model(config.spec);
  OptimizerState opt;
  const float scales[] = {1024, 1024, 2048, 2048, 2048, 4096};
  const int trackers[] = {1, 2, 0, 1, 2, 0};
  for (int step = 0; step < 6; ++step) {
    CAPTURE(step);
    gpu->train_step(data.view(), 1e-4, nullptr);
    gpu->save_state(model, opt);
    CHECK(opt.loss_scale.scale == scales[step]);
    CHECK(opt.loss_scale.growth_tracker == trackers[step]);
    CHECK(opt.step_count == step + 1);
  }
  CHECK(gpu->take_metrics().skipped_steps == 0);

  // Resume: a fresh engine loaded with the state continues exactly as this one.
  opt.loss_scale = {2048.0f, 2};  // one step before growth
  gpu->load_state(model, &opt);
  auto resumed = make_cuda_engine(config, options, 99);
  resumed->load_state(model, &opt);
  ModelState<float> a(config.spec), b(config.spec);
  OptimizerState opt_a, opt_b;
  gpu->train_step(data.view(), 1e-4, nullptr);
  resumed->train_step(data.view(), 1e-4, nullptr);
  gpu->save_state(a, opt_a);
  resumed->save_state(b, opt_b);
  CHECK(opt_b.step_count == 7);
  CHECK(opt_b.loss_scale.scale == 4096.0f);
  CHECK(opt_b.loss_scale.growth_tracker == 0);
  CHECK(same_bits(a.params, b.params));
  CHECK(same_bits(opt_a.first_moment, opt_b.first_moment));
}

TEST_CASE("unscaling by a power-of-two scale in the optimizer kernels is exact") {
  cuda::Stream stream;
  const size_t elements = 4099;  // a vector part and a tail
  Rng rng(71);
  std::vector<float> params(elements), grads(elements), first(elements), second(elements);
  for (size_t i = 0; i < elements; ++i) {
    params[i] = static_cast<float>(rng.normal());
    grads[i] = static_cast<float>(1e-3 * rng.normal());
    first[i] = static_cast<float>(1e-3 * rng.normal());
    second[i] = static_cast<float>(1e-6 * rng.uniform());
  }
  const auto s = adamw::scalars<float>(1e-3, 1e-2, 0.9, 0.999, 1e-8, 3);
  const auto sgd_s = sgd::scalars<float>(0.1, 1e-4, 0.9, false);
  for (const float scale : {1.0f, 128.0f, 65536.0f, 0x1p24f}) {
    CAPTURE(scale);
    std::vector<float> scaled(grads);
    for (float& g : scaled) g *= scale;
    loss_scale::StepState state = loss_scale::initial_step_state(loss_scale::Config{}, 2);
    state.inverse_scale = loss_scale::inverse(scale);
    DeviceBuffer<loss_scale::StepState> d_state(1);
    cuda::copy_to_device(d_state.get(), &state, 1, stream.get());
    // Run once on the plain gradients without scaling, once scaled with the state.
    std::vector<float> results[2][3];
    for (int scaled_run = 0; scaled_run < 2; ++scaled_run) {
      DeviceBuffer<float> p(elements), g(elements), m(elements), v(elements);
      cuda::copy_to_device(p.get(), params.data(), elements, stream.get());
      cuda::copy_to_device(g.get(), (scaled_run ? scaled : grads).data(), elements, stream.get());
      cuda::copy_to_device(m.get(), first.data(), elements, stream.get());
      cuda::copy_to_device(v.get(), second.data(), elements, stream.get());
      cuda::adamw_step<float>(p.get(), g.get(), m.get(), v.get(), elements, s, stream.get(), {},
                              scaled_run ? d_state.get() : nullptr);
      cuda::sgd_step<float>(p.get(), g.get(), m.get(), elements, sgd_s, stream.get(), {},
                            scaled_run ? d_state.get() : nullptr);
      results[scaled_run][0] = cuda::download(p.get(), elements, stream.get());
      results[scaled_run][1] = cuda::download(m.get(), elements, stream.get());
      results[scaled_run][2] = cuda::download(v.get(), elements, stream.get());
    }
    for (int which = 0; which < 3; ++which) {
      CAPTURE(which);
      CHECK(same_bits(results[1][which], results[0][which]));
    }
  }
}
