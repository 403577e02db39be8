// libFuzzer harness: packed data sets, train.rddp-pack (fuzz_targets.h).
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return rddp::fuzz::run_harness<rddp::fuzz::PackTarget>(data, size);
}
