// libFuzzer harness: CIFAR's Python version, its pickles and its .tar.gz (fuzz_targets.h).
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return rddp::fuzz::run_harness<rddp::fuzz::CifarPickleTarget>(data, size);
}
