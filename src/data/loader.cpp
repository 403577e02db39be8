#include "resnet_ddp/data/loader.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <optional>

#include "resnet_ddp/data/malloc_tuning.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

using Clock = std::chrono::steady_clock;

// How long the destructor waits for the workers to finish their sample before it leaves them
// behind: a worker that is not stuck is done in well under a second.
constexpr double kLeaveBehindSeconds = 2;
constexpr auto kPollInterval = std::chrono::milliseconds(100);

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

double seconds(Clock::duration duration) { return std::chrono::duration<double>(duration).count(); }

std::string seconds_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, value < 10 ? "%.1f s" : "%.0f s", value);
  return text;
}

}  // namespace

// One batch buffer of the ring. Step s always goes to slot s % ring size, so a worker knows
// where to write without asking the consumer, and the consumer where to look.
struct Loader::Slot {
  enum class State { free, filling, ready, leased };

  Slot(HostAllocator& allocator, size_t pixel_bytes, size_t float_count, size_t batch_size)
      : allocator(allocator),
        pixels(static_cast<uint8_t*>(allocator.allocate(pixel_bytes))),
        input(float_count ? static_cast<float*>(allocator.allocate(float_count * sizeof(float)))
                          : nullptr),
        labels(static_cast<int32_t*>(allocator.allocate(batch_size * sizeof(int32_t)))),
        indices(batch_size) {}
  ~Slot() {
    allocator.deallocate(pixels);
    if (input) allocator.deallocate(input);
    allocator.deallocate(labels);
  }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

  HostAllocator& allocator;
  uint8_t* pixels;
  float* input;
  int32_t* labels;
  std::vector<int64_t> indices;
  State state = State::free;
  size_t step = 0;  // the step this slot holds, or the next one it may take while free
  Batch batch;
};

struct Loader::Shared {
  // The sample a worker is reading, and since when; -1 while it reads none. Written by the
  // worker, read by next() to say which file it waits for.
  struct Reading {
    std::atomic<int64_t> index{-1};
    std::atomic<int64_t> since_ns{0};
  };

  Shared(DatasetPtr dataset, LoaderOptions options, std::shared_ptr<HostAllocator> allocator)
      : dataset(std::move(dataset)), options(std::move(options)), allocator(std::move(allocator)) {}

  const DatasetPtr dataset;
  const LoaderOptions options;
  const std::shared_ptr<HostAllocator> allocator;  // outlives the slots it allocated
  std::vector<std::unique_ptr<Slot>> slots;
  std::vector<std::unique_ptr<Reading>> reading;  // one per worker
  size_t steps = 0;

  // Under mutex.
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<int64_t> epoch_indices;
  uint64_t epoch = 0;
  size_t next_to_fill = 0;
  size_t next_to_deliver = 0;
  bool stopping = true;  // no epoch is being made
  std::exception_ptr failure;
  size_t running = 0;    // worker threads that have not returned

  std::atomic<bool> stop_now{true};  // `stopping`, for workers between samples
};

Loader::Loader(DatasetPtr dataset, DistributedSampler sampler, LoaderOptions options,
               std::shared_ptr<HostAllocator> allocator)
    : sampler_(std::move(sampler)), options_(std::move(options)) {
  RDDP_ASSERT(dataset && allocator);
  RDDP_ASSERT(sampler_.dataset_size() == dataset->size());
  options_.transform.validate();
  keep_freed_image_memory();  // before the workers allocate their first images
  if (options_.workers < 1) fail("the loader needs at least one worker, not ", options_.workers);
  if (options_.batches_per_worker < 1)
    fail("each loader worker needs at least one batch buffer, not ", options_.batches_per_worker);
  if (!(options_.stall_limit_seconds > 0) || !(options_.stop_grace_seconds >= 0))
    fail("the loader's stall limit must be positive and its stop grace not negative");
  if (options_.make_float) {
    const Normalization& n = options_.normalization;
    if (int(n.mean.size()) != dataset->channels() || int(n.stddev.size()) != dataset->channels())
      fail("the ", n.name.empty() ? "given" : n.name, " normalisation has ", n.mean.size(),
           " channels but ", dataset->description(), " has ", dataset->channels());
  }
  steps_ = data::steps_per_epoch(sampler_.num_samples(), options_.batch_size, options_.drop_last);
  const size_t image = size_t(options_.transform.size) * options_.transform.size *
                       size_t(dataset->channels());
  const size_t ring = std::min(size_t(options_.workers) * size_t(options_.batches_per_worker),
                               std::max<size_t>(steps_, 1));
  shared_ = std::make_shared<Shared>(std::move(dataset), options_, std::move(allocator));
  shared_->steps = steps_;
  for (size_t i = 0; i < ring; ++i)
    shared_->slots.push_back(std::make_unique<Slot>(
        *shared_->allocator, options_.batch_size * image,
        options_.make_float ? options_.batch_size * image : 0, options_.batch_size));
  for (int i = 0; i < options_.workers; ++i)
    shared_->reading.push_back(std::make_unique<Shared::Reading>());
}

