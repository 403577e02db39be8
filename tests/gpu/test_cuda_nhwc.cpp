// NHWC (channels_last) activations in the CUDA executor, against the CPU (NCHW, double):
//   - the executor in strict float32 and in bfloat16, both stems: logits, every gradient in
//     PyTorch's OIHW layout (NaN-poisoned first, so an unwritten element fails), running
//     statistics, and evaluation logits;
//   - the engine: gradients and parameters after an SGD step, and the convolutions' OHWI copy
//     following the float masters through the optimizer and load_state;
//   - our NHWC max pooling against its CPU twin element by element with poisoned outputs (global
//     average pooling's NHWC case is beside its NCHW one in test_cuda_layers.cpp), and the
//     layout conversions: the input's NCHW -> NHWC, and the weights' OIHW -> OHWI -> OIHW round
//     trip bit for bit.
// Host-side permutations here are written as plain nested loops, independent of
// include/resnet_ddp/kernel_math/layout.h, which tests/unit/test_layout_math.cpp checks on its own.
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "resnet_ddp/cpu/layers.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/cuda_engine.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/cuda/handles.h"
#include "resnet_ddp/cuda/layer_kernels.h"
#include "resnet_ddp/engine.h"
#include "resnet_ddp/rng.h"
#include "support/device_buffers.h"
#include "support/device_has_bf16.h"
#include "support/engine_batches.h"
#include "support/engine_configs.h"
#include "support/executor_check.h"
#include "support/layout_copies.h"
#include "support/layout_kernel_check.h"
#include "support/maxpool_places.h"
#include "support/mixed_precision_check.h"
#include "support/test_tensors.h"

using namespace rddp;
using cuda::DeviceBuffer;
using testing::Batch;
using testing::random_batch;
using testing::to_device;
using testing::poisoned;
using testing::to_host;
using testing::max_abs;
using testing::bitwise_equal;
using testing::nchw_to_nhwc;
using testing::nhwc_to_nchw;
using testing::window_places;
using testing::exact_options;
using testing::small_image_config;
using testing::in_format;
using testing::device_has_bf16;

namespace {

// Strict float32: the whole-network tolerance of the NCHW executor test
// (test_cuda_engine.cpp's kNetRel): relative to each tensor's largest value, plus its own.
constexpr double kFloatNetRel = 1e-3;
// bfloat16: test_cuda_bf16.cpp's bounds, from bfloat16's unit roundoff 2^-9 (that file derives
// them): every element within 64u of (scale + |value|), the relative L2 error within 24u.
constexpr double kBf16Roundoff = 0x1p-9;
// 1.5 times PyTorch's own autocast bf16 error on this network and batch (test_cuda_bf16.cpp).
constexpr double kBf16ElementRel = 640 * kBf16Roundoff;
constexpr double kBf16NormRel = 432 * kBf16Roundoff;

using Tolerance = testing::MixedTolerance;
const Tolerance kFloatTolerance{kFloatNetRel, std::numeric_limits<double>::infinity()};
const Tolerance kBf16Tolerance{kBf16ElementRel, kBf16NormRel};
testing::ErrorLedger ledger;  // the worst errors of the current test case, printed at its end

// One training forward, backward and evaluation forward of an NHWC executor against the CPU
// executor in double, from identical parameters.
void check_executor(Stem stem, bool bf16, BatchNormImpl batchnorm = BatchNormImpl::cudnn) {
  testing::check_executor_against_cpu({stem, bf16, CUDNN_TENSOR_NHWC, batchnorm},
                                      bf16 ? kBf16Tolerance : kFloatTolerance, &ledger);
}

}  // namespace

TEST_CASE("the NHWC executor matches the CPU executor in strict float32, both stems") {
  for (Stem stem : {Stem::cifar, Stem::imagenet}) check_executor(stem, /*bf16=*/false);
}

TEST_CASE("the NHWC bfloat16 executor matches the CPU executor within bfloat16's precision") {
  if (!device_has_bf16("bfloat16 NHWC cases")) return;
  ledger = {};
  for (Stem stem : {Stem::cifar, Stem::imagenet}) check_executor(stem, /*bf16=*/true);
  MESSAGE(ledger.summary(kBf16Roundoff, kBf16Tolerance));
}

