// Loader throughput on CIFAR-size data held in memory, as the CIFAR reader holds it:
// RandomCrop(32, padding=4) + flip, normalised float NCHW batches of 256, one epoch of
// 50,000 images per worker count. The consumer only takes each batch and hands it back, so
// the figures are the loader's ceiling. Each row is the median of five epochs.
//
//   loader_bench [WORKERS...]      (default: 1 2)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "resnet_ddp/data/host_allocator.h"
#include "resnet_ddp/data/in_memory_dataset.h"
#include "resnet_ddp/data/loader.h"
#include "resnet_ddp/rng.h"

using namespace rddp::data;

int main(int argc, char** argv) {
  std::vector<int> worker_counts;
  for (int i = 1; i < argc; ++i) worker_counts.push_back(std::atoi(argv[i]));
  if (worker_counts.empty()) worker_counts = {1, 2};
  try {
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
    const DatasetPtr dataset = make_in_memory_dataset(std::move(array));

    std::printf("%-8s %10s %12s %14s %16s\n", "workers", "batches/s", "images/s", "wait s/epoch",
                "epoch seconds");
    for (int workers : worker_counts) {
      LoaderOptions options;
      options.batch_size = 256;
      options.workers = workers;
      options.transform.kind = Transform::Kind::random_crop_flip;
      options.transform.size = 32;
      options.normalization = normalization_preset("cifar10", 3);
      Loader loader(dataset, DistributedSampler(kImages, 1, 0, true, 0), options, make_plain_allocator());
      loader.start_epoch(0);  // a warm-up epoch: threads, buffers, caches
      while (loader.next()) {
      }
      // Five timed epochs; the median is the figure least moved by other work on the machine.
      std::vector<double> epoch_seconds, epoch_wait;
      size_t batches = 0, images = 0;
      for (uint64_t epoch = 1; epoch <= 5; ++epoch) {
        const double waited_before = loader.total_wait_seconds();
        const auto start = std::chrono::steady_clock::now();
        loader.start_epoch(epoch);
        batches = images = 0;
        while (Loader::Lease batch = loader.next()) {
          ++batches;
          images += batch->count;
        }
        epoch_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        epoch_wait.push_back(loader.total_wait_seconds() - waited_before);
      }
      std::vector<size_t> order = {0, 1, 2, 3, 4};
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return epoch_seconds[a] < epoch_seconds[b]; });
      const double seconds = epoch_seconds[order[2]];
      std::printf("%-8d %10.1f %12.0f %14.3f %16.3f\n", workers, double(batches) / seconds,
                  double(images) / seconds, epoch_wait[order[2]], seconds);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loader_bench: %s\n", e.what());
    return 1;
  }
}
