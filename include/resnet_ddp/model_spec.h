#pragma once
// ResNet-18 described as data. Defaults are torchvision's resnet18(); the `cifar` stem is the
// common 32x32 variant (3x3 stride-1 stem convolution, no max pooling).
#include <array>
#include <string>
#include <vector>

namespace rddp {

enum class Stem { imagenet, cifar };

const char* to_string(Stem stem);
Stem parse_stem(const std::string& text);  // throws Error naming the accepted values

struct ModelSpec {
  Stem stem = Stem::imagenet;
  int in_channels = 3;
  int num_classes = 1000;
  std::array<int, 4> widths = {64, 128, 256, 512};
  std::array<int, 4> blocks = {2, 2, 2, 2};

  void validate() const;  // throws Error on a value no network can be built from
};

// The layers of the network in forward order, each with its torchvision state_dict prefix.
struct ConvDesc {
  std::string name;  // e.g. "layer2.0.downsample.0"
  int in_channels = 0, out_channels = 0, kernel = 0, stride = 1, pad = 0;
};

struct BatchNormDesc {
  std::string name;  // e.g. "layer2.0.downsample.1"
  int channels = 0;
};

struct BasicBlockDesc {
  std::string name;  // e.g. "layer2.0"
  ConvDesc conv1, conv2;
  BatchNormDesc bn1, bn2;
  bool has_downsample = false;
  ConvDesc downsample_conv;
  BatchNormDesc downsample_bn;
};

struct LinearDesc {
  std::string name;  // "fc"
  int in_features = 0, out_features = 0;
};

struct NetDesc {
  ConvDesc stem_conv;
  BatchNormDesc stem_bn;
  bool stem_maxpool = true;  // maxpool 3x3 stride 2 pad 1 after the stem ReLU
  std::vector<BasicBlockDesc> blocks;
  LinearDesc fc;
};

NetDesc describe(const ModelSpec& spec);

// Spatial size after a convolution or pooling window. Every window of ResNet-18 is padded
// enough that any input of at least 1x1 keeps at least 1x1, so the net accepts every size.
inline int window_output_size(int input, int kernel, int stride, int pad) {
  return (input + 2 * pad - kernel) / stride + 1;
}

// Calls visit(conv, input_size) for every convolution of `net` in forward order (a block's
// downsampling convolution after its conv2), for square inputs of `size`.
template <typename Visit>
void for_each_conv(const NetDesc& net, int size, Visit visit) {
  const auto conv = [&visit](const ConvDesc& c, int in) {
    visit(c, in);
    return window_output_size(in, c.kernel, c.stride, c.pad);
  };
  int spatial = conv(net.stem_conv, size);
  if (net.stem_maxpool) spatial = window_output_size(spatial, 3, 2, 1);
  for (const BasicBlockDesc& block : net.blocks) {
    const int in = spatial;
    spatial = conv(block.conv1, in);
    conv(block.conv2, spatial);
    if (block.has_downsample) conv(block.downsample_conv, in);
  }
}

}  // namespace rddp