// The configuration fused BatchNorm exists for: bfloat16 activations in NHWC. Its residual sum
// is rounded once where cuDNN's path rounds BatchNorm's output first, so it can only be closer.
TEST_CASE("the NHWC bfloat16 executor with fused BatchNorm matches the CPU executor") {
  if (!device_has_bf16("bfloat16 NHWC cases")) return;
  ledger = {};
  for (Stem stem : {Stem::cifar, Stem::imagenet})
    check_executor(stem, /*bf16=*/true, BatchNormImpl::fused);
  MESSAGE(ledger.summary(kBf16Roundoff, kBf16Tolerance));
}

// Two engines' states after the same training step, their gradients and running statistics
// compared within float32's tolerance.
struct StatesAfterStep {
  explicit StatesAfterStep(const ModelSpec& spec) : got(spec), want(spec) {}
  ModelState<float> got, want;
};

StatesAfterStep compare_states_after_step(Engine& got_engine, Engine& want_engine,
                                          const ModelSpec& spec) {
  StatesAfterStep states(spec);
  OptimizerState unused_a, unused_b;
  got_engine.save_state(states.got, unused_a);
  want_engine.save_state(states.want, unused_b);
  testing::check_mixed_flat(states.got.layout, TensorRole::parameter, "gradient",
                            states.got.grads, states.want.grads, kFloatTolerance, &ledger);
  testing::check_mixed_flat(states.got.layout, TensorRole::running_stat, "running",
                            states.got.running, states.want.running, kFloatTolerance, &ledger);
  return states;
}

TEST_CASE("an NHWC engine's SGD step matches the NCHW engine's, and its weight copy follows") {
  // SGD without momentum moves each parameter by lr * (g + wd * p): linear in the gradient, so
  // the parameters after the step agree as closely as the gradients do.
  EngineConfig nhwc = small_image_config(Stem::imagenet, 4, Precision::fp32);
  nhwc.optimizer.kind = OptimizerKind::sgd;
  nhwc.optimizer.lr = 0.1;
  nhwc.optimizer.momentum = 0.0;
  nhwc.optimizer.weight_decay = 1e-4;
  const EngineConfig nchw = nhwc;
  auto a = make_cuda_engine(nhwc, in_format(exact_options(), MemoryFormat::nhwc), 3);
  auto b = make_cuda_engine(nchw, exact_options(), 3);
  const Batch data = random_batch(nhwc, 4, 21);
  const auto eval_loss = [&](Engine& engine) {
    engine.eval_step(data.view());
    return engine.take_metrics().loss_sum;
  };
  const auto loss_tolerance = [](double loss) { return kFloatNetRel * (1.0 + std::fabs(loss)); };

  const double before = eval_loss(*b);
  CHECK(std::fabs(eval_loss(*a) - before) <= loss_tolerance(before));

  a->train_step(data.view(), nhwc.optimizer.lr, nullptr);
  b->train_step(data.view(), nchw.optimizer.lr, nullptr);
  a->take_metrics();
  b->take_metrics();
  const StatesAfterStep states = compare_states_after_step(*a, *b, nhwc.spec);
  const ModelState<float>& got = states.got;
  const ModelState<float>& want = states.want;
  // p' - p = -lr (g + wd p): compare the steps taken, with the gradients' tolerance.
  for (const TensorInfo& info : got.layout.tensors()) {
    if (info.role != TensorRole::parameter) continue;
    const double g_scale = max_abs(want.grads.data() + info.offset, info.numel);
    size_t failed = 0;
    for (size_t i = 0; i < info.numel; ++i) {
      const size_t k = info.offset + i;
      const double allowed =
          nhwc.optimizer.lr * kFloatNetRel * (g_scale + std::fabs(want.grads[k])) +
          4 * 0x1p-24 * std::fabs(want.params[k]);
      if (std::fabs(got.params[k] - want.params[k]) <= allowed) continue;
      if (failed++ < 3)
        FAIL_CHECK("stepped " << info.name << "[" << i << "] = " << got.params[k]
                              << ", expected " << want.params[k] << " within " << allowed);
    }
    CHECK_MESSAGE(failed == 0, "stepped " << info.name << ": " << failed << " off");
  }

  // The OHWI copy is rewritten from the stepped masters: a stale copy would keep `before`.
  const double after_step = eval_loss(*b);
  REQUIRE(std::fabs(after_step - before) > 4 * loss_tolerance(before));  // the test can tell
  CHECK(std::fabs(eval_loss(*a) - after_step) <= loss_tolerance(after_step));

  // load_state replaces the masters; the copy follows.
  auto fresh = make_cuda_engine(nchw, exact_options(), 3);
  ModelState<float> initial(nhwc.spec);
  OptimizerState unused;
  fresh->save_state(initial, unused);
  a->load_state(initial, nullptr);
  CHECK(std::fabs(eval_loss(*a) - before) <= loss_tolerance(before));
}

