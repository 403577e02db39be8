// kernels/maxpool.cu and kernels/global_avgpool.cu run on the CPU through the emulator
// (README.md) against their CPU twins (src/cpu/pooling.cpp), in both memory formats and every
// activation type: the inputs are rounded to the type first, the twin runs in float on them, and
// its results are rounded once, as the kernels round theirs. Max pooling must match bit for bit
// (values, argmax, gradients); average pooling within one unit of the type's last place (both
// round a double sum whose order differs). Outputs start poisoned (NaN, argmax 255). The
// kernel keeps argmax as the place in the window, the twin as the index in the plane
// (support/maxpool_places.h converts).
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "resnet_ddp/cpu/layers.h"
#include "resnet_ddp/cuda/layer_kernels.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/memory_format.h"
#include "resnet_ddp/rng.h"
#include "support/device_array.h"
#include "support/layout_copies.h"
#include "support/maxpool_places.h"
#include "support/test_tensors.h"

using namespace rddp;
using namespace rddp::testing;

namespace {

template <typename T, typename Launch>
std::vector<T> run_on_device(const std::vector<T>& in, size_t out_count, const Launch& launch) {
  DeviceArray<T> d_in(in.size());
  DeviceArray<T> d_out(out_count);
  d_in.upload(in);
  d_out.poison();
  launch(d_in.get(), d_out.get());
  return d_out.download();
}

template <typename T>
void check_maxpool(const PoolShape& s, MemoryFormat format) {
  const bool nhwc = format == MemoryFormat::nhwc;
  const size_t in = static_cast<size_t>(s.batch) * s.channels * s.in_h * s.in_w;
  const size_t out = static_cast<size_t>(s.batch) * s.channels * s.out_h() * s.out_w();
  Rng rng(derive_seed(in, "maxpool"));
  // A coarse grid, so that windows hold ties (the first must win), with a NaN and infinities.
  std::vector<float> x(in);
  for (float& v : x) v = std::round(static_cast<float>(rng.uniform(-4.0, 4.0)) * 2.0f) / 2.0f;
  x[in / 2] = std::numeric_limits<float>::quiet_NaN();
  x[in / 3] = std::numeric_limits<float>::infinity();
  x[in - 1] = -std::numeric_limits<float>::infinity();
  const std::vector<T> x_t = converted<T>(x);
  const std::vector<T> dy_t = converted<T>(random_uniform<float>(rng, out));

  std::vector<float> want_y(out), want_dx(in);
  std::vector<int32_t> want_argmax(out);
  cpu::maxpool_forward(s, converted<float>(x_t).data(), want_y.data(), want_argmax.data());
  cpu::maxpool_backward(s, converted<float>(dy_t).data(), want_argmax.data(), want_dx.data());

  DeviceArray<T> d_x(in), d_y(out), d_dy(out), d_dx(in);
  DeviceArray<uint8_t> d_argmax(out);
  d_x.upload(in_layout(x_t, nhwc, s.channels, s.in_h, s.in_w));
  d_dy.upload(in_layout(dy_t, nhwc, s.channels, s.out_h(), s.out_w()));
  d_y.poison();
  d_dx.poison();
  d_argmax.poison();
  cuda::maxpool_forward(s, d_x.get(), d_y.get(), d_argmax.get(), nullptr, format);
  cuda::maxpool_backward(s, d_dy.get(), d_argmax.get(), d_dx.get(), nullptr, format);
  CHECK(bitwise_equal(from_layout(d_y.download(), nhwc, s.channels, s.out_h(), s.out_w()),
                  converted<T>(want_y)));
  CHECK(from_layout(d_argmax.download(), nhwc, s.channels, s.out_h(), s.out_w()) ==
        window_places(s, want_argmax));
  CHECK(bitwise_equal(from_layout(d_dx.download(), nhwc, s.channels, s.in_h, s.in_w),
                  converted<T>(want_dx)));
}

template <typename T>
double unit_of(float value) {
  const double roundoff = sizeof(T) == 4 ? 0x1p-23 : (std::is_same_v<T, __half> ? 0x1p-10 : 0x1p-7);
  return std::fabs(value) * roundoff;
}

template <typename T>
void check_avgpool(int batch, int channels, int spatial, MemoryFormat format) {
  const bool nhwc = format == MemoryFormat::nhwc;
  const size_t in = static_cast<size_t>(batch) * channels * spatial;
  const size_t out = static_cast<size_t>(batch) * channels;
  Rng rng(derive_seed(in, "avgpool"));
  const std::vector<T> x_t = converted<T>(random_uniform<float>(rng, in, -3.0, 5.0));
  const std::vector<T> dy_t = converted<T>(random_uniform<float>(rng, out));
  std::vector<float> want_y(out), want_dx(in);
  cpu::global_avgpool_forward(batch, channels, spatial, converted<float>(x_t).data(), want_y.data());
  cpu::global_avgpool_backward(batch, channels, spatial, converted<float>(dy_t).data(), want_dx.data());

  // The spatial dimension as H = spatial, W = 1 for the layout copies.
  DeviceArray<T> d_x(in), d_y(out), d_dy(out), d_dx(in);
  d_x.upload(in_layout(x_t, nhwc, channels, spatial, 1));
  d_dy.upload(dy_t);
  d_y.poison();
  d_dx.poison();
  cuda::global_avgpool_forward(batch, channels, spatial, d_x.get(), d_y.get(), nullptr, format);
  cuda::global_avgpool_backward(batch, channels, spatial, d_dy.get(), d_dx.get(), nullptr,
                                format);
  const std::vector<float> y = converted<float>(d_y.download());
  const std::vector<float> dx = converted<float>(from_layout(d_dx.download(), nhwc, channels, spatial, 1));
  size_t bad = 0;
  for (size_t i = 0; i < out; ++i)
    if (!(std::fabs(y[i] - want_y[i]) <= unit_of<T>(want_y[i])) && bad++ < 5)
      FAIL_CHECK("y[" << i << "] = " << y[i] << ", CPU twin " << want_y[i]);
  for (size_t i = 0; i < in; ++i)
    if (!(std::fabs(dx[i] - want_dx[i]) <= unit_of<T>(want_dx[i])) && bad++ < 5)
      FAIL_CHECK("dx[" << i << "] = " << dx[i] << ", CPU twin " << want_dx[i]);
  CHECK(bad == 0);
}

template <typename T>
void check_pooling_type() {
  // Odd planes, clipped windows, stride 1 and 3, kernel 2 without padding, a 1x1 input, and
  // 2 x 8 x 23 x 23 (8464 inputs: many blocks, a partial last one). Channels that 4 and 8
  // divide take the NHWC backward's vector kernel (16 bytes of gradient a load: 4 floats, 8
  // 16-bit values), on planes that are not square, with stride 1 and 3 too; the others the
  // scalar one.
  const PoolShape shapes[] = {
      {2, 3, 9, 9, 3, 2, 1},    {1, 2, 8, 7, 3, 2, 1},  {1, 1, 1, 1, 3, 2, 1},
      {3, 5, 6, 6, 2, 2, 0},    {2, 2, 7, 5, 3, 1, 1},  {1, 3, 10, 10, 5, 3, 2},
      {2, 8, 23, 23, 3, 2, 1},  {3, 16, 9, 11, 3, 2, 1}, {2, 4, 7, 9, 3, 2, 1},
      {1, 24, 10, 7, 5, 3, 2},  {2, 8, 6, 5, 3, 1, 1},
  };
  for (MemoryFormat format : {MemoryFormat::nchw, MemoryFormat::nhwc}) {
    const std::string format_name = to_string(format);
    CAPTURE(format_name);
    for (const PoolShape& s : shapes) {
      CAPTURE(s.channels);
      CAPTURE(s.in_h);
      CAPTURE(s.in_w);
      CAPTURE(s.kernel);
      CAPTURE(s.stride);
      CAPTURE(s.pad);
      check_maxpool<T>(s, format);
    }
    // 9 planes of 8 warps a block in NCHW: two blocks; 300 planes: two blocks in NHWC.
    const int avg_cases[][3] = {{1, 1, 1}, {3, 3, 49}, {2, 150, 7}, {5, 7, 33}, {1, 2, 1000}};
    for (const auto& c : avg_cases) {
      CAPTURE(c[1]);
      CAPTURE(c[2]);
      check_avgpool<T>(c[0], c[1], c[2], format);
    }
  }
}

}  // namespace

