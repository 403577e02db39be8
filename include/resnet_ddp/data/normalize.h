#pragma once
// ToTensor + Normalize: uint8 HWC samples to float NCHW, (x / 255 - mean) / std per channel,
// in float32 in the same order of operations as torchvision, so the values are PyTorch's.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rddp::data {

struct Normalization {
  std::string name;
  std::vector<float> mean;    // per channel, on the 0..1 scale
  std::vector<float> stddev;
};

// Per-channel mean and standard deviation of each data set's training pixels (population
// statistics over all pixels, values / 255). Names:
//   imagenet       (0.485, 0.456, 0.406) / (0.229, 0.224, 0.225): torchvision's ImageNet
//                  models and reference recipe.
//   cifar10        (0.4914, 0.4822, 0.4465) / (0.2470, 0.2435, 0.2616): the 50,000 CIFAR-10
//                  training images.
//   cifar100       (0.5071, 0.4865, 0.4409) / (0.2673, 0.2564, 0.2762): the 50,000 CIFAR-100
//                  training images.
//   mnist          (0.1307) / (0.3081): the 60,000 MNIST training images, as used by
//                  pytorch/examples.
//   fashion-mnist  (0.2860) / (0.3530): the 60,000 Fashion-MNIST training images (checked by
//                  a unit test against Debian's copy).
//   none           mean 0, std 1 for any channel count: ToTensor alone.
// Throws Error listing the names for an unknown one.
Normalization normalization_preset(const std::string& name, int channels);

// `nchw` receives count * channels * height * width floats. Throws Error when the preset's
// channel count differs from the images'.
void normalize_to_nchw(const uint8_t* hwc, size_t count, int height, int width, int channels,
                       const Normalization& normalization, float* nchw);

}  // namespace rddp::data
