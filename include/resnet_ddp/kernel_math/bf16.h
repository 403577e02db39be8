#pragma once
// bfloat16 (1 sign, 8 exponent, 7 mantissa bits: the top half of a float32) as raw uint16_t
// bits, shared by the CUDA cast kernels (kernels/bf16_cast.cu) and their host twins
// (src/ddp/bf16_gradients.cpp), so the gradient compression of --grad-allreduce bf16 computes the
// same bits on either side. Raw bits rather than __nv_bfloat16 so that plain C++ compiles it
// and MPI can carry it as two bytes.
#include <stdint.h>
#include <string.h>

#include "resnet_ddp/kernel_math/host_device.h"

namespace rddp::bf16 {

RDDP_HD uint32_t bits_of(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

RDDP_HD float float_of(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

// Round to nearest, ties to even, as torch's .to(torch.bfloat16) and CUDA's __float2bfloat16:
// adding 0x7FFF plus the lowest kept bit carries into the kept half exactly when the dropped
// half is above one half, or exactly one half and the kept half is odd. A carry out of the
// mantissa moves to the next binade, and from the largest finite value to Inf, as rounding
// must. Subnormals need no special case: their bits round the same way.
//
// NaN stays NaN, made quiet: the sign and top payload bits are kept and the quiet bit set, so a
// signalling NaN whose payload lies only in the dropped bits cannot turn into Inf. (There is
// no single convention to copy: torch's scalar conversion gives 0x7FC0, its vectorised CPU
// kernel 0xFFFF, CUDA's 0x7FFF; all are quiet NaNs, which is what we promise.)
RDDP_HD uint16_t from_float(float value) {
  const uint32_t bits = bits_of(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t lowest_kept = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7FFFu + lowest_kept) >> 16);
}

// Exact: every bfloat16 is a float.
RDDP_HD float to_float(uint16_t value) { return float_of(static_cast<uint32_t>(value) << 16); }

// One gradient into the allreduce buffer, as PyTorch's bf16_compress_hook computes
// bucket.to(torch.bfloat16).div_(world_size): first rounded to bfloat16, then scaled in float
// and rounded again (a bfloat16 tensor's arithmetic computes in float and rounds each result).
// `share` is 1/world_size in float: on CUDA, where the hook runs over NCCL, PyTorch divides a
// tensor by a scalar as a multiplication by the scalar's float reciprocal
// (div_true_kernel_cuda), which this mirrors. PyTorch's CPU kernel divides instead; the two
// agree whenever the world size is a power of two and may differ by one bfloat16 ulp otherwise.
RDDP_HD uint16_t compress(float gradient, float share) {
  return from_float(to_float(from_float(gradient)) * share);
}

// One step of the allreduce's sum, as NCCL's ncclSum on ncclBfloat16 computes it: both
// operands widened to float, added, the sum rounded to bfloat16.
RDDP_HD uint16_t add(uint16_t a, uint16_t b) { return from_float(to_float(a) + to_float(b)); }

}  // namespace rddp::bf16
