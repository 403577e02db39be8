#pragma once
// The GPU max-pool's argmax (each output's place in its window, one byte) made from the CPU
// twin's (the chosen input's index in its (n, c) plane), NCHW order, so that tests compare them.
#include <cstdint>
#include <vector>

#include "resnet_ddp/cpu/layers.h"

namespace rddp::testing {

inline std::vector<uint8_t> window_places(const PoolShape& s,
                                          const std::vector<int32_t>& plane_index) {
  const int out_h = s.out_h(), out_w = s.out_w();
  std::vector<uint8_t> places(plane_index.size());
  for (size_t out = 0; out < plane_index.size(); ++out) {
    const int ow = static_cast<int>(out % out_w);
    const int oh = static_cast<int>(out / out_w % out_h);
    const int ih = plane_index[out] / s.in_w, iw = plane_index[out] % s.in_w;
    places[out] = static_cast<uint8_t>((ih - (oh * s.stride - s.pad)) * s.kernel +
                                       (iw - (ow * s.stride - s.pad)));
  }
  return places;
}

}  // namespace rddp::testing
