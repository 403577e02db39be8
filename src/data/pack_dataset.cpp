// Packing an image folder or Tiny-ImageNet (what resnet_ddp_pack runs), and opening a
// directory of packs (what --data PACKED_DIR runs).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "resnet_ddp/data/dataset_kind.h"
#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/pack.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/data/regular_file.h"
#include "resnet_ddp/data/transform.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

// Tiny-ImageNet's images are all 64x64: packing keeps them so unless told otherwise.
constexpr int kTinyImageNetSide = 64;

// Decodes and resizes the images [first, first + out.size()) of `dataset` with `threads`
// threads. The first failure (an Error naming the file) is rethrown once all have stopped.
void prepare_chunk(const Dataset& dataset, size_t first, int size, int threads,
                   std::vector<Sample>& out) {
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (size_t i = next++; i < out.size(); i = next++) {
      std::exception_ptr failure;
      try {
        Sample sample = dataset.get(first + i);
        sample.image = resize_shorter_side(sample.image, size);
        out[i] = std::move(sample);
      } catch (const std::bad_alloc&) {
        failure = std::make_exception_ptr(Error(
            "not enough memory to decode and resize " + dataset.source(first + i) +
            ": free memory, or pack with fewer --threads"));
      } catch (...) {
        failure = std::current_exception();
      }
      if (failure) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = failure;
        next = out.size();  // the others stop at their next image
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  if (error) std::rethrow_exception(error);
}

PackedSplit pack_split(const std::string& split, const Dataset& dataset, const std::string& path,
                       PackInfo info, const PackOptions& options) {
  const int size = info.short_side;
  if (dataset.height() > 0)
    shorter_side_dims(dataset.height(), dataset.width(), size, info.fixed_height, info.fixed_width);
  PackWriter writer(path, std::move(info));
  // Chunks big enough to keep every thread busy, small enough to hold in memory.
  const size_t chunk = size_t(std::max(options.threads, 1)) * 16;
  std::vector<Sample> samples;
  auto last_report = std::chrono::steady_clock::now();
  for (size_t first = 0; first < dataset.size(); first += chunk) {
    samples.assign(std::min(chunk, dataset.size() - first), Sample{});
    prepare_chunk(dataset, first, size, options.threads, samples);
    for (const Sample& sample : samples) writer.add(sample.image, sample.label);
    const auto now = std::chrono::steady_clock::now();
    if (options.progress && now - last_report > std::chrono::seconds(2)) {
      options.progress(split, writer.count(), dataset.size());
      last_report = now;
    }
  }
  writer.finish();
  if (options.progress) options.progress(split, writer.count(), dataset.size());
  std::error_code error;
  const uintmax_t bytes = std::filesystem::file_size(path, error);
  return {path, writer.count(), error ? 0 : uint64_t(bytes)};
}

}  // namespace

std::vector<PackedSplit> pack_dataset(const std::string& input, const std::string& output,
                                      const PackOptions& options) {
  if (options.threads < 1) fail("the thread count must be at least 1, not ", options.threads);
  if (options.channels != 1 && options.channels != 3)
    fail("packs hold 3 channels (RGB) or 1 (greyscale), not ", options.channels);
  if (options.size < 0) fail("the packed size must be at least 1, not ", options.size);
  const DatasetKind kind = detect_dataset_kind(input);
  Splits splits;
  if (kind == DatasetKind::image_folder) {
    splits = open_image_folder(input, options.channels);
  } else if (kind == DatasetKind::tiny_imagenet) {
    splits = open_tiny_imagenet(input, options.channels);
  } else {
    fail(input, " holds ", to_string(kind), " data; resnet_ddp_pack packs image folders "
         "(train/<class>/...) and Tiny-ImageNet, whose images are decoded from files. ",
         kind == DatasetKind::packed ? "It is packed already."
                                     : "resnet_ddp reads this format into memory whole as it is.");
  }
  PackInfo info;
  info.channels = options.channels;
  info.short_side = options.size > 0 ? options.size
                    : kind == DatasetKind::tiny_imagenet ? kTinyImageNetSide
                                                         : kDefaultPackSize;
  // Both readers number the classes as the sorted folder names of train/.
  info.classes = list_image_folder(join_path(input, "train")).classes;

  std::error_code error;
  std::filesystem::create_directories(output, error);
  if (error || !is_directory(output))
    fail("cannot create the output directory ", output, ": ",
         error ? error.message() : std::string("a file of that name exists"),
         "; choose another path");
  std::vector<PackedSplit> packed;
  packed.push_back(pack_split("train", *splits.train, join_path(output, kPackTrainFile), info,
                              options));
  if (splits.val)
    packed.push_back(pack_split("val", *splits.val, join_path(output, kPackValFile), info, options));
  return packed;
}

Splits open_packed(const std::string& dir) {
  const std::string train_path = join_path(dir, kPackTrainFile);
  if (!path_exists(train_path))
    fail("packed data directory ", dir, " has no ", kPackTrainFile,
         ": make it with resnet_ddp_pack IMAGE_FOLDER ", dir);
  auto train = std::make_shared<const PackedDataset>(train_path, "packed train");
  Splits splits;
  splits.train = train;
  const std::string val_path = join_path(dir, kPackValFile);
  if (!path_exists(val_path)) return splits;
  auto val = std::make_shared<const PackedDataset>(val_path, "packed val");
  // Labels are positions in the class list: both splits need the same list.
  if (val->info().classes != train->info().classes)
    fail(val_path, " lists other classes (", val->info().classes.size(), ") than ", train_path,
         " (", train->info().classes.size(), "): pack both from the same folder with "
         "resnet_ddp_pack");
  if (val->channels() != train->channels())
    fail(val_path, " holds ", val->channels(), "-channel images and ", train_path, " ",
         train->channels(), "-channel ones: pack both with the same --channels");
  splits.val = val;
  return splits;
}

}  // namespace rddp::data
