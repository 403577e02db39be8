// Buffers placed in one allocation by when they are in use (cuda/lifetime_plan.h), as the CUDA
// executor lays out its activations, gradients and convolution workspaces.
#include <doctest/doctest.h>

#include <utility>
#include <random>
#include <vector>

#include "resnet_ddp/cuda/lifetime_plan.h"

using rddp::cuda::BufferLife;
using rddp::cuda::LifetimePlan;
using rddp::cuda::peak_in_use;
using rddp::cuda::plan_lifetimes;

namespace {

constexpr size_t kAlign = 256;

size_t rounded(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// What every plan must give: aligned offsets, buffers inside the allocation, and no two buffers
// in use during one operation sharing a byte.
void check_plan(const std::vector<BufferLife>& buffers, const LifetimePlan& plan) {
  REQUIRE(plan.offsets.size() == buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    CAPTURE(i);
    CHECK(plan.offsets[i] % kAlign == 0);
    CHECK(plan.offsets[i] + rounded(buffers[i].bytes) <= plan.bytes);
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      if (!buffers[i].life.overlaps(buffers[j].life)) continue;
      CAPTURE(j);
      const size_t i_end = plan.offsets[i] + rounded(buffers[i].bytes);
      const size_t j_end = plan.offsets[j] + rounded(buffers[j].bytes);
      const bool apart = i_end <= plan.offsets[j] || j_end <= plan.offsets[i];
      CHECK(apart);
    }
  }
  CHECK(plan.bytes >= peak_in_use(buffers, kAlign));
}

}  // namespace

TEST_CASE("buffers in use at different times share bytes; at the same time they do not") {
  // One operation in common is enough to keep two buffers apart: an operation may read the
  // one while it writes the other.
  const std::vector<BufferLife> touching{{1000, {0, 2}}, {1000, {2, 4}}};
  const LifetimePlan apart = plan_lifetimes(touching, kAlign);
  check_plan(touching, apart);
  CHECK(apart.bytes == 2 * 1024);

  const std::vector<BufferLife> disjoint{{1000, {0, 1}}, {1000, {2, 4}}};
  const LifetimePlan shared = plan_lifetimes(disjoint, kAlign);
  check_plan(disjoint, shared);
  CHECK(shared.offsets[0] == shared.offsets[1]);
  CHECK(shared.bytes == 1024);
}

TEST_CASE("sizes are rounded up to the alignment, and an empty buffer takes nothing") {
  const std::vector<BufferLife> buffers{{1, {0, 0}}, {0, {0, 0}}, {257, {0, 0}}};
  const LifetimePlan plan = plan_lifetimes(buffers, kAlign);
  check_plan(buffers, plan);
  CHECK(plan.bytes == 256 + 512);
  CHECK(peak_in_use(buffers, kAlign) == 256 + 512);
}

TEST_CASE("a buffer takes the smallest gap that holds it") {
  // Placed largest first: x (8 KiB, operation 0) at 0, the long-lived l (4 KiB) after it, y
  // (2 KiB, operation 0) after l, the long-lived m (1 KiB) after y. At operations 5..6 only l
  // and m are in use, leaving gaps of 8 KiB (x's) and 2 KiB (y's): d (1 KiB) takes y's.
  const std::vector<BufferLife> buffers{
      {8192, {0, 0}},  // x
      {4096, {0, 9}},  // l
      {2048, {0, 0}},  // y
      {1024, {0, 9}},  // m
      {1024, {5, 6}},  // d
  };
  const LifetimePlan plan = plan_lifetimes(buffers, kAlign);
  check_plan(buffers, plan);
  CHECK(plan.offsets[0] == 0);
  CHECK(plan.offsets[1] == 8192);
  CHECK(plan.offsets[2] == 12288);
  CHECK(plan.offsets[3] == 14336);
  CHECK(plan.offsets[4] == 12288);
  CHECK(plan.bytes == 15360);
}

TEST_CASE("a chain of activations and gradients needs no more than is ever in use at once") {
  // Forward: activation k is written at operation k and read again by backward at 2n - 1 - k;
  // backward: gradient k lives from 2n - 2 - k to 2n - 1 - k, as a network's do.
  const int n = 12;
  std::vector<BufferLife> buffers;
  for (int k = 0; k < n; ++k) {
    const size_t bytes = size_t{1} << (20 - k % 4);
    buffers.push_back({bytes, {k, 2 * n - 1 - k}});
    buffers.push_back({bytes, {2 * n - 2 - k, 2 * n - 1 - k}});
  }
  const LifetimePlan plan = plan_lifetimes(buffers, kAlign);
  check_plan(buffers, plan);
  size_t sum = 0;
  for (const BufferLife& b : buffers) sum += rounded(b.bytes);
  CHECK(plan.bytes < sum);
  // Within one largest buffer of the bound.
  CHECK(plan.bytes <= peak_in_use(buffers, kAlign) + (size_t{1} << 20));
}

TEST_CASE("random buffers: never two in use at once on the same bytes, and the same plan twice") {
  std::mt19937 rng(20261122);
  for (int trial = 0; trial < 200; ++trial) {
    CAPTURE(trial);
    std::uniform_int_distribution<int> count_of(1, 40), op_of(0, 30);
    std::uniform_int_distribution<size_t> bytes_of(0, 100000);
    std::vector<BufferLife> buffers(static_cast<size_t>(count_of(rng)));
    for (BufferLife& b : buffers) {
      int first = op_of(rng), last = op_of(rng);
      if (first > last) std::swap(first, last);
      b = {bytes_of(rng), {first, last}};
    }
    const LifetimePlan plan = plan_lifetimes(buffers, kAlign);
    check_plan(buffers, plan);
    const LifetimePlan again = plan_lifetimes(buffers, kAlign);
    CHECK(again.offsets == plan.offsets);
    CHECK(again.bytes == plan.bytes);
  }
}
