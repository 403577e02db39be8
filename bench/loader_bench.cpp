// The loader's images/s per worker count: the most a rank's loader can deliver, since the
// consumer only takes each batch and hands it back. Each row is the median of the timed epochs.
//
//   loader_bench [WORKERS...]                 (default: 1 2)
//     CIFAR-size data held in memory as the CIFAR reader holds it: RandomCrop(32, padding=4) +
//     flip, normalised float NCHW batches of 256 (the CPU engine's input), 50,000 images an
//     epoch, five timed epochs.
//   loader_bench --data DIR [--limit N] [--epochs E] [WORKERS...]
//     DIR as training opens it (an image folder, a pack, CIFAR, ...), with the training
//     transform training would choose (RandomResizedCrop(224) + flip for image folders and
//     packs) and uint8 batches of 256 as a GPU takes them; the first N images (all by
//     default), E timed epochs (3) after a warm-up one.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "resnet_ddp/data/data_config.h"
#include "resnet_ddp/data/host_allocator.h"
#include "resnet_ddp/data/in_memory_dataset.h"
#include "resnet_ddp/data/loader.h"
#include "resnet_ddp/rng.h"

using namespace rddp::data;

namespace {

OpenedData cifar_size_in_memory() {
  constexpr size_t kImages = 50000;
  ImageArray array;
  array.description = "CIFAR-size random images";
  array.height = array.width = 32;
  array.channels = 3;
  array.num_classes = 10;
  array.pixels.resize(kImages * 32 * 32 * 3);
  rddp::Rng rng(0);
  for (size_t i = 0; i < array.pixels.size(); i += 8) {
    const uint64_t bits = rng.next_u64();
    for (size_t b = 0; b < 8; ++b) array.pixels[i + b] = uint8_t(bits >> (8 * b));
  }
  for (size_t i = 0; i < kImages; ++i) array.labels.push_back(int32_t(rng.below(10)));
  OpenedData data;
  data.train = make_in_memory_dataset(std::move(array));
  data.train_transform.kind = Transform::Kind::random_crop_flip;
  data.train_transform.size = 32;
  data.normalization = normalization_preset("cifar10", 3);
  return data;
}

struct Run {
  double images_per_second = 0, wait_seconds = 0, epoch_seconds = 0;
};

Run measure(const OpenedData& data, const DataConfig& config, int workers, int epochs) {
  DataConfig with_workers = config;
  with_workers.workers = workers;
  const auto loader = make_train_loader(with_workers, data, 0, 1, make_plain_allocator());
  loader->start_epoch(0);  // a warm-up epoch: threads, buffers, caches
  while (loader->next()) {
  }
  std::vector<Run> runs;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const double waited_before = loader->total_wait_seconds();
    const auto start = std::chrono::steady_clock::now();
    loader->start_epoch(uint64_t(epoch));
    size_t images = 0;
    while (Loader::Lease batch = loader->next()) images += batch->count;
    Run run;
    run.epoch_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    run.images_per_second = double(images) / run.epoch_seconds;
    run.wait_seconds = loader->total_wait_seconds() - waited_before;
    runs.push_back(run);
  }
  // The median epoch is the figure least moved by other work on the machine.
  std::sort(runs.begin(), runs.end(),
            [](const Run& a, const Run& b) { return a.epoch_seconds < b.epoch_seconds; });
  return runs[runs.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> worker_counts;
  DataConfig config;
  config.batch_size = 256;
  int epochs = 5;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--data") == 0 && has_value) {
      config.path = argv[++i];
      epochs = 3;
    } else if (std::strcmp(argv[i], "--limit") == 0 && has_value) {
      config.limit_train = size_t(std::atoll(argv[++i]));
    } else if (std::strcmp(argv[i], "--epochs") == 0 && has_value) {
      epochs = std::max(1, std::atoi(argv[++i]));
    } else if (argv[i][0] != '-' && std::atoi(argv[i]) > 0) {
      worker_counts.push_back(std::atoi(argv[i]));
    } else {
      std::fprintf(stderr, "usage: %s [--data DIR [--limit N]] [--epochs E] [WORKERS...]\n",
                   argv[0]);
      return 2;
    }
  }
  if (worker_counts.empty()) worker_counts = {1, 2};
  try {
    OpenedData data;
    if (config.path.empty()) {
      data = cifar_size_in_memory();
    } else {
      config.make_float = false;  // as for a GPU: uint8 batches
      data = open_data(config);
    }
    std::printf("%s, %zu images an epoch, batches of %zu, %s, %s\n",
                data.train->description().c_str(), data.train->size(), config.batch_size, to_string(data.train_transform).c_str(),
                config.make_float ? "normalised float NCHW" : "uint8 HWC");
    std::printf("%-8s %12s %14s %16s\n", "workers", "images/s", "wait s/epoch", "epoch seconds");
    for (int workers : worker_counts) {
      const Run run = measure(data, config, workers, epochs);
      std::printf("%-8d %12.0f %14.3f %16.3f\n", workers, run.images_per_second,
                  run.wait_seconds, run.epoch_seconds);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loader_bench: %s\n", e.what());
    return 1;
  }
}
