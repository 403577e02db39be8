#include "resnet_ddp/param_layout.h"

#include "resnet_ddp/error.h"

namespace rddp {

ParamLayout::ParamLayout(const NetDesc& net) {
  // Parameters in the order backward produces their gradients: the classifier, then the
  // blocks from last to first (main path before the downsample path), then the stem.
  add("fc.weight", TensorRole::parameter, {net.fc.out_features, net.fc.in_features});
  add("fc.bias", TensorRole::parameter, {net.fc.out_features});
  for (auto block = net.blocks.rbegin(); block != net.blocks.rend(); ++block) {
    add_batchnorm_params(block->bn2);
    add_conv(block->conv2);
    add_batchnorm_params(block->bn1);
    add_conv(block->conv1);
    if (block->has_downsample) {
      add_batchnorm_params(block->downsample_bn);
      add_conv(block->downsample_conv);
    }
  }
  add_batchnorm_params(net.stem_bn);
  add_conv(net.stem_conv);

  // Buffers in forward order; they are never bucketed, so their order is free.
  add_batchnorm_buffers(net.stem_bn);
  for (const auto& block : net.blocks) {
    add_batchnorm_buffers(block.bn1);
    add_batchnorm_buffers(block.bn2);
    if (block.has_downsample) add_batchnorm_buffers(block.downsample_bn);
  }
}

void ParamLayout::add(const std::string& name, TensorRole role, std::vector<int64_t> shape) {
  TensorInfo info;
  info.name = name;
  info.role = role;
  info.numel = 1;
  for (int64_t dim : shape) info.numel *= static_cast<size_t>(dim);
  info.shape = std::move(shape);
  switch (role) {
    case TensorRole::parameter:
      info.offset = parameter_elements_;
      parameter_count_ += info.numel;
      parameter_elements_ += (info.numel + kAlignElements - 1) / kAlignElements * kAlignElements;
      break;
    case TensorRole::running_stat:
      info.offset = running_stat_elements_;
      running_stat_elements_ += info.numel;
      break;
    case TensorRole::batch_counter:
      info.offset = batch_counter_elements_;
      batch_counter_elements_ += info.numel;
      break;
  }
  tensors_.push_back(std::move(info));
}

void ParamLayout::add_conv(const ConvDesc& conv) {
  add(conv.name + ".weight", TensorRole::parameter,
      {conv.out_channels, conv.in_channels, conv.kernel, conv.kernel});
}

void ParamLayout::add_batchnorm_params(const BatchNormDesc& bn) {
  add(bn.name + ".weight", TensorRole::parameter, {bn.channels});
  add(bn.name + ".bias", TensorRole::parameter, {bn.channels});
}

void ParamLayout::add_batchnorm_buffers(const BatchNormDesc& bn) {
  add(bn.name + ".running_mean", TensorRole::running_stat, {bn.channels});
  add(bn.name + ".running_var", TensorRole::running_stat, {bn.channels});
  add(bn.name + ".num_batches_tracked", TensorRole::batch_counter, {});
}

const TensorInfo* ParamLayout::find(const std::string& name) const {
  for (const auto& info : tensors_)
    if (info.name == name) return &info;
  return nullptr;
}

const TensorInfo& ParamLayout::at(const std::string& name) const {
  const TensorInfo* info = find(name);
  if (!info) fail("model has no tensor named '", name, "'");
  return *info;
}

}  // namespace rddp
