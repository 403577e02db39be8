// libFuzzer harness: Tiny-ImageNet's val/val_annotations.txt (fuzz_targets.h).
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return rddp::fuzz::run_harness<rddp::fuzz::TinyImageNetTarget>(data, size);
}
