#pragma once
// Worker threads read, decode and transform samples into a ring of batch buffers; the
// training loop takes the batches in order. Batch k of an epoch is the same whatever the
// number of workers: its samples are the sampler's, its random draws come from
// (seed, epoch, sample index), and batches are handed out strictly in order.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "resnet_ddp/data/dataset.h"
#include "resnet_ddp/data/host_allocator.h"
#include "resnet_ddp/data/normalize.h"
#include "resnet_ddp/data/sampler.h"
#include "resnet_ddp/data/transform.h"

namespace rddp::data {

struct LoaderOptions {
  size_t batch_size = 128;
  bool drop_last = false;       // DataLoader's drop_last: leave out a short last batch
  int workers = 1;
  int batches_per_worker = 2;   // ring size = workers * batches_per_worker (prefetch depth)
  Transform transform;
  uint64_t seed = 0;            // augmentation seed
  // Fill Batch::input with normalised float NCHW as well as the uint8 HWC pixels. Training on
  // a GPU turns this off: the engine takes the pixels (BatchInput::pixels, engine.h).
  bool make_float = true;
  Normalization normalization;  // needed when make_float is set
};

// One batch, valid while its Lease lives.
struct Batch {
  size_t step = 0;        // position in the epoch, from 0
  size_t count = 0;       // samples; the last batch of an epoch may be short
  int height = 0, width = 0, channels = 0;
  const uint8_t* pixels = nullptr;   // count x height x width x channels
  const float* input = nullptr;      // count x channels x height x width, or null
  const int32_t* labels = nullptr;   // count
  const int64_t* indices = nullptr;  // count data set indices, the sampler's order
  double wait_seconds = 0;           // how long next() waited for it
};

class Loader {
 public:
  Loader(DatasetPtr dataset, DistributedSampler sampler, LoaderOptions options,
         std::shared_ptr<HostAllocator> allocator);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Hands a batch's buffer back to the ring when it goes out of scope; keep it while the
  // buffer is still being read (an asynchronous copy to the device, say), and not longer
  // than the Loader. Every lease must be gone before the next start_epoch.
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();
    explicit operator bool() const { return loader_ != nullptr; }
    const Batch& operator*() const { return batch_; }
    const Batch* operator->() const { return &batch_; }

   private:
    friend class Loader;
    Lease() = default;
    Lease(Loader* loader, size_t slot, const Batch& batch);
    Loader* loader_ = nullptr;
    size_t slot_ = 0;
    Batch batch_;
  };

  // Starts making the batches of an epoch, ending the previous epoch's work if any. A resumed
  // run starts at `first_step`: the batches before it are never read.
  void start_epoch(uint64_t epoch, size_t first_step = 0);
  // The next batch in order; an empty Lease at the end of the epoch. Rethrows, as Error
  // naming the sample's file, the first failure of any worker.
  Lease next();

  size_t steps_per_epoch() const { return steps_; }
  int workers() const { return options_.workers; }
  const DistributedSampler& sampler() const { return sampler_; }
  const LoaderOptions& options() const { return options_; }
  // Seconds next() has waited for data since the loader was made.
  double total_wait_seconds() const { return total_wait_seconds_; }

 private:
  struct Slot;
  void stop_workers();
  void worker_loop();
  void fill(Slot& slot, size_t step);
  void release(size_t slot_index);

  DatasetPtr dataset_;
  DistributedSampler sampler_;
  LoaderOptions options_;
  std::shared_ptr<HostAllocator> allocator_;
  size_t steps_ = 0;
  std::vector<std::unique_ptr<Slot>> slots_;

  // Shared with the workers, under mutex_.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<int64_t> epoch_indices_;
  uint64_t epoch_ = 0;
  size_t next_to_fill_ = 0;
  size_t next_to_deliver_ = 0;
  bool stopping_ = true;  // no epoch is being made
  std::exception_ptr failure_;
  std::vector<std::thread> threads_;

  double total_wait_seconds_ = 0;
};

}  // namespace rddp::data