TEST_CASE("NHWC max pooling matches the CPU twin bit for bit, float and bfloat16") {
  const PoolShape shapes[] = {
      {2, 3, 9, 9, 3, 2, 1}, {1, 2, 8, 7, 3, 2, 1},   {2, 64, 16, 16, 3, 2, 1},
      {1, 1, 1, 1, 3, 2, 1}, {3, 5, 6, 6, 2, 2, 0},   {2, 2, 7, 5, 3, 1, 1},
      {1, 3, 10, 10, 5, 3, 2},
  };
  cuda::ComputeContext context;
  cudaStream_t stream = context.stream();
  for (const PoolShape& s : shapes) {
    CAPTURE(s.channels);
    CAPTURE(s.in_h);
    CAPTURE(s.in_w);
    CAPTURE(s.kernel);
    CAPTURE(s.stride);
    CAPTURE(s.pad);
    const int n = s.batch, c = s.channels, oh = s.out_h(), ow = s.out_w();
    const size_t in = static_cast<size_t>(n) * c * s.in_h * s.in_w;
    const size_t out = static_cast<size_t>(n) * c * oh * ow;
    Rng rng(derive_seed(in, "maxpool nhwc"));
    // A coarse grid of values, so that windows hold ties (the first maximum must win), and
    // values exact in bfloat16, so that both types see the same input.
    std::vector<float> x = testing::random_uniform<float>(rng, in, -4.0, 4.0);
    for (float& v : x) v = std::round(v * 2.0f) / 2.0f;
    std::vector<float> dy = testing::random_uniform<float>(rng, out);
    // Multiples of 1/16 in [-1, 1]: a sum of up to 9 of them is a multiple of 1/16 below 9,
    // at most 144 steps, within bfloat16's 8 significant bits, so every sum is exact in it.
    for (float& v : dy) v = std::round(v * 16.0f) / 16.0f;

    std::vector<float> want_y(out), want_dx(in);
    std::vector<int32_t> want_argmax(out);
    cpu::maxpool_forward(s, x.data(), want_y.data(), want_argmax.data());
    cpu::maxpool_backward(s, dy.data(), want_argmax.data(), want_dx.data());

    {  // float
      const auto d_x = to_device(nchw_to_nhwc(x, n, c, s.in_h, s.in_w), stream);
      const auto d_dy = to_device(nchw_to_nhwc(dy, n, c, oh, ow), stream);
      auto d_y = poisoned<float>(out, stream), d_dx = poisoned<float>(in, stream);
      auto d_argmax = poisoned<uint8_t>(out, stream);
      cuda::maxpool_forward(s, d_x.get(), d_y.get(), d_argmax.get(), stream, MemoryFormat::nhwc);
      cuda::maxpool_backward(s, d_dy.get(), d_argmax.get(), d_dx.get(), stream,
                             MemoryFormat::nhwc);
      CHECK(bitwise_equal(nhwc_to_nchw(to_host(d_y, stream), n, c, oh, ow), want_y));
      CHECK(nhwc_to_nchw(to_host(d_argmax, stream), n, c, oh, ow) ==
            window_places(s, want_argmax));
      CHECK(bitwise_equal(nhwc_to_nchw(to_host(d_dx, stream), n, c, s.in_h, s.in_w), want_dx));
    }
    {  // bfloat16: the inputs are exact in it, and so are the CPU's results
      std::vector<__nv_bfloat16> x16(x.size()), dy16(dy.size());
      std::transform(x.begin(), x.end(), x16.begin(), [](float v) { return __float2bfloat16(v); });
      std::transform(dy.begin(), dy.end(), dy16.begin(),
                     [](float v) { return __float2bfloat16(v); });
      const auto d_x = to_device(nchw_to_nhwc(x16, n, c, s.in_h, s.in_w), stream);
      const auto d_dy = to_device(nchw_to_nhwc(dy16, n, c, oh, ow), stream);
      auto d_y = poisoned<__nv_bfloat16>(out, stream), d_dx = poisoned<__nv_bfloat16>(in, stream);
      auto d_argmax = poisoned<uint8_t>(out, stream);
      cuda::maxpool_forward(s, d_x.get(), d_y.get(), d_argmax.get(), stream, MemoryFormat::nhwc);
      cuda::maxpool_backward(s, d_dy.get(), d_argmax.get(), d_dx.get(), stream,
                             MemoryFormat::nhwc);
      const auto widen = [](const std::vector<__nv_bfloat16>& v) {
        std::vector<float> out_values(v.size());
        std::transform(v.begin(), v.end(), out_values.begin(),
                       [](__nv_bfloat16 b) { return __bfloat162float(b); });
        return out_values;
      };
      CHECK(bitwise_equal(widen(nhwc_to_nchw(to_host(d_y, stream), n, c, oh, ow)), want_y));
      CHECK(nhwc_to_nchw(to_host(d_argmax, stream), n, c, oh, ow) ==
            window_places(s, want_argmax));
      CHECK(bitwise_equal(widen(nhwc_to_nchw(to_host(d_dx, stream), n, c, s.in_h, s.in_w)),
                          want_dx));
    }
  }
}

