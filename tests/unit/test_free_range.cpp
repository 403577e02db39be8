// The longest free stretch of an arena around buffers in use (cuda/free_range.h), where the
// timed convolution search puts its workspace.
#include <doctest/doctest.h>

#include <vector>

#include "resnet_ddp/cuda/free_range.h"

using rddp::cuda::ByteRange;
using rddp::cuda::largest_free_range;

namespace {

void check_range(const ByteRange& got, size_t begin, size_t end) {
  CHECK(got.begin == begin);
  CHECK(got.end == end);
}

}  // namespace

TEST_CASE("nothing in use: the whole arena") {
  check_range(largest_free_range(4096, {}, 256), 0, 4096);
  check_range(largest_free_range(4096, {{100, 100}}, 256), 0, 4096);  // empty ranges use nothing
}

TEST_CASE("the longest gap wins: before, between or after the ranges in use") {
  // gaps: [0, 512) 512 long, [1024, 3072) 2048 long, [3584, 4096) 512 long
  check_range(largest_free_range(4096, {{512, 1024}, {3072, 3584}}, 256), 1024, 3072);
  // in any order
  check_range(largest_free_range(4096, {{3072, 3584}, {512, 1024}}, 256), 1024, 3072);
  // the end
  check_range(largest_free_range(8192, {{0, 1024}}, 256), 1024, 8192);
  // the start
  check_range(largest_free_range(8192, {{6144, 8192}}, 256), 0, 6144);
}

TEST_CASE("overlapping and nested ranges in use join into one") {
  // [256, 2048) and [1024, 3000) overlap; [1280, 1536) lies inside: the only gaps are
  // [0, 256) and [3072, 4096) once aligned.
  check_range(largest_free_range(4096, {{256, 2048}, {1024, 3000}, {1280, 1536}}, 256), 3072,
              4096);
  // a range nested in an earlier, longer one does not reopen the gap it ends before
  check_range(largest_free_range(4096, {{0, 3000}, {100, 200}}, 256), 3072, 4096);
}

TEST_CASE("a gap starts on the alignment, and a gap shorter than it after rounding is none") {
  // after [0, 300) the gap starts at 512, the next multiple of 256
  check_range(largest_free_range(4096, {{0, 300}}, 256), 512, 4096);
  // the only gap, [3900, 4096), holds no multiple of 256 below 4096: nothing
  CHECK(largest_free_range(4096, {{0, 3900}}, 256).size() == 0);
  // the end need not be aligned
  check_range(largest_free_range(4000, {{0, 256}}, 256), 256, 4000);
}

TEST_CASE("ranges past the arena's end are clipped to it") {
  check_range(largest_free_range(4096, {{2048, 10000}}, 256), 0, 2048);
  CHECK(largest_free_range(4096, {{0, 10000}}, 256).size() == 0);
}

TEST_CASE("equally long gaps: the first") {
  check_range(largest_free_range(3072, {{1024, 2048}}, 256), 0, 1024);
}
