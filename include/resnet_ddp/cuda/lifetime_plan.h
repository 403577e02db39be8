#pragma once
// Where each of a step's buffers lies in one allocation, given when each is in use: buffers in
// use at the same time get bytes of their own, the others share. A training step uses most of
// its memory briefly (a gradient from the layer that writes it to the layer that reads it, a
// convolution's workspace for one call), so sharing by lifetime makes the peak the most that is
// ever in use at once rather than the sum. Plain host arithmetic, no CUDA, so that the CPU tests
// cover it.
#include <cstddef>
#include <vector>

namespace rddp::cuda {

// The operations of a step that use a buffer, numbered in the order they run: first..last,
// inclusive. Two buffers whose lifetimes share an operation never share bytes, so an operation
// may read one buffer while it writes another.
struct Lifetime {
  int first = 0, last = 0;
  bool overlaps(const Lifetime& other) const {
    return first <= other.last && other.first <= last;
  }
};

struct BufferLife {
  size_t bytes = 0;
  Lifetime life;
};

struct LifetimePlan {
  std::vector<size_t> offsets;  // one per buffer, multiples of the alignment
  size_t bytes = 0;             // the allocation they all fit in
};

// Offsets for `buffers`, each rounded up to a multiple of `align`: the largest buffers are
// placed first, each in the smallest gap left between the placed buffers whose lifetimes
// overlap its own (else after the last of them). The same buffers give the same plan.
LifetimePlan plan_lifetimes(const std::vector<BufferLife>& buffers, size_t align);

// The most bytes (each buffer rounded up to `align`) in use during any one operation: no plan
// can be smaller.
size_t peak_in_use(const std::vector<BufferLife>& buffers, size_t align);

}  // namespace rddp::cuda
