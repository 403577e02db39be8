// The memory-format index maths of include/resnet_ddp/kernel_math/layout.h, which the NHWC kernels use on the
// device, against plain nested loops over the logical (n, c, h, w) coordinates: every index of
// several odd shapes (split by division and through fast divisors alike), and each permutation
// a bijection whose inverse undoes it.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "resnet_ddp/kernel_math/layout.h"

using namespace rddp;

namespace {

struct Shape {
  int64_t n, c, h, w;
};

// Odd, distinct sizes, so that a swapped pair of dimensions cannot pass by accident; the last
// ones are what ResNet-18's stem sees (3 channels) and a 1x1 convolution weight.
const Shape kShapes[] = {{2, 3, 5, 7}, {3, 8, 4, 1}, {1, 1, 1, 1}, {4, 3, 7, 7}, {5, 16, 1, 1}};

}  // namespace

TEST_CASE("NCHW <-> NHWC indices match the nested loops of both layouts") {
  for (const Shape& s : kShapes) {
    CAPTURE(s.n);
    CAPTURE(s.c);
    CAPTURE(s.h);
    CAPTURE(s.w);
    const int64_t count = s.n * s.c * s.h * s.w;
    std::vector<int> hits(static_cast<size_t>(count), 0);
    int64_t nchw = 0;  // the NCHW index, counted in NCHW's own loop order
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t c = 0; c < s.c; ++c)
        for (int64_t h = 0; h < s.h; ++h)
          for (int64_t w = 0; w < s.w; ++w, ++nchw) {
            // NHWC written out by hand: channels innermost, then width, height, batch.
            const int64_t nhwc = n * (s.h * s.w * s.c) + h * (s.w * s.c) + w * s.c + c;
            const layout::Coord4 p{n, c, h, w};
            REQUIRE(layout::nchw_offset(p, s.c, s.h, s.w) == nchw);
            REQUIRE(layout::nhwc_offset(p, s.c, s.h, s.w) == nhwc);
            REQUIRE(layout::nchw_to_nhwc(nchw, s.c, s.h, s.w) == nhwc);
            REQUIRE(layout::nhwc_to_nchw(nhwc, s.c, s.h, s.w) == nchw);
            const layout::Coord4 from_nchw = layout::nchw_coord(nchw, s.c, s.h, s.w);
            const layout::Coord4 from_nhwc = layout::nhwc_coord(nhwc, s.c, s.h, s.w);
            // The kernels' splits, through divisors made once (fast_divide.h).
            const layout::SideDivisors sides = layout::side_divisors(s.c, s.h, s.w);
            const layout::Coord4 fast_nchw =
                layout::nchw_coord(static_cast<uint64_t>(nchw), sides);
            const layout::Coord4 fast_nhwc =
                layout::nhwc_coord(static_cast<uint64_t>(nhwc), sides);
            for (const layout::Coord4& q : {from_nchw, from_nhwc, fast_nchw, fast_nhwc}) {
              CHECK(q.n == n);
              CHECK(q.c == c);
              CHECK(q.h == h);
              CHECK(q.w == w);
            }
            ++hits[static_cast<size_t>(nhwc)];
          }
    // Every NHWC position is reached exactly once: the permutation is a bijection.
    for (int64_t i = 0; i < count; ++i) REQUIRE(hits[static_cast<size_t>(i)] == 1);
  }
}

TEST_CASE("OIHW <-> OHWI weight indices match the nested loops and invert each other") {
  struct Weight {
    int64_t out, in, kernel;
  };
  for (const Weight& wt : {Weight{4, 3, 7}, Weight{5, 6, 3}, Weight{8, 2, 1}, Weight{1, 1, 1}}) {
    CAPTURE(wt.out);
    CAPTURE(wt.in);
    CAPTURE(wt.kernel);
    const int64_t k = wt.kernel, count = wt.out * wt.in * k * k;
    std::vector<int> hits(static_cast<size_t>(count), 0);
    for (int64_t o = 0; o < wt.out; ++o)
      for (int64_t i = 0; i < wt.in; ++i)
        for (int64_t r = 0; r < k; ++r)
          for (int64_t q = 0; q < k; ++q) {
            const int64_t oihw = ((o * wt.in + i) * k + r) * k + q;
            const int64_t ohwi = ((o * k + r) * k + q) * wt.in + i;  // cuDNN's KRSC
            REQUIRE(layout::oihw_to_ohwi(oihw, wt.in, k) == ohwi);
            REQUIRE(layout::ohwi_to_oihw(ohwi, wt.in, k) == oihw);
            ++hits[static_cast<size_t>(ohwi)];
          }
    for (int64_t j = 0; j < count; ++j) REQUIRE(hits[static_cast<size_t>(j)] == 1);
  }
}

TEST_CASE("indices beyond 2^31 do not overflow") {
  // A batch of 256 images of 64 channels at 512x512 has 2^32 elements.
  const int64_t c = 64, h = 512, w = 512;
  const int64_t last_nchw = 256 * c * h * w - 1;
  const int64_t last_nhwc = layout::nchw_to_nhwc(last_nchw, c, h, w);
  CHECK(last_nhwc == last_nchw);  // the last element is last in both layouts
  const layout::Coord4 p{200, 5, 300, 17};
  const int64_t nchw = layout::nchw_offset(p, c, h, w);
  CHECK(nchw > (int64_t{1} << 31));
  CHECK(layout::nhwc_to_nchw(layout::nchw_to_nhwc(nchw, c, h, w), c, h, w) == nchw);
  CHECK(layout::nhwc_offset(p, c, h, w) == ((200 * h + 300) * w + 17) * c + 5);
}
