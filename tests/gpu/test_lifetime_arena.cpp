// LifetimeArena, the executor's one allocation: buffers laid out by when they are used, and a
// pointer that shares another's buffer (a residual block's output gradient, updated in place
// into its input gradient's bytes) bound to the same bytes, with one lifetime from both.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>

#include "resnet_ddp/cuda/handles.h"
#include "resnet_ddp/cuda/lifetime_arena.h"

using namespace rddp;

namespace {

bool overlap(const float* a, size_t a_count, const float* b, size_t b_count) {
  const auto a0 = reinterpret_cast<uintptr_t>(a), b0 = reinterpret_cast<uintptr_t>(b);
  return a0 < b0 + b_count * sizeof(float) && b0 < a0 + a_count * sizeof(float);
}

}  // namespace

TEST_CASE("LifetimeArena: a shared pointer gets the same bytes, and its uses extend the lifetime") {
  cuda::ComputeContext context;
  constexpr size_t kCount = 1024;
  cuda::LifetimeArena arena;
  float *first = nullptr, *second = nullptr, *shared = nullptr, *between = nullptr;
  arena.request(&first, kCount);
  arena.request(&second, kCount);
  arena.share(&shared, &first);
  arena.request(&between, kCount);
  // first is used at 1 and, through `shared`, at 3; `between` at 2 must not take its bytes.
  // `second`, used at 4 only, may take any.
  arena.use(&first, 1);
  arena.use(&between, 2);
  arena.use(&shared, 3);
  arena.use(&second, 4);
  arena.allocate(context.stream());
  REQUIRE(first != nullptr);
  CHECK(shared == first);
  CHECK_FALSE(overlap(between, kCount, first, kCount));
  // Three buffers, two of them live at once at most (first with between).
  CHECK(arena.bytes() == 2 * kCount * sizeof(float));

  // Without the shared use, `between` could have taken first's bytes: the lifetimes decide.
  cuda::LifetimeArena unshared;
  float *a = nullptr, *b = nullptr;
  unshared.request(&a, kCount);
  unshared.request(&b, kCount);
  unshared.use(&a, 1);
  unshared.use(&b, 2);
  unshared.allocate(context.stream());
  CHECK(a == b);
}
