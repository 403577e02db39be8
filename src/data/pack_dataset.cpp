// Packing an image folder or Tiny-ImageNet (what resnet_ddp_pack runs), and opening a
// directory of packs (what --data PACKED_DIR runs).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "pack_staging.h"
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

// Random, so that two runs' packs tell themselves apart wherever they are copied.
uint64_t new_run_id() {
  std::random_device device;
  return uint64_t(device()) << 32 ^ uint64_t(device());
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
  // Both readers number the classes as the sorted folder names of train/: its one listing
  // gives them.
  const std::string train_dir = join_path(input, "train");
  std::vector<std::string> classes;
  const FolderLister list = [&](const std::string& root, bool may_be_absent) {
    FolderListing listing = list_image_folder(root, may_be_absent);
    if (root == train_dir) classes = listing.classes;
    return listing;
  };
  Splits splits;
  if (kind == DatasetKind::image_folder) {
    splits = open_image_folder(input, options.channels, list);
  } else if (kind == DatasetKind::tiny_imagenet) {
    splits = open_tiny_imagenet(input, options.channels, list);
  } else {
    fail(input, " holds ", to_string(kind), " data; resnet_ddp_pack packs image folders "
         "(train/<class>/...) and Tiny-ImageNet, whose images are decoded from files. ",
         kind == DatasetKind::packed ? "It is packed already."
                                     : "resnet_ddp reads this format into memory whole as it is.");
  }
  RDDP_ASSERT(!classes.empty());
  PackInfo info;
  info.channels = options.channels;
  info.short_side = options.size > 0 ? options.size
                    : kind == DatasetKind::tiny_imagenet ? kTinyImageNetSide
                                                         : kDefaultPackSize;
  info.classes = std::move(classes);
  info.run_id = new_run_id();
  if (options.note) {
    options.note("train: " + splits.train->description());
    if (splits.val) options.note("val: " + splits.val->description());
  }

  PackStaging staging(output, options.note);
  std::vector<PackedSplit> packed;
  std::vector<std::string> written;
  packed.push_back(pack_split("train", *splits.train, staging.staged(kPackTrainFile), info,
                              options));
  written.push_back(kPackTrainFile);
  if (splits.val) {
    packed.push_back(pack_split("val", *splits.val, staging.staged(kPackValFile), info, options));
    written.insert(written.begin(), kPackValFile);  // train last: see PackStaging::commit
  }
  staging.commit(written, {kPackTrainFile, kPackValFile});
  packed[0].path = join_path(output, kPackTrainFile);
  if (splits.val) packed[1].path = join_path(output, kPackValFile);
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
  const PackInfo& t = train->info();
  const PackInfo& v = val->info();
  // A val pack of another run may hold other images, or the same images under other labels.
  if (v.version != t.version || v.run_id != t.run_id) {
    char ids[64];
    std::snprintf(ids, sizeof ids, "run ids %016llx and %016llx", (unsigned long long)v.run_id,
                  (unsigned long long)t.run_id);
    fail("'", val_path, "' was written by another resnet_ddp_pack run than '", train_path, "' (",
         v.version != t.version ? "format versions " + std::to_string(v.version) + " and " +
                                      std::to_string(t.version)
                                : std::string(ids),
         "): it may hold other images than the training pack's validation split. Run "
         "resnet_ddp_pack again to write both, or remove '", val_path, "' to train without "
         "validation");
  }
  // Labels are positions in the class list: both splits need the same list.
  if (v.classes != t.classes)
    fail(val_path, " lists other classes (", v.classes.size(), ") than ", train_path, " (",
         t.classes.size(), "): pack both from the same folder with resnet_ddp_pack");
  if (val->channels() != train->channels())
    fail(val_path, " holds ", val->channels(), "-channel images and ", train_path, " ",
         train->channels(), "-channel ones: pack both with the same --channels");
  splits.val = val;
  return splits;
}

}  // namespace rddp::data
