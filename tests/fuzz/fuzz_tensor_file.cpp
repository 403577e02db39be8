// libFuzzer harness: tensor files: weights (--init) and checkpoints (--resume) (fuzz_targets.h).
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return rddp::fuzz::run_harness<rddp::fuzz::TensorFileTarget>(data, size);
}
