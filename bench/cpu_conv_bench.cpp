// Time of every ResNet-18 convolution on the CPU layers, forward and both backward passes:
//   cpu_conv_bench [batch [image_size [stem]]]     (default 2 224 imagenet)
// Convolutions are nearly all of a ResNet's arithmetic, so the total is close to the cost of
// a CPU training step.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "resnet_ddp/cpu/layers.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/model_spec.h"
#include "resnet_ddp/rng.h"

namespace {

struct Timing {
  double forward = 0, backward_data = 0, backward_filter = 0;
};

// Best of three runs: the first also pays for page faults, and the machine may be shared.
template <typename F>
double seconds_of(F&& run) {
  double best = 0;
  for (int trial = 0; trial < 3; ++trial) {
    const auto start = std::chrono::steady_clock::now();
    run();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = trial == 0 ? seconds : std::min(best, seconds);
  }
  return best;
}

Timing time_conv(const rddp::ConvDesc& conv, int batch, int size, rddp::Rng& rng) {
  rddp::ConvShape s;
  s.batch = batch;
  s.in_channels = conv.in_channels;
  s.in_h = s.in_w = size;
  s.out_channels = conv.out_channels;
  s.kernel = conv.kernel;
  s.stride = conv.stride;
  s.pad = conv.pad;
  std::vector<float> x(size_t(batch) * s.in_channels * size * size);
  std::vector<float> w(size_t(s.out_channels) * s.in_channels * s.kernel * s.kernel);
  std::vector<float> y(size_t(batch) * s.out_channels * s.out_h() * s.out_w());
  for (float& v : x) v = float(rng.uniform(-1, 1));
  for (float& v : w) v = float(rng.uniform(-1, 1));
  std::vector<float> dx(x.size()), dw(w.size());
  Timing t;
  t.forward = seconds_of([&] { rddp::cpu::conv2d_forward(s, x.data(), w.data(), y.data()); });
  t.backward_data =
      seconds_of([&] { rddp::cpu::conv2d_backward_data(s, y.data(), w.data(), dx.data()); });
  t.backward_filter =
      seconds_of([&] { rddp::cpu::conv2d_backward_filter(s, x.data(), y.data(), dw.data()); });
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int batch = argc > 1 ? std::atoi(argv[1]) : 2;
    const int image = argc > 2 ? std::atoi(argv[2]) : 224;
    rddp::ModelSpec spec;
    if (argc > 3) spec.stem = rddp::parse_stem(argv[3]);
    if (batch < 1 || image < 1) rddp::fail("batch and image_size must be positive integers");
    const rddp::NetDesc net = rddp::describe(spec);
    rddp::Rng rng(1);

    std::printf("ResNet-18 convolutions, batch %d, %dx%d input, %s stem, float\n", batch, image,
                image, rddp::to_string(spec.stem));
    std::printf("%-24s %6s %9s %9s %9s %9s\n", "layer", "in", "fwd ms", "bwd-x ms", "bwd-w ms",
                "GFLOP/s");
    Timing total;
    double total_flops = 0;
    const auto report = [&](const rddp::ConvDesc& conv, int size) {
      const Timing t = time_conv(conv, batch, size, rng);
      const int out = rddp::window_output_size(size, conv.kernel, conv.stride, conv.pad);
      const double flops = 2.0 * batch * conv.out_channels * out * out * conv.in_channels *
                           conv.kernel * conv.kernel;
      const double seconds = t.forward + t.backward_data + t.backward_filter;
      std::printf("%-24s %6d %9.2f %9.2f %9.2f %9.1f\n", conv.name.c_str(), size,
                  t.forward * 1e3, t.backward_data * 1e3, t.backward_filter * 1e3,
                  3 * flops / seconds * 1e-9);
      total.forward += t.forward;
      total.backward_data += t.backward_data;
      total.backward_filter += t.backward_filter;
      total_flops += 3 * flops;
      return out;
    };

    int size = report(net.stem_conv, image);
    if (net.stem_maxpool) size = rddp::window_output_size(size, 3, 2, 1);
    for (const rddp::BasicBlockDesc& block : net.blocks) {
      const int mid = report(block.conv1, size);
      report(block.conv2, mid);
      if (block.has_downsample) report(block.downsample_conv, size);
      size = mid;
    }
    const double seconds = total.forward + total.backward_data + total.backward_filter;
    std::printf("%-24s %6s %9.1f %9.1f %9.1f %9.1f\n", "total", "", total.forward * 1e3,
                total.backward_data * 1e3, total.backward_filter * 1e3,
                total_flops / seconds * 1e-9);
    return 0;
  } catch (const rddp::Error& error) {
    std::fprintf(stderr, "cpu_conv_bench: %s\n", error.what());
    return 2;
  }
}