TEST_CASE("the input's NCHW -> NHWC conversion: float exact, 16-bit rounded like convert") {
  cuda::ComputeContext context;
  testing::check_input_to_nhwc<float>(3, 3, 7, 5, context.stream());
  testing::check_input_to_nhwc<__nv_bfloat16>(3, 3, 7, 5, context.stream());
  testing::check_input_to_nhwc<__half>(2, 3, 224, 224, context.stream());
  testing::check_input_to_nhwc<float>(3, 1, 28, 28, context.stream());
}

TEST_CASE("uint8 pixels -> normalised input: the loader's values, rounded like convert") {
  cuda::ComputeContext context;
  for (const MemoryFormat format : {MemoryFormat::nchw, MemoryFormat::nhwc}) {
    testing::check_pixels_to_input<float>(3, 3, 7, 5, format, context.stream());
    testing::check_pixels_to_input<__nv_bfloat16>(4, 3, 224, 224, format, context.stream());
    testing::check_pixels_to_input<__half>(2, 1, 33, 17, format, context.stream());
  }
}

TEST_CASE("conv weights go OIHW -> OHWI -> OIHW bit for bit, in one launch for all of them") {
  cuda::ComputeContext context;
  // ResNet-18's convolution weights (the 7x7 stem, 3x3 with 64 to 512 channels, the 1x1
  // downsamples), odd shapes, and one whose 65x65 taps overflow the kernel's tile.
  const std::vector<testing::WeightShape> shapes = {
      {64, 3, 7},   {64, 64, 3},   {128, 64, 3}, {128, 128, 3}, {128, 64, 1}, {256, 128, 3},
      {256, 256, 3}, {256, 128, 1}, {512, 256, 3}, {512, 512, 3}, {512, 256, 1}, {5, 7, 3},
      {3, 1000, 3}, {2, 3, 65}};
  testing::check_weight_permutations<float>(shapes, context.stream());
  testing::check_weight_permutations<__nv_bfloat16>(shapes, context.stream());
  testing::check_weight_permutations<__half>(shapes, context.stream());
}

