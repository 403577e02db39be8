#pragma once
// --no-decay-norm-bias through a whole engine: one training step at weight decay 0.5 with the
// mask, against the same step without it and at weight decay 0. The gradients of the first step
// do not depend on the optimizer, so every one-dimensional parameter (BatchNorm, fc.bias) must
// come out as at weight decay 0 and every other as with decay, bit for bit. Shared by the CPU
// engine's unit test and the CUDA engine's GPU test (emulated in CI).
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "resnet_ddp/engine.h"
#include "resnet_ddp/model_state.h"
#include "support/engine_batches.h"

namespace rddp::testing {

inline void check_norm_and_bias_undecayed(
    EngineConfig config, const std::function<std::unique_ptr<Engine>(const EngineConfig&)>& make) {
  config.optimizer.weight_decay = 0.5;
  const Batch data = random_batch(config, config.max_batch, 17);
  const auto stepped = [&](bool decay_norm_and_bias, double weight_decay) {
    EngineConfig c = config;
    c.optimizer.decay_norm_and_bias = decay_norm_and_bias;
    c.optimizer.weight_decay = weight_decay;
    const std::unique_ptr<Engine> engine = make(c);
    engine->train_step(data.view(), 0.01, nullptr);
    ModelState<float> model(c.spec);
    OptimizerState optimizer;
    engine->save_state(model, optimizer);
    return model.params;
  };
  const std::vector<float> masked = stepped(false, 0.5), decayed = stepped(true, 0.5),
                           plain = stepped(true, 0.0);
  ModelState<float> layout_of(config.spec);
  size_t excluded = 0;
  for (const TensorInfo& tensor : layout_of.layout.tensors()) {
    if (tensor.role != TensorRole::parameter) continue;
    CAPTURE(tensor.name);
    const bool one_dimensional = tensor.shape.size() <= 1;
    excluded += one_dimensional;
    const std::vector<float>& want = one_dimensional ? plain : decayed;
    CHECK(std::memcmp(masked.data() + tensor.offset, want.data() + tensor.offset,
                      tensor.numel * sizeof(float)) == 0);
  }
  CHECK(excluded == 41);
  // BatchNorm weights start at 1, so decay changes them: the check above can tell.
  const TensorInfo& bn1 = layout_of.layout.at("bn1.weight");
  CHECK(decayed[bn1.offset] != plain[bn1.offset]);
}

}  // namespace rddp::testing
