#include "resnet_ddp/weight_decay_mask.h"

#include "resnet_ddp/error.h"
#include "resnet_ddp/kernel_math/weight_decay.h"

namespace rddp {

static_assert(ParamLayout::kAlignElements % weight_decay::kChunkElements == 0,
              "a parameter tensor must start on a chunk of the decay mask");

std::vector<uint32_t> norm_and_bias_mask(const ParamLayout& layout) {
  std::vector<uint32_t> mask(weight_decay::mask_words(layout.parameter_elements()), 0u);
  for (const TensorInfo& tensor : layout.tensors()) {
    if (tensor.role != TensorRole::parameter || tensor.shape.size() > 1) continue;
    RDDP_ASSERT(tensor.offset % weight_decay::kChunkElements == 0);
    const size_t first = tensor.offset / weight_decay::kChunkElements;
    const size_t end = weight_decay::chunks_of(tensor.offset + tensor.numel);
    for (size_t chunk = first; chunk < end; ++chunk) weight_decay::exclude(mask, chunk);
  }
  return mask;
}

std::vector<uint32_t> no_decay_mask(const OptimizerConfig& config, const ParamLayout& layout) {
  return config.decay_norm_and_bias ? std::vector<uint32_t>{} : norm_and_bias_mask(layout);
}

}  // namespace rddp
