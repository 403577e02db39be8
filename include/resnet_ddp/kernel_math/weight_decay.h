#pragma once
// Which parameters weight decay leaves alone, as the optimizer kernels and the CPU optimizer
// read it: one bit per chunk of kChunkElements elements of the flat parameter buffer, set where
// the chunk belongs to an excluded tensor. Every tensor starts on a chunk (ParamLayout aligns
// offsets to as many elements, and src/weight_decay_mask.cpp checks it), so a chunk never
// mixes tensors; its padding is zero and stays zero with or without decay.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "resnet_ddp/kernel_math/host_device.h"

namespace rddp::weight_decay {

constexpr size_t kChunkElements = 64;

// The chunks of a buffer of `elements`, and the 32-bit words of a mask over them.
constexpr size_t chunks_of(size_t elements) {
  return (elements + kChunkElements - 1) / kChunkElements;
}
constexpr size_t mask_words(size_t elements) { return (chunks_of(elements) + 31) / 32; }

// Marks `chunk` as taking no weight decay (host side: where masks are made).
inline void exclude(std::vector<uint32_t>& mask, size_t chunk) {
  mask[chunk / 32] |= 1u << (chunk % 32);
}

// Whether element `i` decays: always without a mask (nullptr), as every parameter does in
// torch.optim by default.
RDDP_HD bool applies(const uint32_t* no_decay_chunks, size_t i) {
  if (no_decay_chunks == nullptr) return true;
  const size_t chunk = i / kChunkElements;
  return ((no_decay_chunks[chunk / 32] >> (chunk % 32)) & 1u) == 0;
}

}  // namespace rddp::weight_decay
