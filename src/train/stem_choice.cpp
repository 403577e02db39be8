#include "resnet_ddp/train/stem_choice.h"

#include "resnet_ddp/error.h"
#include "resnet_ddp/weights.h"

namespace rddp {

Stem choose_stem(const std::string& stem_flag, int image_size, const TensorFile* init) {
  if (init == nullptr) {
    if (stem_flag == "auto") return image_size <= 64 ? Stem::cifar : Stem::imagenet;
    return parse_stem(stem_flag);
  }
  const Stem held = file_model_spec(*init).stem;
  if (stem_flag == "auto") return held;
  const Stem named = parse_stem(stem_flag);
  if (named != held)
    fail("--stem ", to_string(named), " disagrees with --init ", init->describe_source(),
         ", which holds a model with the ", to_string(held), " stem: pass --stem ", to_string(held),
         ", or leave --stem out (auto takes the file's stem)");
  return named;
}

}  // namespace rddp
