#pragma once
// Bilinear resizing as Pillow does it (Image.resize with BILINEAR, which torchvision's Resize
// and RandomResizedCrop call on PIL images): when shrinking, the triangle filter is widened
// by the scale factor, so every source pixel contributes (antialiasing); a horizontal pass
// then a vertical one, each rounding to uint8 with Pillow's 22-bit fixed-point weights. The
// result matches Pillow 9 byte for byte. (torchvision on tensors without antialias=True
// samples only the 2x2 nearest pixels instead, which aliases when shrinking.)
#include "resnet_ddp/data/dataset.h"

namespace rddp::data {

Image resize_bilinear(const Image& image, int out_height, int out_width);

}  // namespace rddp::data
