// --stem and --init together: auto takes the stem the file holds (recorded in its metadata, or
// read from conv1's kernel when the file records none); a named stem must be the file's.
#include <doctest/doctest.h>

#include "resnet_ddp/error.h"
#include "resnet_ddp/model_state.h"
#include "resnet_ddp/train/stem_choice.h"
#include "resnet_ddp/weights.h"

using namespace rddp;

namespace {

TensorFile weights_with_stem(Stem stem, bool record_spec) {
  ModelSpec spec;
  spec.stem = stem;
  spec.in_channels = 1;
  spec.num_classes = 10;
  spec.widths = {4, 8, 8, 8};
  const ModelState<float> state(spec);
  TensorFile file;
  if (record_spec) put_model_spec(spec, file.metadata);
  append_model_tensors(state, file);
  return file;
}

}  // namespace

TEST_CASE("without --init, auto is the CIFAR stem up to 64 pixels and the ImageNet stem above") {
  CHECK(choose_stem("auto", 28, nullptr) == Stem::cifar);
  CHECK(choose_stem("auto", 64, nullptr) == Stem::cifar);
  CHECK(choose_stem("auto", 65, nullptr) == Stem::imagenet);
  CHECK(choose_stem("imagenet", 28, nullptr) == Stem::imagenet);
  CHECK(choose_stem("cifar", 224, nullptr) == Stem::cifar);
}

TEST_CASE("with --init, auto takes the file's stem whatever the image size") {
  for (const bool recorded : {true, false}) {
    CAPTURE(recorded);
    const TensorFile imagenet = weights_with_stem(Stem::imagenet, recorded);
    const TensorFile cifar = weights_with_stem(Stem::cifar, recorded);
    CHECK(choose_stem("auto", 28, &imagenet) == Stem::imagenet);
    CHECK(choose_stem("auto", 224, &cifar) == Stem::cifar);
    CHECK(choose_stem("imagenet", 28, &imagenet) == Stem::imagenet);
    CHECK(choose_stem("cifar", 224, &cifar) == Stem::cifar);
  }
}

TEST_CASE("a named stem the --init file does not hold is refused with the fix") {
  const TensorFile imagenet = weights_with_stem(Stem::imagenet, true);
  CHECK_THROWS_WITH_AS(choose_stem("cifar", 28, &imagenet),
                       doctest::Contains("--stem cifar disagrees with --init tensor file, which "
                                         "holds a model with the imagenet stem: pass --stem "
                                         "imagenet, or leave --stem out"),
                       Error);
}
