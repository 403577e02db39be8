#pragma once
// Index maths of the two memory formats, shared by the layout kernels (kernels/layout.cu, the
// NHWC pooling kernels) and their CPU tests (tests/unit/test_layout_math.cpp).
//
// Activations: NCHW (PyTorch's default, contiguous) keeps each channel's plane together;
// NHWC (torch.channels_last) keeps each pixel's channels together, the layout cuDNN's
// tensor-core convolutions read natively.
// Convolution weights: OIHW (PyTorch's [out, in, kH, kW], the layout of the flat parameter and
// gradient buffers) and OHWI, which cuDNN calls KRSC and requires of a filter described with
// CUDNN_TENSOR_NHWC.
//
// Flat indices are int64_t: a batch of activations may exceed 2^31 elements.
#include <stdint.h>

#include "resnet_ddp/kernel_math/fast_divide.h"
#include "resnet_ddp/kernel_math/host_device.h"

namespace rddp::layout {

// A position in a 4-d tensor by its logical (PyTorch) coordinates.
struct Coord4 {
  int64_t n, c, h, w;
};

// ---- activations [N, C, H, W]

RDDP_HD int64_t nchw_offset(Coord4 p, int64_t C, int64_t H, int64_t W) {
  return ((p.n * C + p.c) * H + p.h) * W + p.w;
}
RDDP_HD int64_t nhwc_offset(Coord4 p, int64_t C, int64_t H, int64_t W) {
  return ((p.n * H + p.h) * W + p.w) * C + p.c;
}
RDDP_HD Coord4 nchw_coord(int64_t index, int64_t C, int64_t H, int64_t W) {
  Coord4 p;
  p.w = index % W;
  index /= W;
  p.h = index % H;
  index /= H;
  p.c = index % C;
  p.n = index / C;
  return p;
}
RDDP_HD Coord4 nhwc_coord(int64_t index, int64_t C, int64_t H, int64_t W) {
  Coord4 p;
  p.c = index % C;
  index /= C;
  p.w = index % W;
  index /= W;
  p.h = index % H;
  p.n = index / H;
  return p;
}
// The same splits through divisors of C, H and W made once (fast_divide.h), for kernels that
// split an index an element, where a division's twenty to seventy instructions would set their
// pace. `index` < 2^63.
struct SideDivisors {
  hd::FastDivisor C, H, W;
};
inline SideDivisors side_divisors(int64_t C, int64_t H, int64_t W) {
  return {hd::make_fast_divisor(static_cast<uint32_t>(C)),
          hd::make_fast_divisor(static_cast<uint32_t>(H)),
          hd::make_fast_divisor(static_cast<uint32_t>(W))};
}
RDDP_HD Coord4 nchw_coord(uint64_t index, const SideDivisors& d) {
  const auto w = hd::divmod(index, d.W), h = hd::divmod(w.quotient, d.H),
             c = hd::divmod(h.quotient, d.C);
  return {static_cast<int64_t>(c.quotient), static_cast<int64_t>(c.remainder),
          static_cast<int64_t>(h.remainder), static_cast<int64_t>(w.remainder)};
}
RDDP_HD Coord4 nhwc_coord(uint64_t index, const SideDivisors& d) {
  const auto c = hd::divmod(index, d.C), w = hd::divmod(c.quotient, d.W),
             h = hd::divmod(w.quotient, d.H);
  return {static_cast<int64_t>(h.quotient), static_cast<int64_t>(c.remainder),
          static_cast<int64_t>(h.remainder), static_cast<int64_t>(w.remainder)};
}

// Where the element at `index` of an NCHW tensor lives in its NHWC twin, and back.
RDDP_HD int64_t nchw_to_nhwc(int64_t index, int64_t C, int64_t H, int64_t W) {
  return nhwc_offset(nchw_coord(index, C, H, W), C, H, W);
}
RDDP_HD int64_t nhwc_to_nchw(int64_t index, int64_t C, int64_t H, int64_t W) {
  return nchw_offset(nhwc_coord(index, C, H, W), C, H, W);
}

// ---- convolution weights [O, I, K, K] (square kernels, as every ResNet convolution has)
//
// The same maths as activations with O as the batch: OIHW is NCHW and OHWI is NHWC of a
// tensor of O "images" of I channels of K x K.

RDDP_HD int64_t oihw_to_ohwi(int64_t index, int64_t in_channels, int64_t kernel) {
  return nchw_to_nhwc(index, in_channels, kernel, kernel);
}
RDDP_HD int64_t ohwi_to_oihw(int64_t index, int64_t in_channels, int64_t kernel) {
  return nhwc_to_nchw(index, in_channels, kernel, kernel);
}

}  // namespace rddp::layout