// Once next() has found a worker stuck, waiting for it would only delay the exit.
Loader::~Loader() { stop_workers(stuck_ ? 0.1 : kLeaveBehindSeconds); }

bool Loader::stop_workers(double wait_seconds) {
  Shared& s = *shared_;
  std::unique_lock<std::mutex> lock(s.mutex);
  s.stopping = true;
  s.stop_now = true;
  s.changed.notify_all();
  const bool stopped = s.changed.wait_for(lock, std::chrono::duration<double>(wait_seconds),
                                          [&] { return s.running == 0; });
  lock.unlock();
  for (std::thread& thread : threads_) {
    if (stopped) {
      thread.join();
    } else {
      thread.detach();  // it holds `shared_` and ends, if ever, on its own
    }
  }
  threads_.clear();
  if (!stopped) abandoned_ = true;
  return stopped;
}

std::string Loader::longest_read() const {
  const Shared& s = *shared_;
  const int64_t now = now_ns();
  int64_t longest = -1, index = -1;
  size_t worker = 0;
  for (size_t w = 0; w < s.reading.size(); ++w) {
    const int64_t reading = s.reading[w]->index.load(std::memory_order_acquire);
    const int64_t since = s.reading[w]->since_ns.load(std::memory_order_relaxed);
    if (reading >= 0 && now - since > longest) {
      longest = now - since;
      index = reading;
      worker = w;
    }
  }
  if (index < 0) return "";
  return "loader thread " + std::to_string(worker) + " has been reading " +
         s.dataset->source(size_t(index)) + " for " + seconds_text(double(longest) * 1e-9);
}

void Loader::start_epoch(uint64_t epoch, size_t first_step) {
  if (first_step > steps_)
    fail("cannot start epoch ", epoch, " at step ", first_step, ": it has ", steps_, " steps");
  if (abandoned_)
    fail("cannot start epoch ", epoch, ": a loader thread is still stuck in a read");
  Shared& s = *shared_;
  if (!stop_workers(options_.stall_limit_seconds)) {
    const std::string read = longest_read();
    fail("the previous epoch's loader threads did not stop within ",
         seconds_text(options_.stall_limit_seconds), read.empty() ? "" : ": " + read,
         ". The file system may be hung: check that its mount answers, or copy the data to a "
         "local disk");
  }
  for (const auto& slot : s.slots)
    RDDP_ASSERT(slot->state != Slot::State::leased);  // every batch handed back first
  s.epoch_indices = sampler_.indices(epoch);
  s.epoch = epoch;
  s.next_to_fill = s.next_to_deliver = first_step;
  s.stopping = false;
  s.stop_now = false;
  s.failure = nullptr;
  // Step k always lives in slot k % slots: each slot waits for the first step it will hold.
  const size_t slot_count = s.slots.size();
  for (size_t i = 0; i < slot_count; ++i) {
    s.slots[i]->state = Slot::State::free;
    s.slots[i]->step = first_step + (i + slot_count - first_step % slot_count) % slot_count;
  }
  const size_t threads = std::min(size_t(options_.workers), steps_ - first_step);
  s.running = threads;
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back(&Loader::worker_loop, shared_, i);
}

void Loader::worker_loop(std::shared_ptr<Shared> shared, size_t worker) {
  // Named, so that top -H, a debugger and the tests tell the loader's threads apart.
  pthread_setname_np(pthread_self(), "rddp loader");
  Shared& s = *shared;
  std::unique_lock<std::mutex> lock(s.mutex);
  while (!s.stopping && !s.failure && s.next_to_fill < s.steps) {
    const size_t step = s.next_to_fill++;
    Slot& slot = *s.slots[step % s.slots.size()];
    s.changed.wait(lock, [&] {
      return s.stopping || s.failure || (slot.state == Slot::State::free && slot.step == step);
    });
    if (s.stopping || s.failure) break;
    slot.state = Slot::State::filling;
    lock.unlock();
    std::exception_ptr error;
    bool filled = false;
    try {
      filled = fill(s, slot, step, worker);
    } catch (const Error&) {
      error = std::current_exception();
    } catch (const std::exception& e) {
      error = std::make_exception_ptr(Error("loading batch " + std::to_string(step) + ": " + e.what()));
    } catch (...) {
      error = std::make_exception_ptr(Error("loading batch " + std::to_string(step) + " failed"));
    }
    lock.lock();
    if (error) {
      if (!s.failure) s.failure = error;
    } else if (filled) {
      slot.state = Slot::State::ready;
    }
    s.changed.notify_all();
  }
  --s.running;
  s.changed.notify_all();
}

