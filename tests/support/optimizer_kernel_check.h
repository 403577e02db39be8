#pragma once
// The AdamW and SGD kernels (cuda/kernels.h, kernels/optimizer_kernels.cu) against the CPU
// optimizer (src/optimizer.cpp), shared by the GPU test (tests/gpu/test_kernels.cu) and the
// emulated one (tests/emu/test_emulated_optimizers.cpp), which run the same checks at their own
// sizes: the vector loop, its tail, misaligned buffers (one element at a time), float and
// bfloat16 gradients, scalars by value and from device memory, the 16-bit weight copy, and the
// mask of parameters that take no weight decay.
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/kernels.h"
#include "resnet_ddp/optimizer.h"
#include "resnet_ddp/rng.h"
#include "support/device_array.h"
#include "support/test_tensors.h"
#include "resnet_ddp/kernel_math/weight_decay.h"

namespace rddp::testing::optimizer_check {

// (elements, offset): a buffer size and how many elements every pointer is shifted by.
using Size = std::pair<size_t, size_t>;

template <typename Grad>
std::vector<Grad> to_grad(const std::vector<float>& values) {
  std::vector<Grad> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<Grad>(values[i]);
  return out;
}

template <typename Grad>
std::vector<float> to_float(const std::vector<Grad>& values) {
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<float>(values[i]);
  return out;
}

// Kernel and twin evaluate the same float expressions in the same order; they differ only
// where nvcc fuses a*b+c into one FMA (one rounding fewer), a unit in the last place of the
// larger term per operation, ~10 operations per step. 32 ulps relative covers three steps;
// the absolute part, 8 ulps of the largest value in the buffer, covers results that cancel
// to far below the size of their terms (a moment whose gradient changed sign).
inline void check_buffer(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  REQUIRE(got.size() == want.size());
  float scale = 0;
  for (float v : want) scale = std::max(scale, std::abs(v));
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double tolerance = 32.0 * FLT_EPSILON * std::abs(want[i]) + 8.0 * FLT_EPSILON * scale;
    if (!(std::abs(got[i] - want[i]) <= tolerance) && bad++ < 5)
      FAIL_CHECK(std::string(what) << "[" << i << "] = " << got[i] << ", CPU twin " << want[i]);
  }
  CHECK(bad == 0);
}

inline constexpr double kLearningRates[] = {1e-2, 4e-2, 2e-3};  // a schedule that moves between steps

enum class ScalarSource { by_value, device_memory };

