// kernels/elementwise.cu run on the CPU through the emulator (README.md) against the CPU twins
// (src/cpu/elementwise.cpp) in every type it is instantiated for: inputs rounded to the type,
// the twin run in float on them and rounded once, bit for bit, as the kernels compute. 1 and
// 1001 elements (four blocks, the last one partial); outputs start poisoned (NaN).
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "resnet_ddp/cpu/layers.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/cuda/layer_kernels.h"
#include "resnet_ddp/rng.h"
#include "support/device_buffers.h"
#include "support/test_tensors.h"

using namespace rddp;
using namespace rddp::testing;

namespace {

// Through support/device_buffers.h on the default stream (the emulator's streams are
// synchronous).
template <typename T>
std::vector<T> downloaded(const cuda::DeviceBuffer<T>& device) {
  return to_host(device, nullptr);
}

// Values with zeros, -0.0 and a NaN among them: ReLU passes NaN and -0.0 through.
std::vector<float> awkward(Rng& rng, size_t count) {
  std::vector<float> values = random_uniform<float>(rng, count, -2.0, 2.0);
  for (size_t i = 0; i < count; i += 7) values[i] = 0.0f;
  if (count > 3) values[3] = -0.0f;
  if (count > 5) values[5] = std::numeric_limits<float>::quiet_NaN();
  return values;
}

template <typename T>
void check_type(int64_t count) {
  CAPTURE(count);
  const auto n = static_cast<size_t>(count);
  Rng rng(derive_seed(n, "elementwise"));
  const std::vector<T> x = converted<T>(awkward(rng, n)), y = converted<T>(awkward(rng, n));
  const std::vector<T> dy = converted<T>(random_uniform<float>(rng, n));
  const std::vector<float> xf = converted<float>(x), yf = converted<float>(y), dyf = converted<float>(dy);
  const auto d_x = to_device(x, nullptr), d_y = to_device(y, nullptr), d_dy = to_device(dy, nullptr);

  std::vector<float> want(n);
  cpu::relu_forward(count, xf.data(), want.data());
  auto out = poisoned<T>(n, nullptr);
  cuda::relu_forward(count, d_x.get(), out.get(), nullptr);
  CHECK_MESSAGE(bitwise_equal(downloaded(out), converted<T>(want)), "relu_forward");

  cpu::relu_backward(count, xf.data(), dyf.data(), want.data());
  out = poisoned<T>(n, nullptr);
  cuda::relu_backward(count, d_x.get(), d_dy.get(), out.get(), nullptr);
  CHECK_MESSAGE(bitwise_equal(downloaded(out), converted<T>(want)), "relu_backward");

  cpu::add(count, xf.data(), yf.data(), want.data());
  out = poisoned<T>(n, nullptr);
  cuda::add(count, d_x.get(), d_y.get(), out.get(), nullptr);
  CHECK_MESSAGE(bitwise_equal(downloaded(out), converted<T>(want)), "add");

  std::vector<float> relu_of_sum(n);
  cpu::relu_forward(count, want.data(), relu_of_sum.data());
  out = poisoned<T>(n, nullptr);
  cuda::add_relu(count, d_x.get(), d_y.get(), out.get(), nullptr);
  CHECK_MESSAGE(bitwise_equal(downloaded(out), converted<T>(relu_of_sum)), "add_relu");
}

template <typename T>
void check_convert(int64_t count) {
  CAPTURE(count);
  const auto n = static_cast<size_t>(count);
  Rng rng(derive_seed(n, "convert"));
  std::vector<float> values = random_uniform<float>(rng, n, -1e5, 1e5);  // beyond half's range
  const auto d_values = to_device(values, nullptr);
  auto narrow = poisoned<T>(n, nullptr);
  cuda::convert(count, d_values.get(), narrow.get(), nullptr);
  const std::vector<T> got = downloaded(narrow);
  CHECK_MESSAGE(bitwise_equal(got, converted<T>(values)), "float to 16 bits");
  auto wide = poisoned<float>(n, nullptr);
  cuda::convert(count, narrow.get(), wide.get(), nullptr);
  CHECK_MESSAGE(bitwise_equal(downloaded(wide), converted<float>(got)), "16 bits to float");
}

}  // namespace

TEST_CASE("emulated elementwise kernels match the CPU twins bit for bit") {
  for (int64_t count : {1, 1001}) {
    check_type<float>(count);
    check_type<__nv_bfloat16>(count);
    check_type<__half>(count);
    check_convert<__nv_bfloat16>(count);
    check_convert<__half>(count);
  }
}

TEST_CASE("emulated broadcast_rows copies the row into every row") {
  const int rows = 37, cols = 29;  // 1073 elements: five blocks, the last one partial
  Rng rng(5);
  const std::vector<float> row = random_uniform<float>(rng, cols);
  const auto d_row = to_device(row, nullptr);
  auto out = poisoned<float>(static_cast<size_t>(rows) * cols, nullptr);
  cuda::broadcast_rows(rows, cols, d_row.get(), out.get(), nullptr);
  std::vector<float> want;
  for (int r = 0; r < rows; ++r) want.insert(want.end(), row.begin(), row.end());
  CHECK(bitwise_equal(downloaded(out), want));
}
