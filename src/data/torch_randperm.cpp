// torch.randperm on the CPU with a seeded generator (aten/src/ATen/native/TensorFactories.cpp,
// randperm_cpu; aten/src/ATen/CPUGeneratorImpl.cpp). CPUGeneratorImpl wraps at::mt19937, the
// standard MT19937 seeded with the low 32 bits of the seed: std::mt19937 is the same engine.
// random() is one 32-bit output; random64() is two, the first as the high half.
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "resnet_ddp/data/sampler.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

std::vector<int64_t> torch_randperm(int64_t n, uint64_t seed) {
  if (n < 0) fail("cannot permute a negative count (", n, ")");
  std::mt19937 engine(static_cast<uint32_t>(seed));
  std::vector<int64_t> result(size_t(n), 0);
  if (n < int64_t(std::numeric_limits<uint32_t>::max() / 20)) {
    // Fisher-Yates from the front: position i swaps with a position in [i, n).
    for (int64_t i = 0; i < n; ++i) result[size_t(i)] = i;
    for (int64_t i = 0; i < n - 1; ++i) {
      const int64_t z = int64_t(engine() % uint64_t(n - i));
      std::swap(result[size_t(i)], result[size_t(z + i)]);
    }
    return result;
  }
  // Where n nears 2^32 a 32-bit draw modulo n is biased, so PyTorch 2.6 switched to the
  // "inside-out" shuffle on 64-bit draws (PyTorch 1.x-2.5 go on with the loop above).
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t high = engine();
    const uint64_t draw = high << 32 | engine();
    const int64_t z = int64_t(draw % uint64_t(i + 1));
    result[size_t(i)] = result[size_t(z)];
    result[size_t(z)] = i;
  }
  return result;
}

}  // namespace rddp::data