// Three steps of the kernel against three of CpuOptimizer<float>, from the same start, with
// the gradients the kernel sees (bf16 ones widened to float exactly).
// `no_decay` (include/resnet_ddp/kernel_math/weight_decay.h), when not empty, goes to both.
template <typename Grad>
void check_optimizer_kernel(const OptimizerConfig& config, size_t elements, size_t offset,
                            ScalarSource source, const Stream& stream,
                            const std::vector<uint32_t>& no_decay = {}) {
  Rng rng(derive_seed(elements * 8 + offset, to_string(config.kind)));
  std::vector<float> cpu_params = normal_floats(rng, elements, 1.0);
  CpuOptimizer<float> twin(config, elements, no_decay);
  DeviceArray<uint32_t> mask(no_decay.size());
  if (!no_decay.empty()) mask.upload(no_decay);
  const uint32_t* mask_or_null = no_decay.empty() ? nullptr : mask.get();
  const bool adamw = config.kind == OptimizerKind::adamw;
  const bool has_buffer = adamw || config.momentum != 0.0;

  DeviceArray<float> params(elements, offset), first(elements, offset), second(elements, offset);
  DeviceArray<Grad> grads(elements, offset);
  DeviceArray<adamw::Scalars<float>> adamw_scalars(1);
  DeviceArray<sgd::Scalars<float>> sgd_scalars(1);
  params.upload(cpu_params);
  RDDP_CUDA_CHECK(cudaMemset(first.get(), 0, elements * sizeof(float)));
  RDDP_CUDA_CHECK(cudaMemset(second.get(), 0, elements * sizeof(float)));

  for (double lr : kLearningRates) {
    const std::vector<Grad> step_grads = to_grad<Grad>(normal_floats(rng, elements, 0.1));
    grads.upload(step_grads);
    twin.step(cpu_params.data(), to_float(step_grads).data(), lr);
    if (adamw) {
      const auto s = adamw::scalars<float>(lr, config.weight_decay, config.beta1, config.beta2,
                                           config.eps, twin.step_count());
      if (source == ScalarSource::by_value) {
        cuda::adamw_step(params.get(), grads.get(), first.get(), second.get(), elements, s,
                         stream, {}, nullptr, mask_or_null);
      } else {
        adamw_scalars.upload({s});
        cuda::adamw_step(params.get(), grads.get(), first.get(), second.get(), elements,
                         static_cast<const adamw::Scalars<float>*>(adamw_scalars.get()), stream,
                         {}, nullptr, mask_or_null);
      }
    } else {
      const auto s = sgd::scalars<float>(lr, config.weight_decay, config.momentum,
                                         config.nesterov);
      float* buffer = has_buffer ? first.get() : nullptr;
      if (source == ScalarSource::by_value) {
        cuda::sgd_step(params.get(), grads.get(), buffer, elements, s, stream, {}, nullptr,
                       mask_or_null);
      } else {
        sgd_scalars.upload({s});
        cuda::sgd_step(params.get(), grads.get(), buffer, elements,
                       static_cast<const sgd::Scalars<float>*>(sgd_scalars.get()), stream, {},
                       nullptr, mask_or_null);
      }
    }
    stream.sync();
  }
  check_buffer(params.download(), cpu_params, "params");
  if (has_buffer) check_buffer(first.download(), twin.first_moment(), "first moment");
  if (adamw) check_buffer(second.download(), twin.second_moment(), "second moment");
}

// AdamW with weight decay at every size (float gradients with scalars by value, bfloat16 ones
// with scalars in device memory), and once without weight decay.
inline void check_adamw(std::initializer_list<Size> sizes, size_t no_decay_elements,
                        const Stream& stream) {
  OptimizerConfig config;  // AdamW, PyTorch's defaults
  config.weight_decay = 0.1;
  for (const Size& c : sizes) {
    CAPTURE(c.first);
    CAPTURE(c.second);
    check_optimizer_kernel<float>(config, c.first, c.second, ScalarSource::by_value, stream);
    check_optimizer_kernel<__nv_bfloat16>(config, c.first, c.second, ScalarSource::device_memory,
                                          stream);
  }
  config.weight_decay = 0.0;
  check_optimizer_kernel<float>(config, no_decay_elements, 0, ScalarSource::device_memory,
                                stream);
}

// SGD without momentum (no buffer), with momentum and with Nesterov momentum, at every size.
inline void check_sgd(std::initializer_list<Size> sizes, const Stream& stream) {
  struct Variant {
    double momentum;
    bool nesterov;
    double weight_decay;
  };
  for (const Variant& v : {Variant{0.0, false, 0.0}, Variant{0.9, false, 5e-4},
                           Variant{0.9, true, 1e-2}}) {
    OptimizerConfig config;
    config.kind = OptimizerKind::sgd;
    config.momentum = v.momentum;
    config.nesterov = v.nesterov;
    config.weight_decay = v.weight_decay;
    CAPTURE(v.momentum);
    CAPTURE(v.nesterov);
    for (const Size& c : sizes) {
      CAPTURE(c.first);
      CAPTURE(c.second);
      check_optimizer_kernel<float>(config, c.first, c.second, ScalarSource::by_value, stream);
      check_optimizer_kernel<__nv_bfloat16>(config, c.first, c.second,
                                            ScalarSource::device_memory, stream);
    }
  }
}

