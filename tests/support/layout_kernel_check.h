#pragma once
// The layout kernels (kernels/layout.cu) against nested loops (support/layout_copies.h), bit for
// bit, in float, bfloat16 and float16: the input's NCHW -> NHWC conversion, a batch's uint8 pixels
// into the normalised input in either layout, the convolutions'
// OIHW -> OHWI copies (all in one launch) and the weight gradients' way back. Shared by the GPU
// test (tests/gpu/test_cuda_nhwc.cpp, at ResNet-18's weight shapes) and the emulated one
// (tests/emu/test_emulated_layout.cpp, which runs the same kernel source on the CPU at shapes
// that reach the same paths). Every output starts poisoned (NaN).
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/data/normalize.h"
#include "resnet_ddp/cuda/layer_kernels.h"
#include "resnet_ddp/rng.h"
#include "support/device_buffers.h"
#include "support/layout_copies.h"
#include "support/test_tensors.h"

namespace rddp::testing {

// The rounding the executors apply when they narrow (convert<float, T>, kernels/elementwise.cu),
// which the layout kernels must apply too: the NCHW executor converts its input and the
// optimizer its weight copy that way.
template <typename T>
std::vector<T> rounded_like_convert(const cuda::DeviceBuffer<float>& values, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, float>) {
    return to_host(values, stream);
  } else {
    cuda::DeviceBuffer<T> narrow(values.size());
    cuda::convert(static_cast<int64_t>(values.size()), values.get(), narrow.get(), stream);
    return to_host(narrow, stream);
  }
}

// The network's input, [n, c, h, w] floats, into the activations' type and NHWC in one pass.
template <typename T>
void check_input_to_nhwc(int n, int c, int h, int w, cudaStream_t stream) {
  CAPTURE(n);
  CAPTURE(c);
  CAPTURE(h);
  CAPTURE(w);
  const size_t count = static_cast<size_t>(n) * c * h * w;
  Rng rng(derive_seed(count, "nhwc input"));
  const auto d_x = to_device(random_uniform<float>(rng, count, -10.0, 10.0), stream);
  const auto expected = nchw_to_nhwc(rounded_like_convert<T>(d_x, stream), n, c, h, w);
  auto d_y = poisoned<T>(expected.size(), stream);
  cuda::nchw_to_nhwc(n, c, h, w, d_x.get(), d_y.get(), stream);
  CHECK(bitwise_equal(to_host(d_y, stream), expected));
}

// A batch as uploaded, uint8 [n, h, w, c], into the network's input: the loader's float
// normalisation (data/normalize.h), then rounded like convert, in either layout.
template <typename T>
void check_pixels_to_input(int n, int c, int h, int w, MemoryFormat format, cudaStream_t stream) {
  CAPTURE(n);
  CAPTURE(c);
  CAPTURE(h);
  CAPTURE(w);
  const bool nhwc = format == MemoryFormat::nhwc;
  CAPTURE(nhwc);
  const size_t count = static_cast<size_t>(n) * c * h * w;
  Rng rng(derive_seed(count, "pixels"));
  std::vector<uint8_t> pixels(count);
  for (uint8_t& v : pixels) v = static_cast<uint8_t>(rng.below(256));
  pixels[0] = 0;  // both ends of the range
  pixels[count - 1] = 255;
  // Means and deviations that round in every operation, not ones that happen to be exact.
  data::Normalization normalization{"test", {}, {}};
  for (int k = 0; k < c; ++k) {
    normalization.mean.push_back(0.3f + 0.07f * static_cast<float>(k));
    normalization.stddev.push_back(0.21f + 0.013f * static_cast<float>(k));
  }
  std::vector<float> expected_nchw(count);
  data::normalize_to_nchw(pixels.data(), static_cast<size_t>(n), h, w, c, normalization,
                          expected_nchw.data());
  std::vector<T> expected =
      rounded_like_convert<T>(to_device(expected_nchw, stream), stream);
  if (nhwc) expected = nchw_to_nhwc(expected, n, c, h, w);

  std::vector<float> mean_stddev = normalization.mean;
  mean_stddev.insert(mean_stddev.end(), normalization.stddev.begin(), normalization.stddev.end());
  const auto d_pixels = to_device(pixels, stream);
  const auto d_mean_stddev = to_device(mean_stddev, stream);
  auto d_y = poisoned<T>(expected.size(), stream);
  cuda::pixels_to_input(n, c, h, w, d_pixels.get(), d_mean_stddev.get(), d_y.get(), format,
                        stream);
  CHECK(bitwise_equal(to_host(d_y, stream), expected));
}

