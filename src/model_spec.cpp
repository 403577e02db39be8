#include "resnet_ddp/model_spec.h"

#include "resnet_ddp/error.h"

namespace rddp {

const char* to_string(Stem stem) { return stem == Stem::imagenet ? "imagenet" : "cifar"; }

Stem parse_stem(const std::string& text) {
  if (text == "imagenet") return Stem::imagenet;
  if (text == "cifar") return Stem::cifar;
  fail("unknown stem '", text, "': use 'imagenet' (7x7/2 conv + maxpool, as torchvision) or ",
       "'cifar' (3x3/1 conv, no maxpool, for 32x32 images)");
}

void ModelSpec::validate() const {
  if (in_channels < 1) fail("model: in_channels must be >= 1, got ", in_channels);
  if (num_classes < 1) fail("model: num_classes must be >= 1, got ", num_classes);
  for (int stage = 0; stage < 4; ++stage) {
    if (widths[stage] < 1) fail("model: width of stage ", stage + 1, " must be >= 1");
    if (blocks[stage] < 1) fail("model: stage ", stage + 1, " needs at least one block");
  }
}

NetDesc describe(const ModelSpec& spec) {
  spec.validate();
  NetDesc net;
  if (spec.stem == Stem::imagenet) {
    net.stem_conv = {"conv1", spec.in_channels, spec.widths[0], 7, 2, 3};
    net.stem_maxpool = true;
  } else {
    net.stem_conv = {"conv1", spec.in_channels, spec.widths[0], 3, 1, 1};
    net.stem_maxpool = false;
  }
  net.stem_bn = {"bn1", spec.widths[0]};

  int channels = spec.widths[0];
  for (int stage = 0; stage < 4; ++stage) {
    const int width = spec.widths[stage];
    for (int index = 0; index < spec.blocks[stage]; ++index) {
      // BasicBlock strides its first 3x3 conv; the identity path gets a 1x1 conv + BN
      // whenever its shape changes (torchvision's rule).
      const int stride = (stage > 0 && index == 0) ? 2 : 1;
      BasicBlockDesc block;
      block.name = "layer" + std::to_string(stage + 1) + "." + std::to_string(index);
      block.conv1 = {block.name + ".conv1", channels, width, 3, stride, 1};
      block.bn1 = {block.name + ".bn1", width};
      block.conv2 = {block.name + ".conv2", width, width, 3, 1, 1};
      block.bn2 = {block.name + ".bn2", width};
      block.has_downsample = stride != 1 || channels != width;
      if (block.has_downsample) {
        block.downsample_conv = {block.name + ".downsample.0", channels, width, 1, stride, 0};
        block.downsample_bn = {block.name + ".downsample.1", width};
      }
      net.blocks.push_back(block);
      channels = width;
    }
  }
  net.fc = {"fc", channels, spec.num_classes};
  return net;
}

}  // namespace rddp