TEST_CASE("emulated pooling kernels match the CPU twins: float") { check_pooling_type<float>(); }
TEST_CASE("emulated pooling kernels match the CPU twins: bfloat16") {
  check_pooling_type<__nv_bfloat16>();
}
TEST_CASE("emulated pooling kernels match the CPU twins: float16") {
  check_pooling_type<__half>();
}

TEST_CASE("emulated max pooling refuses the shapes its CPU twin refuses") {
  for (const PoolShape& s :
       {PoolShape{1, 1, 4, 4, 3, 2, 2}, PoolShape{1, 1, 1, 1, 4, 1, 1}})
    CHECK_THROWS_AS(cuda::maxpool_forward<float>(s, nullptr, nullptr, nullptr, nullptr), Error);
}

TEST_CASE("emulated max pooling: windows up to 16x16, the places one byte holds") {
  // 16x16 has 256 places, 0..255, so its last place is the poison's value: the input's maximum
  // there must still be found, and its gradient routed back.
  const PoolShape widest{1, 2, 16, 16, 16, 1, 0};
  std::vector<float> x(2 * 256, -1.0f);
  x[255] = 3.0f;        // channel 0: the last place
  x[256 + 17] = 2.0f;   // channel 1: row 1, column 1
  std::vector<int32_t> want_argmax(2);
  std::vector<float> want_y(2), want_dx(x.size()), dy{0.5f, 0.25f};
  cpu::maxpool_forward(widest, x.data(), want_y.data(), want_argmax.data());
  cpu::maxpool_backward(widest, dy.data(), want_argmax.data(), want_dx.data());
  DeviceArray<float> d_x(x.size()), d_y(2), d_dy(2), d_dx(x.size());
  DeviceArray<uint8_t> d_argmax(2);
  d_x.upload(x);
  d_dy.upload(dy);
  d_argmax.poison();
  cuda::maxpool_forward(widest, d_x.get(), d_y.get(), d_argmax.get(), nullptr);
  cuda::maxpool_backward(widest, d_dy.get(), d_argmax.get(), d_dx.get(), nullptr);
  CHECK(d_argmax.download() == std::vector<uint8_t>{255, 17});
  CHECK(d_argmax.download() == window_places(widest, want_argmax));
  CHECK(bitwise_equal(d_dx.download(), want_dx));
  // 17x17 has more places than a byte: refused, where the CPU twin's plane index has room.
  const PoolShape too_wide{1, 1, 17, 17, 17, 1, 0};
  CHECK_THROWS_AS(cuda::maxpool_forward<float>(too_wide, nullptr, nullptr, nullptr, nullptr),
                  Error);
}