// A mask marking every third chunk (and the last, partial one) of a buffer of 37 chunks and a
// tail, with strong weight decay so that a decay wrongly applied or dropped shows: each optimizer
// against its twin, both vector loop and one element at a time (offset 1).
inline std::vector<uint32_t> every_third_chunk(size_t elements) {
  const size_t chunks = weight_decay::chunks_of(elements);
  std::vector<uint32_t> mask(weight_decay::mask_words(elements), 0u);
  for (size_t chunk = 0; chunk < chunks; ++chunk)
    if (chunk % 3 == 0 || chunk + 1 == chunks) weight_decay::exclude(mask, chunk);
  return mask;
}

inline void check_no_decay_mask(const Stream& stream) {
  const size_t elements = 64 * 37 + 5;
  const std::vector<uint32_t> mask = every_third_chunk(elements);
  OptimizerConfig adamw;
  adamw.weight_decay = 0.5;
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::sgd;
  sgd.momentum = 0.9;
  sgd.weight_decay = 0.5;
  for (const OptimizerConfig& config : {adamw, sgd}) {
    CAPTURE(to_string(config.kind));
    for (size_t offset : {size_t{0}, size_t{1}}) {
      CAPTURE(offset);
      check_optimizer_kernel<float>(config, elements, offset, ScalarSource::by_value, stream,
                                    mask);
      check_optimizer_kernel<__nv_bfloat16>(config, elements, offset,
                                            ScalarSource::device_memory, stream, mask);
    }
  }
}

// One step of each optimizer must round every updated parameter into the poisoned 16-bit copy
// (Copy: __nv_bfloat16 or __half), rounded to nearest even.
template <typename Copy>
void check_weight_copy(std::initializer_list<Size> sizes, const Stream& stream) {
  OptimizerConfig adamw;
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::sgd;
  sgd.momentum = 0.9;
  for (const OptimizerConfig& config : {adamw, sgd}) {
    for (const Size& c : sizes) {
      const size_t elements = c.first, offset = c.second;
      CAPTURE(elements);
      CAPTURE(offset);
      Rng rng(derive_seed(elements + offset, "bf16 copy"));
      DeviceArray<float> params(elements, offset), first(elements, offset),
          second(elements, offset), grads(elements, offset);
      DeviceArray<Copy> copy(elements, offset);
      params.upload(normal_floats(rng, elements, 1.0));
      grads.upload(normal_floats(rng, elements, 0.1));
      RDDP_CUDA_CHECK(cudaMemset(first.get(), 0, elements * sizeof(float)));
      RDDP_CUDA_CHECK(cudaMemset(second.get(), 0, elements * sizeof(float)));
      copy.poison();
      if (config.kind == OptimizerKind::adamw)
        cuda::adamw_step(params.get(), grads.get(), first.get(), second.get(), elements,
                         adamw::scalars<float>(1e-2, config.weight_decay, config.beta1,
                                               config.beta2, config.eps, 1),
                         stream, copy.get());
      else
        cuda::sgd_step(params.get(), grads.get(), first.get(), elements,
                       sgd::scalars<float>(1e-2, 0.0, config.momentum, false), stream,
                       copy.get());
      stream.sync();
      const std::vector<float> updated = params.download();
      const std::vector<Copy> got = copy.download();
      size_t bad = 0;
      for (size_t i = 0; i < elements; ++i) {
        const Copy want = static_cast<Copy>(updated[i]);  // round to nearest even
        if (std::memcmp(&got[i], &want, sizeof(want)) != 0 && bad++ < 5)
          FAIL_CHECK("copy[" << i << "] = " << static_cast<float>(got[i]) << ", expected "
                             << static_cast<float>(want) << " (parameter " << updated[i] << ")");
      }
      CHECK(bad == 0);
    }
  }
}

}  // namespace rddp::testing::optimizer_check
