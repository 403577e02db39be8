// libFuzzer harness: CIFAR-10 and CIFAR-100 binary files (fuzz_targets.h).
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return rddp::fuzz::run_harness<rddp::fuzz::CifarTarget>(data, size);
}
