#pragma once
// Which values of a BatchNorm tensor each block and each thread of kernels/batchnorm.cu reads,
// and in which order: shared with tests/unit/test_batchnorm_math.cpp, which replays the same
// order on the CPU. All of it follows from the shape and the vector width alone, never from the
// GPU, so the reductions add in the same order on every run (bit-reproducible results).
//
// The grid is (channel groups, splits). A block reads one group of channels (one channel in
// NCHW, a tile of up to kTileChannels adjacent ones in NHWC) over one of `splits` contiguous
// slices of the channel's M = N * H * W values, and leaves one partial result per channel in
// scratch; a second kernel folds each channel's partials in a fixed order. No atomics.
//
// NCHW: a channel's values are N planes of H * W. The block's kThreads threads (one lane of
// kThreads rows) walk its slice, `vector` adjacent values a load; vector divides H * W, so no
// load crosses a plane.
// NHWC: the tensor is M rows (pixels) of C channels. A block is `lanes` x `rows` threads: each
// lane reads `vector` adjacent channels of the tile (vector divides C), so the lanes of a row read
// the tile's part of a pixel together, and the rows step through the slice.
//
// Offsets are int64_t: a tensor may hold more than 2^31 values.
#include <stdint.h>

#include "resnet_ddp/kernel_math/host_device.h"

