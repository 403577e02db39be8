// Times training steps of the CUDA engine on synthetic data (one batch in pinned memory, reused)
// and prints images per second and the arithmetic rate they imply.
//
//   cuda_step_bench [--batch 256] [--size 224] [--stem imagenet|cifar] [--classes 1000]
//                   [--steps 30] [--strict] [--heuristic] [--deterministic]
//
// --strict turns TF32 off, --heuristic chooses convolution algorithms by cuDNN's heuristics
// instead of a timed search. Each run: 5 warm-up steps, then the timed steps back to back,
// timed from the first enqueue to take_metrics(), which waits for the device. Without a CUDA
// device it prints SKIPPED and exits 0.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "resnet_ddp/cuda/cuda_engine.h"
#include "resnet_ddp/cuda/device.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/model_spec.h"
#include "resnet_ddp/rng.h"

using namespace rddp;

namespace {

constexpr int kWarmup = 5;

struct Settings {
  int batch = 256, size = 224, classes = 1000, steps = 30;
  Stem stem = Stem::imagenet;
  bool strict = false, heuristic = false, deterministic = false;
};

int parse_int(const char* flag, const char* text) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > 1 << 20)
    fail(flag, " needs a positive integer, got '", text, "'");
  return static_cast<int>(value);
}

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) fail(flag, " needs a value");
      return argv[++i];
    };
    if (flag == "--batch") s.batch = parse_int("--batch", value());
    else if (flag == "--size") s.size = parse_int("--size", value());
    else if (flag == "--classes") s.classes = parse_int("--classes", value());
    else if (flag == "--steps") s.steps = parse_int("--steps", value());
    else if (flag == "--stem") s.stem = parse_stem(value());
    else if (flag == "--strict") s.strict = true;
    else if (flag == "--heuristic") s.heuristic = true;
    else if (flag == "--deterministic") s.deterministic = true;
    else fail("unknown flag '", flag, "'; see the comment at the top of bench/cuda_step_bench.cpp");
  }
  return s;
}

// Multiply-adds of one image's forward pass: every convolution and the classifier (BatchNorm,
// ReLU, pooling and additions are memory traffic, not arithmetic, and left out).
double forward_macs(const NetDesc& net, int size) {
  double macs = 0.0;
  auto conv = [&macs](const ConvDesc& c, int in) {
    const int out = window_output_size(in, c.kernel, c.stride, c.pad);
    macs += static_cast<double>(out) * out * c.out_channels * c.in_channels * c.kernel * c.kernel;
    return out;
  };
  int spatial = conv(net.stem_conv, size);
  if (net.stem_maxpool) spatial = window_output_size(spatial, 3, 2, 1);
  for (const BasicBlockDesc& block : net.blocks) {
    const int in = spatial;
    spatial = conv(block.conv1, in);
    conv(block.conv2, spatial);
    if (block.has_downsample) conv(block.downsample_conv, in);
  }
  return macs + static_cast<double>(net.fc.in_features) * net.fc.out_features;
}

int run(const Settings& s) {
  std::string reason;
  if (cuda::cuda_device_count_or_zero(&reason) == 0) {
    std::printf("SKIPPED: cuda_step_bench: no CUDA device answers (%s)\n", reason.c_str());
    return 0;
  }
  EngineConfig config;
  config.spec.stem = s.stem;
  config.spec.num_classes = s.classes;
  config.max_batch = s.batch;
  config.height = config.width = s.size;
  config.allow_tf32 = !s.strict;
  CudaEngineOptions options;
  options.deterministic = s.deterministic;
  options.conv_search =
      s.heuristic ? cuda::ConvAlgorithmSearch::heuristic : cuda::ConvAlgorithmSearch::timed;

  const auto built = std::chrono::steady_clock::now();
  auto engine = make_cuda_engine(config, 1, options);
  const double build_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - built).count();

  const size_t pixels = static_cast<size_t>(s.batch) * config.spec.in_channels * s.size * s.size;
  cuda::PinnedBuffer<float> images(pixels);
  cuda::PinnedBuffer<int32_t> labels(static_cast<size_t>(s.batch));
  Rng rng(1);
  for (size_t i = 0; i < pixels; ++i) images[i] = static_cast<float>(rng.normal());
  for (int i = 0; i < s.batch; ++i) labels[i] = static_cast<int32_t>(rng.below(s.classes));
  const HostBatch batch{s.batch, config.spec.in_channels, s.size, s.size, images.get(),
                        labels.get()};

  std::printf("device          %s\n", engine->device_name().c_str());
  std::printf("model           resnet18, %s stem, %d classes, %zu parameters\n", to_string(s.stem),
              s.classes, engine->layout().parameter_count());
  std::printf("batch x image   %d x %dx%dx%d\n", s.batch, config.spec.in_channels, s.size, s.size);
  std::printf("maths           %s, %s algorithms%s\n", s.strict ? "strict fp32" : "TF32",
              s.heuristic ? "heuristic" : "timed-search", s.deterministic ? ", deterministic" : "");
  std::printf("engine built in %.1f s\n", build_seconds);

  for (int i = 0; i < kWarmup; ++i) engine->train_step(batch, 1e-3, nullptr);
  engine->take_metrics();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < s.steps; ++i) engine->train_step(batch, 1e-3, nullptr);
  const Metrics metrics = engine->take_metrics();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const double images_per_second = s.steps * static_cast<double>(s.batch) / seconds;
  // Training is about three forward passes of arithmetic (forward, backward data, backward
  // filter), two flops per multiply-add.
  const double flops_per_image = 3.0 * 2.0 * forward_macs(describe(config.spec), s.size);
  std::printf("step            %.2f ms\n", 1e3 * seconds / s.steps);
  std::printf("throughput      %.0f images/s\n", images_per_second);
  std::printf("arithmetic      %.1f TFLOP/s (%.2f GFLOP per image)\n",
              images_per_second * flops_per_image / 1e12, flops_per_image / 1e9);
  std::printf("mean loss       %.4f\n", metrics.loss_sum / static_cast<double>(metrics.count));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const Error& error) {
    std::fprintf(stderr, "cuda_step_bench: %s\n", error.what());
    return 1;
  }
}
