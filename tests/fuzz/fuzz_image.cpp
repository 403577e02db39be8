// libFuzzer harness: image files decoded as image folders decode them (fuzz_targets.h).
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return rddp::fuzz::run_harness<rddp::fuzz::ImageTarget>(data, size);
}