bool Loader::fill(Shared& s, Slot& slot, size_t step, size_t worker) {
  const Transform& transform = s.options.transform;
  const Dataset& dataset = *s.dataset;
  const int size = transform.size, channels = dataset.channels();
  const size_t image_bytes = size_t(size) * size * channels;
  const size_t begin = step * s.options.batch_size;
  const size_t count = std::min(s.options.batch_size, s.epoch_indices.size() - begin);
  Shared::Reading& reading = *s.reading[worker];
  for (size_t i = 0; i < count; ++i) {
    if (s.stop_now.load(std::memory_order_relaxed)) return false;
    const int64_t index = s.epoch_indices[begin + i];
    reading.since_ns.store(now_ns(), std::memory_order_relaxed);
    reading.index.store(index, std::memory_order_release);
    Sample sample;
    Image out;
    try {
      if (transform.kind == Transform::Kind::random_resized_crop_flip) {
        // The crop is chosen from the image's size alone, so a data set may decode only it.
        std::optional<ResizedCropDraw> draw;
        sample = dataset.get_crop(size_t(index), [&](int height, int width) {
          draw.emplace(transform, height, width, s.options.seed, s.epoch, uint64_t(index));
          return draw->box();
        });
        out = draw->finish(sample.image);
      } else {
        sample = dataset.get(size_t(index));
        try {
          out = apply_transform(transform, sample.image, s.options.seed, s.epoch, uint64_t(index));
        } catch (const Error& e) {
          fail(dataset.source(size_t(index)), ": ", e.what());
        }
      }
    } catch (const std::bad_alloc&) {
      reading.index.store(-1, std::memory_order_release);
      fail("not enough memory to read and prepare ", dataset.source(size_t(index)),
           ": free memory, or use fewer loader threads");
    } catch (...) {
      reading.index.store(-1, std::memory_order_release);
      throw;
    }
    reading.index.store(-1, std::memory_order_release);
    RDDP_ASSERT(out.height == size && out.width == size && out.channels == channels);
    std::memcpy(slot.pixels + i * image_bytes, out.pixels.data(), image_bytes);
    slot.labels[i] = sample.label;
    slot.indices[i] = index;
  }
  if (slot.input)
    normalize_to_nchw(slot.pixels, count, size, size, channels, s.options.normalization,
                      slot.input);
  Batch& batch = slot.batch;
  batch.step = step;
  batch.count = count;
  batch.height = batch.width = size;
  batch.channels = channels;
  batch.pixels = slot.pixels;
  batch.input = slot.input;
  batch.labels = slot.labels;
  batch.indices = slot.indices.data();
  return true;
}

Loader::Lease Loader::next(const StopWaiting& stop) {
  Shared& s = *shared_;
  RDDP_ASSERT(!s.stopping);  // start_epoch comes first
  if (s.next_to_deliver >= steps_) return Lease();
  const auto start = Clock::now();
  const size_t step = s.next_to_deliver;
  const size_t index = step % s.slots.size();
  Slot& slot = *s.slots[index];
  {
    std::unique_lock<std::mutex> lock(s.mutex);
    const auto arrived = [&] {
      return s.failure || (slot.state == Slot::State::ready && slot.step == step);
    };
    std::optional<Clock::time_point> stop_asked;
    while (!s.changed.wait_for(lock, kPollInterval, arrived)) {
      if (stop && !stop_asked) {
        lock.unlock();  // the caller's check runs without the loader's lock
        const bool asked = stop();
        lock.lock();
        if (asked) stop_asked = Clock::now();
        if (arrived()) break;
      }
      const auto now = Clock::now();
      if (stop_asked && seconds(now - *stop_asked) >= options_.stop_grace_seconds) {
        stuck_ = true;
        const std::string read = longest_read();
        throw DataWaitInterrupted(
            "stopped waiting for batch " + std::to_string(step) + " of the epoch after " +
            seconds_text(seconds(now - start)) + (read.empty() ? "" : ": " + read) +
            " (the file system may be hung: check that its mount answers)");
      }
      if (seconds(now - start) >= options_.stall_limit_seconds) {
        stuck_ = true;
        const std::string read = longest_read();
        fail("no batch for ", seconds_text(seconds(now - start)), " (batch ", step,
             " of the epoch): ",
             read.empty() ? std::string("no loader thread is reading a file; please report this")
                          : read + ". The file system may be hung: check that its mount "
                                   "answers (ls, df), or copy the data to a local disk");
      }
    }
    if (s.failure) std::rethrow_exception(s.failure);
    slot.state = Slot::State::leased;
    ++s.next_to_deliver;
  }
  slot.batch.wait_seconds = seconds(Clock::now() - start);
  total_wait_seconds_ += slot.batch.wait_seconds;
  return Lease(this, index, slot.batch);
}

void Loader::release(size_t slot_index) {
  Shared& s = *shared_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    Slot& slot = *s.slots[slot_index];
    slot.state = Slot::State::free;
    slot.step += s.slots.size();
  }
  s.changed.notify_all();
}

Loader::Lease::Lease(Loader* loader, size_t slot, const Batch& batch)
    : loader_(loader), slot_(slot), batch_(batch) {}

Loader::Lease::Lease(Lease&& other) noexcept
    : loader_(other.loader_), slot_(other.slot_), batch_(other.batch_) {
  other.loader_ = nullptr;
}

Loader::Lease& Loader::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (loader_) loader_->release(slot_);
    loader_ = other.loader_;
    slot_ = other.slot_;
    batch_ = other.batch_;
    other.loader_ = nullptr;
  }
  return *this;
}

Loader::Lease::~Lease() {
  if (loader_) loader_->release(slot_);
}

}  // namespace rddp::data
