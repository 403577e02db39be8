#pragma once
// The model's stem from --stem, the image size and --init's file. auto takes the stem the file
// holds, so that weights a run saved start the next run as they are; without a file it is the
// CIFAR stem for images up to 64 pixels, else the ImageNet stem. A named stem the file does
// not hold is refused before any model is built.
#include <string>

#include "resnet_ddp/model_spec.h"
#include "resnet_ddp/tensor_file.h"

namespace rddp {

// `stem_flag` is --stem's value (auto, imagenet or cifar); `init` is --init's file, null when
// there is none. Throws Error naming the file and the fix when the two disagree.
Stem choose_stem(const std::string& stem_flag, int image_size, const TensorFile* init);

}  // namespace rddp
