#pragma once
// Worker threads read, decode and transform samples into a ring of batch buffers; the
// training loop takes the batches in order. Batch k of an epoch is the same whatever the
// number of workers: its samples are the sampler's, its random draws come from
// (seed, epoch, sample index), and batches are handed out strictly in order.
// No wait is endless: a read that hangs in the kernel (a hung network mount) makes next() give
// up after a stall limit, or sooner when its caller asks, naming the file; and the Loader's
// destructor leaves a worker stuck in such a read behind instead of waiting for it.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "resnet_ddp/data/dataset.h"
#include "resnet_ddp/data/host_allocator.h"
#include "resnet_ddp/data/normalize.h"
#include "resnet_ddp/data/sampler.h"
#include "resnet_ddp/data/transform.h"
#include "resnet_ddp/error.h"

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
  // next() throws an Error when it has waited this long for one batch, naming the file a
  // worker has been reading all along: reads of local files never take this long.
  double stall_limit_seconds = 600;
  // Once next(stop)'s stop() says so, how much longer next() still waits for its batch: one
  // on its way still arrives, and the caller ends at a step boundary as it would have.
  double stop_grace_seconds = 5;
};

// Thrown by next(stop) when stop() asked and no batch came within the grace; the message
// names the file a worker is stuck reading.
class DataWaitInterrupted : public Error {
 public:
  using Error::Error;
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
  // naming the sample's file, the first failure of any worker. Throws Error when no batch
  // comes within the stall limit, and DataWaitInterrupted when `stop` (asked every 100 ms
  // while next() waits; it must be quick) returns true and no batch comes within the grace.
  using StopWaiting = std::function<bool()>;
  Lease next(const StopWaiting& stop = {});

  size_t steps_per_epoch() const { return steps_; }
  int workers() const { return options_.workers; }
  const DistributedSampler& sampler() const { return sampler_; }
  const LoaderOptions& options() const { return options_; }
  // Seconds next() has waited for data since the loader was made.
  double total_wait_seconds() const { return total_wait_seconds_; }

 private:
  struct Slot;
  // What the workers share with the loader. They hold it too, so that a worker left behind in
  // a read that never returns still has its memory when the loader is gone.
  struct Shared;
  // Asks the workers to stop and waits up to `seconds` for them; joins them if they all
  // stopped, else leaves them (detached) and returns false.
  bool stop_workers(double seconds);
  // "loader thread k has been reading FILE for N s", of the read in progress longest.
  std::string longest_read() const;
  static void worker_loop(std::shared_ptr<Shared> shared, size_t worker);
  static bool fill(Shared& shared, Slot& slot, size_t step, size_t worker);
  void release(size_t slot_index);

  DistributedSampler sampler_;
  LoaderOptions options_;
  size_t steps_ = 0;
  std::shared_ptr<Shared> shared_;
  std::vector<std::thread> threads_;
  bool stuck_ = false;      // next() gave up on a worker's read
  bool abandoned_ = false;  // workers were left behind: their slots may still be written
  double total_wait_seconds_ = 0;
};

}  // namespace rddp::data
