// resnet_ddp_pack: decodes an image folder (or Tiny-ImageNet) once into packed files that
// resnet_ddp memory-maps, so that training decodes no JPEG. See docs/data.md.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "resnet_ddp/data/pack.h"
#include "resnet_ddp/error.h"

namespace {

constexpr const char* kUsage =
    "usage: resnet_ddp_pack INPUT_DIR OUTPUT_DIR [--size S] [--threads N] [--channels 3|1]\n"
    "\n"
    "Decodes every image of an image folder (INPUT_DIR/train/<class>/..., val/<class>/...) or\n"
    "of Tiny-ImageNet, resizes it so that its shorter side is S pixels (Pillow's bilinear\n"
    "resize, as torchvision's Resize(S)), and writes OUTPUT_DIR/train.rddp-pack and, where\n"
    "there is a validation split, OUTPUT_DIR/val.rddp-pack (a val.rddp-pack of an earlier run\n"
    "is removed otherwise). Both are written into OUTPUT_DIR/rddp-pack.tmp.<pid>/ and moved\n"
    "into place at the end: a failed run leaves the earlier pack as it was. Train on it with\n"
    "resnet_ddp --data OUTPUT_DIR.\n"
    "\n"
    "  --size S        shorter side of the packed images (default 256, what Resize(256) +\n"
    "                  CenterCrop(224) validation uses; 64 for Tiny-ImageNet, as stored)\n"
    "  --threads N     decoding threads (default: every core, here %u)\n"
    "  --channels C    3 decodes RGB (default), 1 greyscale\n";

unsigned default_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

int parse_int(const char* flag, const char* text, int low, int high) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0)
    rddp::fail(flag, ": '", text, "' is not a whole number");
  if (value < low || value > high)
    rddp::fail(flag, ": ", value, " is outside the accepted range [", low, ", ", high, "]");
  return int(value);
}

}  // namespace

int main(int argc, char** argv) {
  rddp::data::PackOptions options;
  options.threads = int(default_threads());
  std::vector<std::string> positional;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        std::printf(kUsage, default_threads());
        return 0;
      }
      const bool takes_value = arg == "--size" || arg == "--threads" || arg == "--channels";
      if (takes_value && i + 1 >= argc) rddp::fail(arg, " needs a value");
      if (arg == "--size") {
        options.size = parse_int("--size", argv[++i], 1, 1 << 16);
      } else if (arg == "--threads") {
        options.threads = parse_int("--threads", argv[++i], 1, 1024);
      } else if (arg == "--channels") {
        options.channels = parse_int("--channels", argv[++i], 1, 3);
        if (options.channels == 2) rddp::fail("--channels: 2 is not one of: 1, 3");
      } else if (arg.rfind("--", 0) == 0) {
        rddp::fail("unknown option '", arg, "' (see resnet_ddp_pack --help)");
      } else {
        positional.push_back(arg);
      }
    }
    if (positional.size() != 2)
      rddp::fail("give the input folder and the output folder (see resnet_ddp_pack --help)");
  } catch (const rddp::Error& error) {
    std::fprintf(stderr, "resnet_ddp_pack: %s\n", error.what());
    return 2;
  }

  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  options.progress = [&](const std::string& split, size_t done, size_t total) {
    std::fprintf(stderr, "resnet_ddp_pack: %s: %zu/%zu images (%.0f%%), %.0f s\n", split.c_str(),
                 done, total, total ? 100.0 * double(done) / double(total) : 100.0, seconds());
  };
  options.note = [](const std::string& line) {
    std::fprintf(stderr, "resnet_ddp_pack: %s\n", line.c_str());
  };
  try {
    std::fprintf(stderr, "resnet_ddp_pack: packing %s into %s with %d threads\n",
                 positional[0].c_str(), positional[1].c_str(), options.threads);
    const auto packed = rddp::data::pack_dataset(positional[0], positional[1], options);
    for (const auto& split : packed)
      std::printf("%s: %zu images, %.1f MiB (%.1f KiB per image)\n", split.path.c_str(),
                  split.images, double(split.bytes) / (1 << 20),
                  double(split.bytes) / 1024.0 / double(split.images));
    std::printf("packed in %.1f s; train with: resnet_ddp --data %s\n", seconds(),
                positional[1].c_str());
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "resnet_ddp_pack: error: %s\n", error.what());
    return 1;
  }
}
