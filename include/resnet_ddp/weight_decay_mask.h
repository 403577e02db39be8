#pragma once
// The parameters that --no-decay-norm-bias keeps out of weight decay: every tensor of one
// dimension (BatchNorm weights and biases, fc.bias), as PyTorch recipes do by putting the
// parameters with p.ndim <= 1 in a param group of weight_decay 0. The mask's format is
// include/resnet_ddp/kernel_math/weight_decay.h's.
#include <cstdint>
#include <vector>

#include "resnet_ddp/optimizer.h"
#include "resnet_ddp/param_layout.h"

namespace rddp {

// One bit per chunk of the flat parameter buffer, set for the chunks of one-dimensional
// parameters.
std::vector<uint32_t> norm_and_bias_mask(const ParamLayout& layout);

// The mask `config` asks for: empty where every parameter decays (the default).
std::vector<uint32_t> no_decay_mask(const OptimizerConfig& config, const ParamLayout& layout);

}  // namespace rddp
