#pragma once
// Whole-network checks compare two executors whose forwards round differently (the GPU's float
// against the CPU's double). Where a ReLU's input lies closer to zero than that difference, the
// two may take it to opposite sides: one passes that element's gradient back, the other drops
// it, and the error it leaves in its BatchNorm's bias gradient is the size of a whole gradient
// element, far beyond any rounding tolerance. (On the H100 of 2026-11-27 one element of
// layer4.0.bn1 did so: channel 395's bias gradient read 0.00143 instead of 0.00015, and its
// weight gradient missed by that difference times -0.4038, the normalised value where
// weight * x + bias = 0 for that channel: one element at the ReLU's edge, counted on one side
// only.) So before such a check, the BatchNorm shift of every channel holding a ReLU
// input within a margin of zero is moved until none is left; both executors then start from the
// moved parameters.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "resnet_ddp/cpu/executor.h"
#include "resnet_ddp/model_state.h"

namespace rddp::testing {

// Of the ReLU's largest input: wide enough to hold the difference that float32's rounding leaves
// on these inputs through the network (estimated below 1e-6 of their scale; not measured), and
// narrow enough that a small shift clears every channel, even the stem's 4096 values at 64x64
// and batch 4.
constexpr double kReluTieMargin = 1e-5;

// Moves the BatchNorm biases (shifts) of `state` until a training forward of the CPU executor in
// double on `input` ([batch, channels, height, width]) meets no ReLU input within `margin` of
// its ReLU's largest one. Each round moves every channel holding such an input so that the
// input comes to twice the margin, always upwards: moving a channel both ways could carry two
// of its inputs into the margin in turn for ever, while moving it one way soon leaves the margin
// in a gap between its inputs, far wider than the margin. A move changes every later layer's
// inputs a little, so the rounds repeat until a forward finds none (about ten for ResNet-18 at
// batch 4). Each moved shift is rounded to float, so that the float copy of the parameters
// every GPU check runs holds the same numbers. `state`'s running statistics are left as they
// are. Returns how many moves were made.
inline int clear_relu_ties(ModelState<double>& state, const std::vector<double>& input, int batch,
                           int height, int width, double margin = kReluTieMargin) {
  ModelState<double> probe = state;
  cpu::Executor<double> executor(probe, batch, height, width);
  executor.watch_relu_ties(margin);
  int moved = 0;
  constexpr int kMaxRounds = 200;
  for (int round = 0; round < kMaxRounds; ++round) {
    probe.params = state.params;
    probe.running = state.running;
    executor.forward(input.data(), batch, /*training=*/true);
    const auto& ties = executor.relu_ties();
    if (ties.empty()) return moved;
    std::set<std::pair<size_t, int>> done;  // (shift's offset, channel)
    for (const auto& tie : ties) {
      if (!done.insert({tie.shift->offset, tie.channel}).second) continue;
      double& shift = state.params[tie.shift->offset + static_cast<size_t>(tie.channel)];
      shift += 2.0 * margin * tie.scale - tie.value;
      shift = static_cast<double>(static_cast<float>(shift));
      ++moved;
    }
  }
  FAIL("the ReLU inputs still hold values within " << margin << " of their scale of zero after "
                                                   << kMaxRounds << " rounds of moving shifts");
  return moved;
}

// The same for a float model, as the engines hold it: cleared through a double copy of its
// parameters, on the batch's float images.
inline int clear_relu_ties(ModelState<float>& model, const std::vector<float>& images, int batch,
                           int height, int width) {
  ModelState<double> state(model.spec);
  state.params.assign(model.params.begin(), model.params.end());
  state.running.assign(model.running.begin(), model.running.end());
  const int moved = clear_relu_ties(state, std::vector<double>(images.begin(), images.end()),
                                    batch, height, width);
  model.params.assign(state.params.begin(), state.params.end());
  return moved;
}

}  // namespace rddp::testing
