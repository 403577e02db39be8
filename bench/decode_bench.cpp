// Single-thread JPEG decoding as the loader decodes (libjpeg-turbo, jpeg_decode.h), and decoding plus the ImageNet training
// transform (RandomResizedCrop(224) + flip), in images per second of one core's time: with the
// whole image decoded, and as the loader does it, with only the crop decoded. The
// files are read into memory first, so the figures leave the disk out; the time is the
// thread's CPU time, so other work on a shared machine does not count against it.
// Then the same images packed as resnet_ddp_pack packs them (shorter side 256): reading one
// from the memory-mapped pack (copy + CRC check), and that plus the same transform. The pack
// is written to the system's temporary directory and read back while the page cache holds
// it, so these figures too leave the disk out. The last row adds the float normalisation that
// the loader does only for the CPU engine (a GPU takes the uint8 batch and normalises it).
//
//   decode_bench DIR [SECONDS]      (DIR: *.jpg files, e.g. from bench/make_jpegs.py)
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/image_decode.h"
#include "resnet_ddp/data/malloc_tuning.h"
#include "resnet_ddp/data/normalize.h"
#include "resnet_ddp/data/pack.h"
#include "resnet_ddp/data/transform.h"
#include "resnet_ddp/error.h"

using namespace rddp::data;
namespace {

double thread_cpu_seconds() {
  timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return double(now.tv_sec) + 1e-9 * double(now.tv_nsec);
}

struct Result {
  double images_per_second;
  double megapixels_per_second;
};

// Runs `work` over the files again and again for at least `seconds` of CPU time, after one
// warm-up pass.
template <typename Item, typename Work>
Result measure(const std::vector<Item>& files, double seconds, Work work) {
  for (const auto& file : files) work(file, 0);
  size_t images = 0;
  double pixels = 0;
  const double start = thread_cpu_seconds();
  double elapsed = 0;
  for (uint64_t round = 1; elapsed < seconds; ++round) {
    for (const auto& file : files) pixels += work(file, round);
    images += files.size();
    elapsed = thread_cpu_seconds() - start;
  }
  return {images / elapsed, pixels / elapsed / 1e6};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s DIR_OF_JPEGS [SECONDS]\n", argv[0]);
    return 2;
  }
  const double seconds = argc == 3 ? std::atof(argv[2]) : 5.0;
  keep_freed_image_memory();  // as the loader does
  try {
    std::vector<std::string> paths;
    for (const auto& entry : std::filesystem::directory_iterator(argv[1]))
      if (has_decodable_extension(entry.path().string())) paths.push_back(entry.path().string());
    std::sort(paths.begin(), paths.end());
    if (paths.empty()) rddp::fail("no images in ", argv[1], ": make some with bench/make_jpegs.py");
    std::vector<std::vector<uint8_t>> files;
    double bytes = 0;
    for (const std::string& path : paths) {
      files.push_back(read_file(path));
      bytes += double(files.back().size());
    }

    const Result decode = measure(files, seconds, [](const std::vector<uint8_t>& file, uint64_t) {
      const Image image = decode_image(file.data(), file.size(), 3, "benchmark image");
      return double(image.height) * image.width;
    });
    Transform train;
    train.kind = Transform::Kind::random_resized_crop_flip;
    train.size = 224;
    const Result augment = measure(files, seconds, [&](const std::vector<uint8_t>& file, uint64_t round) {
      const Image image = decode_image(file.data(), file.size(), 3, "benchmark image");
      const Image out = apply_transform(train, image, 0, round, uint64_t(file.size()));
      return double(image.height) * image.width + (out.pixels.empty() ? 1 : 0);
    });
    // As the loader does it: the crop is drawn from the header's size, and only it is decoded.
    const Result region = measure(files, seconds, [&](const std::vector<uint8_t>& file, uint64_t round) {
      std::optional<ResizedCropDraw> draw;
      double pixels = 0;
      const Image crop = decode_image_crop(file.data(), file.size(), 3, [&](int height, int width) {
        pixels = double(height) * width;
        draw.emplace(train, height, width, 0, round, uint64_t(file.size()));
        return draw->box();
      }, "benchmark image");
      const Image out = draw->finish(crop);
      return pixels + (out.pixels.empty() ? 1 : 0);
    });
    std::printf("%s, %zu files, %.0f KiB average, one thread:\n", jpeg_library_version().c_str(),
                files.size(), bytes / double(files.size()) / 1024);
    std::printf("  decode                                   %8.1f images/s  %7.1f MP/s\n",
                decode.images_per_second, decode.megapixels_per_second);
    std::printf("  decode + RandomResizedCrop(224) + flip   %8.1f images/s\n",
                augment.images_per_second);
    std::printf("  the crop decoded alone, as the loader    %8.1f images/s\n",
                region.images_per_second);

    // The same images, packed at shorter side 256 as resnet_ddp_pack does by default.
    const std::string pack_path = (std::filesystem::temp_directory_path() /
                                   ("decode_bench." + std::to_string(getpid()) + ".rddp-pack"))
                                      .string();
    PackInfo info;
    info.short_side = kDefaultPackSize;
    info.classes = {"all"};
    {
      PackWriter writer(pack_path, info);
      for (const auto& file : files)
        writer.add(resize_shorter_side(decode_image(file.data(), file.size(), 3, "benchmark image"),
                                       kDefaultPackSize), 0);
      writer.finish();
    }
    const double pack_bytes = double(std::filesystem::file_size(pack_path));
    std::vector<size_t> indices(files.size());
    for (size_t i = 0; i < files.size(); ++i) indices[i] = i;
    Result read{}, packed_augment{}, packed_float{};
    {
      const PackedDataset pack(pack_path, "benchmark pack");
      read = measure(indices, seconds, [&](size_t index, uint64_t) {
        const Image image = pack.get(index).image;
        return double(image.height) * image.width;
      });
      packed_augment = measure(indices, seconds, [&](size_t index, uint64_t round) {
        const Image image = pack.get(index).image;
        const Image out = apply_transform(train, image, 0, round, index);
        return double(image.height) * image.width + (out.pixels.empty() ? 1 : 0);
      });
      // What the loader adds for an engine that takes float batches (the CPU's): ToTensor +
      // Normalize into float NCHW. On a GPU the batch stays uint8 and the device normalises it.
      const Normalization imagenet = normalization_preset("imagenet", 3);
      std::vector<float> input(size_t(3) * train.size * train.size);
      packed_float = measure(indices, seconds, [&](size_t index, uint64_t round) {
        const Image image = pack.get(index).image;
        const Image out = apply_transform(train, image, 0, round, index);
        normalize_to_nchw(out.pixels.data(), 1, out.height, out.width, 3, imagenet, input.data());
        return double(image.height) * image.width + (input[index % input.size()] > 1e30f ? 1 : 0);
      });
    }
    std::filesystem::remove(pack_path);
    std::printf("packed at shorter side %d, %.0f KiB per image, memory-mapped, one thread:\n",
                kDefaultPackSize, pack_bytes / double(files.size()) / 1024);
    std::printf("  packed read (copy + CRC check)           %8.1f images/s  %7.1f MP/s\n",
                read.images_per_second, read.megapixels_per_second);
    std::printf("  packed + RandomResizedCrop(224) + flip   %8.1f images/s\n",
                packed_augment.images_per_second);
    std::printf("  the same + normalise to float NCHW       %8.1f images/s\n",
                packed_float.images_per_second);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode_bench: %s\n", e.what());
    return 1;
  }
}
