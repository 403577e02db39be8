// --no-decay-norm-bias: which parameters the mask keeps out of weight decay (every
// one-dimensional one, as the PyTorch recipes' `p.ndim <= 1` param group), and that the CPU
// optimizer then updates them exactly as an optimizer of weight decay 0 would, and the others
// exactly as before. The kernels are held to this optimizer by the emulated and GPU tests
// (support/optimizer_kernel_check.h), PyTorch's param groups by parity.test_optimizer_parity.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "resnet_ddp/engine.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/model_spec.h"
#include "resnet_ddp/optimizer.h"
#include "resnet_ddp/param_layout.h"
#include "resnet_ddp/rng.h"
#include "resnet_ddp/weight_decay_mask.h"
#include "support/decay_mask_check.h"
#include "resnet_ddp/kernel_math/weight_decay.h"

using namespace rddp;

namespace {

bool is_norm_or_bias(const std::string& name) {
  const auto ends_with = [&](const std::string& tail) {
    return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return (name.find("bn") != std::string::npos || name.find("downsample.1") != std::string::npos) ||
         ends_with(".bias");
}

}  // namespace

TEST_CASE("the norm-and-bias mask holds every 1-D parameter of ResNet-18 and nothing else") {
  for (const Stem stem : {Stem::imagenet, Stem::cifar}) {
    ModelSpec spec;
    spec.stem = stem;
    spec.num_classes = stem == Stem::imagenet ? 1000 : 10;
    const ParamLayout layout(describe(spec));
    const std::vector<uint32_t> mask = norm_and_bias_mask(layout);
    size_t masked_tensors = 0, masked_values = 0;
    for (const TensorInfo& tensor : layout.tensors()) {
      if (tensor.role != TensorRole::parameter) continue;
      CAPTURE(tensor.name);
      const bool excluded = tensor.shape.size() <= 1;
      CHECK(excluded == is_norm_or_bias(tensor.name));
      size_t wrong = 0;
      for (size_t i = tensor.offset; i < tensor.offset + tensor.numel; ++i)
        wrong += weight_decay::applies(mask.data(), i) == excluded;
      CHECK(wrong == 0);
      masked_tensors += excluded;
      masked_values += excluded ? tensor.numel : 0;
    }
    // 20 BatchNorms (stem, 16 in the blocks, 3 in the downsample branches), weight and bias
    // each, and fc.bias: 4,800 channels twice, plus the classes.
    CHECK(masked_tensors == 41);
    CHECK(masked_values == 2 * 4800 + static_cast<size_t>(spec.num_classes));
    CHECK(no_decay_mask(OptimizerConfig{}, layout).empty());
    OptimizerConfig excluding;
    excluding.decay_norm_and_bias = false;
    CHECK(no_decay_mask(excluding, layout) == mask);
  }
}

TEST_CASE("masked parameters update as with weight decay 0, the others as with it, bit for bit") {
  const size_t elements = 64 * 9 + 17;
  std::vector<uint32_t> mask(weight_decay::mask_words(elements), 0u);
  for (size_t chunk : {1, 2, 6, 9}) weight_decay::exclude(mask, chunk);  // 9: the partial last
  Rng rng(7);
  std::vector<float> start(elements);
  for (float& p : start) p = static_cast<float>(rng.normal());
  std::vector<std::vector<float>> grads(3, std::vector<float>(elements));
  for (auto& step : grads)
    for (float& g : step) g = 0.1f * static_cast<float>(rng.normal());

  for (const OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::sgd}) {
    CAPTURE(to_string(kind));
    OptimizerConfig decaying;
    decaying.kind = kind;
    decaying.weight_decay = 0.3;
    if (kind == OptimizerKind::sgd) decaying.momentum = 0.9;
    OptimizerConfig plain = decaying;
    plain.weight_decay = 0.0;
    CpuOptimizer<float> masked(decaying, elements, mask), with_decay(decaying, elements),
        without_decay(plain, elements);
    std::vector<float> a = start, b = start, c = start;
    for (const auto& g : grads) {
      masked.step(a.data(), g.data(), 0.05);
      with_decay.step(b.data(), g.data(), 0.05);
      without_decay.step(c.data(), g.data(), 0.05);
    }
    size_t wrong = 0, differ = 0;
    for (size_t i = 0; i < elements; ++i) {
      const bool decays = weight_decay::applies(mask.data(), i);
      const float want = decays ? b[i] : c[i];
      wrong += std::memcmp(&a[i], &want, sizeof(float)) != 0;
      differ += b[i] != c[i];
    }
    CHECK(wrong == 0);
    CHECK(differ == elements);  // weight decay 0.3 changes every value: the check sees the mask
  }
}

TEST_CASE("a weight-decay mask of the wrong size is refused") {
  CHECK_THROWS_AS(CpuOptimizer<float>(OptimizerConfig{}, 64 * 40, std::vector<uint32_t>(3)),
                  Error);
}

TEST_CASE("the CPU engine leaves BatchNorm and biases out of weight decay under the flag") {
  for (const OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::sgd}) {
    CAPTURE(to_string(kind));
    EngineConfig config;
    config.spec.stem = Stem::cifar;
    config.spec.num_classes = 10;
    config.max_batch = 2;
    config.height = config.width = 8;
    config.optimizer.kind = kind;
    testing::check_norm_and_bias_undecayed(
        config, [](const EngineConfig& c) { return make_cpu_engine(c, 3); });
  }
}
