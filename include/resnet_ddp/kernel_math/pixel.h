#pragma once
// ToTensor + Normalize of one pixel value, written once for the loader (src/data/normalize.cpp)
// and for the device's conversion of uploaded uint8 pixels (kernels/layout.cu), so that both
// give torchvision's bits.
#include <stdint.h>

#include "resnet_ddp/kernel_math/host_device.h"

namespace rddp::pixel {

// ToTensor divides by 255, Normalize subtracts the mean, then divides by the standard
// deviation: each rounded in float32, in this order. There is no product a compiler could fuse
// into an FMA, and nvcc's float division is IEEE-rounded unless fast maths is asked for, so the
// host and the device agree bit for bit.
RDDP_HD float normalized(uint8_t value, float mean, float stddev) {
  return (static_cast<float>(value) / 255.0f - mean) / stddev;
}

}  // namespace rddp::pixel