struct WeightShape {
  int out, in, kernel;
};

// `shapes` laid out as in a model's flat parameters (at odd offsets, with other parameters
// between them); their OHWI copies follow each other.
struct WeightTable {
  std::vector<cuda::WeightPermutation> entries;
  size_t params_size = 3, copy_size = 0;
  int max_out_channels = 0;

  explicit WeightTable(const std::vector<WeightShape>& shapes) {
    for (const WeightShape& shape : shapes) {
      cuda::WeightPermutation p;
      p.param_offset = static_cast<int64_t>(params_size);
      p.copy_offset = static_cast<int64_t>(copy_size);
      p.out_channels = shape.out;
      p.in_channels = shape.in;
      p.kernel = shape.kernel;
      entries.push_back(p);
      params_size += numel(p) + 5;
      copy_size += numel(p);
      max_out_channels = std::max(max_out_channels, shape.out);
    }
  }
  static size_t numel(const cuda::WeightPermutation& p) {
    return static_cast<size_t>(p.out_channels) * p.in_channels * p.kernel * p.kernel;
  }
};

// Every weight of `params` (float masters) in OHWI, as T: the copy weights_to_ohwi must make.
template <typename T>
std::vector<T> ohwi_copies(const WeightTable& table, const std::vector<T>& params) {
  std::vector<T> copies(table.copy_size);
  for (const cuda::WeightPermutation& p : table.entries) {
    const auto first = params.begin() + p.param_offset;
    const std::vector<T> oihw(first, first + static_cast<int64_t>(WeightTable::numel(p)));
    const auto ohwi = nchw_to_nhwc(oihw, p.out_channels, p.in_channels, p.kernel, p.kernel);
    std::copy(ohwi.begin(), ohwi.end(), copies.begin() + p.copy_offset);
  }
  return copies;
}

// weights_to_ohwi in one launch for all of `shapes`, then each copy back through ohwi_to_oihw
// into its place in a float gradient buffer: the same values in OIHW, widened exactly.
template <typename T>
void check_weight_permutations(const std::vector<WeightShape>& shapes, cudaStream_t stream) {
  const WeightTable table(shapes);
  Rng rng(derive_seed(table.params_size, "weights"));
  const auto d_params = to_device(random_uniform<float>(rng, table.params_size, -0.5, 0.5), stream);
  const auto d_table = to_device(table.entries, stream);
  const std::vector<T> params = rounded_like_convert<T>(d_params, stream);

  auto d_copy = poisoned<T>(table.copy_size, stream);
  cuda::weights_to_ohwi(d_table.get(), static_cast<int>(table.entries.size()),
                        table.max_out_channels, d_params.get(), d_copy.get(), stream);
  CHECK_MESSAGE(bitwise_equal(to_host(d_copy, stream), ohwi_copies(table, params)),
                "weights_to_ohwi");

  auto d_back = poisoned<float>(table.params_size, stream);
  for (const cuda::WeightPermutation& p : table.entries)
    cuda::ohwi_to_oihw(p.out_channels, p.in_channels, p.kernel, d_copy.get() + p.copy_offset,
                       d_back.get() + p.param_offset, stream);
  const std::vector<float> back = to_host(d_back, stream);
  const std::vector<float> widened = converted<float>(params);
  for (const cuda::WeightPermutation& p : table.entries) {
    CAPTURE(p.out_channels);
    CAPTURE(p.in_channels);
    CAPTURE(p.kernel);
    CHECK_MESSAGE(std::memcmp(back.data() + p.param_offset, widened.data() + p.param_offset,
                              WeightTable::numel(p) * sizeof(float)) == 0,
                  "ohwi_to_oihw");
  }
}

}  // namespace rddp::testing