namespace rddp::bn {

constexpr int kThreads = 256;
constexpr int kWarp = 32;
// NHWC: the channels of one block: a 128-byte line of a bfloat16 pixel, two of a float one.
constexpr int kTileChannels = 64;
// Two to four waves of 256-thread blocks on an H100 (132 SMs) at the two to three blocks an SM
// these kernels fit (cli.test_kernel_registers); a shape constant rather than the device's SM
// count, so that results do not depend on the GPU.
constexpr int kTargetBlocks = 1024;
// Below this many values a block spends more on its reduction than on reading.
constexpr int kMinValuesPerBlock = 8192;
// Loads a thread issues before it uses any: enough bytes in flight to cover memory latency.
constexpr int kUnroll = 4;
// Partials in scratch: mean, m2 and count of the statistics; the backward's two sums use two of
// the three arrays.
constexpr int kPartialArrays = 3;

struct Partition {
  int batch = 0, channels = 0;
  int64_t plane = 0;        // H * W
  int64_t per_channel = 0;  // M = N * H * W
  bool channels_last = false;
  int tile_channels = 1;   // channels one block reads: 1 (NCHW) or up to kTileChannels (NHWC)
  int channel_groups = 0;  // grid.x
  int splits = 1;          // grid.y: blocks that share a channel group
};

RDDP_HD int next_power_of_two(int v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

// Every dimension must be >= 1.
RDDP_HD Partition make_partition(int batch, int channels, int height, int width,
                                 bool channels_last) {
  Partition p;
  p.batch = batch;
  p.channels = channels;
  p.plane = static_cast<int64_t>(height) * width;
  p.per_channel = batch * p.plane;
  p.channels_last = channels_last;
  const int tile = next_power_of_two(channels);
  p.tile_channels = channels_last ? (tile < kTileChannels ? tile : kTileChannels) : 1;
  p.channel_groups = (channels + p.tile_channels - 1) / p.tile_channels;
  // Enough blocks to fill the GPU, but none with fewer than kMinValuesPerBlock values to read
  // (then a single one: a small tensor is one block per channel group).
  const int64_t wanted = (kTargetBlocks + p.channel_groups - 1) / p.channel_groups;
  const int64_t least_per_channel = (kMinValuesPerBlock + p.tile_channels - 1) / p.tile_channels;
  int64_t most = p.per_channel / least_per_channel;
  if (most < 1) most = 1;
  p.splits = static_cast<int>(wanted < most ? wanted : most);
  return p;
}

// The run of adjacent values of one channel (NCHW: a plane) or of one pixel (NHWC: its
// channels) that a vector load must divide.
RDDP_HD int64_t contiguous_run(const Partition& p) {
  return p.channels_last ? static_cast<int64_t>(p.channels) : p.plane;
}

// The widest power of two <= max_vector that divides the contiguous run.
RDDP_HD int widest_vector(const Partition& p, int max_vector) {
  int vector = max_vector;
  while (vector > 1 && contiguous_run(p) % vector != 0) vector /= 2;
  return vector;
}

struct BlockShape {
  int lanes, rows;  // lanes * rows == kThreads; NCHW: 1 x kThreads
};

// `vector` divides the tile (both are powers of two and vector divides C <= tile, or the tile
// is kTileChannels, which every vector width divides), so lanes * vector == tile_channels.
RDDP_HD BlockShape block_shape(const Partition& p, int vector) {
  if (!p.channels_last) return {1, kThreads};
  const int lanes = p.tile_channels / vector;
  return {lanes, kThreads / lanes};
}

// Split `split` of a channel's `units` (NHWC rows, NCHW vectors) starts here; it ends where the
// next one starts. Sizes differ by at most one.
RDDP_HD int64_t split_begin(int64_t units, int splits, int split) {
  return units * split / splits;
}

// The offsets of a group of loads one thread makes before using them, `vector` values each.
template <int N>
struct Loads {
  static constexpr int kCount = N;
  int64_t offset[N];
};

// How the values of a thread's group of N loads sort into the channels it reads (slots), as
// values[slot][position]: NHWC threads read V channels side by side, value k of load u being
// channel k's u-th; NCHW threads read one channel, value k of load u being its (u * V + k)-th.
template <bool ChannelsLast, int V>
constexpr int kSlots = ChannelsLast ? V : 1;
template <bool ChannelsLast, int V, int N>
constexpr int kPerSlot = ChannelsLast ? N : N * V;
template <bool ChannelsLast, int V>
RDDP_HD constexpr int slot_of(int k) {
  return ChannelsLast ? k : 0;
}
template <bool ChannelsLast, int V>
RDDP_HD constexpr int position_of(int u, int k) {
  return ChannelsLast ? u : u * V + k;
}

// ---- NHWC

// The first of the `vector` channels a lane reads; the lane reads nothing if it is >= C (the
// last tile of a C that is not a multiple of the tile).
RDDP_HD int nhwc_first_channel(const Partition& p, int group, int lane, int vector) {
  return group * p.tile_channels + lane * vector;
}

// Calls body(Loads<kUnroll>) for each full group of the rows `row`, `row + rows`, ... of the
// split, then body(Loads<1>) for each row left over.
RDDP_HD_CALLS_FUNCTOR
template <int U, typename Body>
RDDP_HD void walk_nhwc(const Partition& p, const BlockShape& shape, int split, int row,
                       int first_channel, Body&& body) {
  const int64_t begin = split_begin(p.per_channel, p.splits, split);
  const int64_t end = split_begin(p.per_channel, p.splits, split + 1);
  const int64_t channels = p.channels, step = shape.rows;
  int64_t r = begin + row;
  for (; r + (U - 1) * step < end; r += U * step) {
    Loads<U> loads;
    RDDP_UNROLL
    for (int u = 0; u < U; ++u) loads.offset[u] = (r + u * step) * channels + first_channel;
    body(loads);
  }
  for (; r < end; r += step) {
    Loads<1> loads;
    loads.offset[0] = r * channels + first_channel;
    body(loads);
  }
}

// ---- NCHW

// Where vector `index` of a channel's N * plane_vectors vectors lies: image and vector within
// the plane. Advanced by a fixed step without a division per load.
struct PlaneCursor {
  int64_t image, vector;
};

RDDP_HD PlaneCursor cursor_at(int64_t index, int64_t plane_vectors) {
  return {index / plane_vectors, index % plane_vectors};
}

// A step of `step` vectors, split once into whole planes and a remainder (< plane_vectors).
RDDP_HD PlaneCursor cursor_step(int64_t step, int64_t plane_vectors) {
  return {step / plane_vectors, step % plane_vectors};
}

RDDP_HD void advance(PlaneCursor& at, const PlaneCursor& step, int64_t plane_vectors) {
  at.image += step.image;
  at.vector += step.vector;
  if (at.vector >= plane_vectors) {  // both were < plane_vectors: at most one plane more
    at.vector -= plane_vectors;
    ++at.image;
  }
}

RDDP_HD int64_t nchw_offset(const Partition& p, int channel, const PlaneCursor& at, int vector) {
  return (at.image * p.channels + channel) * p.plane + at.vector * vector;
}

// Calls body(Loads<U>) for each full group of the vectors `thread`, `thread + kThreads`, ... of
// the channel's split, then body(Loads<1>) for each one left over.
RDDP_HD_CALLS_FUNCTOR
template <int U, typename Body>
RDDP_HD void walk_nchw(const Partition& p, int vector, int channel, int split, int thread,
                       Body&& body) {
  const int64_t plane_vectors = p.plane / vector;
  const int64_t units = p.batch * plane_vectors;
  const int64_t end = split_begin(units, p.splits, split + 1);
  int64_t i = split_begin(units, p.splits, split) + thread;
  if (i >= end) return;
  PlaneCursor at = cursor_at(i, plane_vectors);
  const PlaneCursor step = cursor_step(kThreads, plane_vectors);
  for (; i + (U - 1) * kThreads < end; i += U * kThreads) {
    Loads<U> loads;
    RDDP_UNROLL
    for (int u = 0; u < U; ++u) {
      loads.offset[u] = nchw_offset(p, channel, at, vector);
      advance(at, step, plane_vectors);
    }
    body(loads);
  }
  for (; i < end; i += kThreads) {
    Loads<1> loads;
    loads.offset[0] = nchw_offset(p, channel, at, vector);
    advance(at, step, plane_vectors);
    body(loads);
  }
}

// ---- scratch

// One partial per channel and split, channel-major, so that the lanes folding one channel read
// adjacent floats.
RDDP_HD int64_t partial_index(const Partition& p, int channel, int split) {
  return static_cast<int64_t>(channel) * p.splits + split;
}

RDDP_HD int64_t partials_per_array(const Partition& p) {
  return static_cast<int64_t>(p.channels) * p.splits;
}

}  // namespace rddp::bn
