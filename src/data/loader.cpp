#include "resnet_ddp/data/loader.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "resnet_ddp/data/malloc_tuning.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

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

Loader::Loader(DatasetPtr dataset, DistributedSampler sampler, LoaderOptions options,
               std::shared_ptr<HostAllocator> allocator)
    : dataset_(std::move(dataset)), sampler_(std::move(sampler)), options_(std::move(options)),
      allocator_(std::move(allocator)) {
  RDDP_ASSERT(dataset_ && allocator_);
  RDDP_ASSERT(sampler_.dataset_size() == dataset_->size());
  options_.transform.validate();
  keep_freed_image_memory();  // before the workers allocate their first images
  if (options_.workers < 1) fail("the loader needs at least one worker, not ", options_.workers);
  if (options_.batches_per_worker < 1)
    fail("each loader worker needs at least one batch buffer, not ", options_.batches_per_worker);
  if (options_.make_float) {
    const Normalization& n = options_.normalization;
    if (int(n.mean.size()) != dataset_->channels() || int(n.stddev.size()) != dataset_->channels())
      fail("the ", n.name.empty() ? "given" : n.name, " normalisation has ", n.mean.size(),
           " channels but ", dataset_->description(), " has ", dataset_->channels());
  }
  steps_ = data::steps_per_epoch(sampler_.num_samples(), options_.batch_size, options_.drop_last);
  const size_t image = size_t(options_.transform.size) * options_.transform.size *
                       size_t(dataset_->channels());
  const size_t ring = std::min(size_t(options_.workers) * size_t(options_.batches_per_worker),
                               std::max<size_t>(steps_, 1));
  for (size_t i = 0; i < ring; ++i)
    slots_.push_back(std::make_unique<Slot>(*allocator_, options_.batch_size * image,
                                            options_.make_float ? options_.batch_size * image : 0,
                                            options_.batch_size));
}

Loader::~Loader() { stop_workers(); }

void Loader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

void Loader::start_epoch(uint64_t epoch, size_t first_step) {
  if (first_step > steps_)
    fail("cannot start epoch ", epoch, " at step ", first_step, ": it has ", steps_, " steps");
  stop_workers();
  for (const auto& slot : slots_)
    RDDP_ASSERT(slot->state != Slot::State::leased);  // every batch handed back first
  epoch_indices_ = sampler_.indices(epoch);
  epoch_ = epoch;
  next_to_fill_ = next_to_deliver_ = first_step;
  stopping_ = false;
  failure_ = nullptr;
  // Step k always lives in slot k % slots: each slot waits for the first step it will hold.
  const size_t slot_count = slots_.size();
  for (size_t i = 0; i < slot_count; ++i) {
    slots_[i]->state = Slot::State::free;
    slots_[i]->step = first_step + (i + slot_count - first_step % slot_count) % slot_count;
  }
  const size_t threads = std::min(size_t(options_.workers), steps_ - first_step);
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back(&Loader::worker_loop, this);
}

void Loader::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_ && !failure_ && next_to_fill_ < steps_) {
    const size_t step = next_to_fill_++;
    Slot& slot = *slots_[step % slots_.size()];
    changed_.wait(lock, [&] {
      return stopping_ || failure_ || (slot.state == Slot::State::free && slot.step == step);
    });
    if (stopping_ || failure_) return;
    slot.state = Slot::State::filling;
    lock.unlock();
    std::exception_ptr error;
    try {
      fill(slot, step);
    } catch (const Error&) {
      error = std::current_exception();
    } catch (const std::exception& e) {
      error = std::make_exception_ptr(Error("loading batch " + std::to_string(step) + ": " + e.what()));
    } catch (...) {
      error = std::make_exception_ptr(Error("loading batch " + std::to_string(step) + " failed"));
    }
    lock.lock();
    if (error) {
      if (!failure_) failure_ = error;
    } else {
      slot.state = Slot::State::ready;
    }
    changed_.notify_all();
  }
}

void Loader::fill(Slot& slot, size_t step) {
  const Transform& transform = options_.transform;
  const int size = transform.size, channels = dataset_->channels();
  const size_t image_bytes = size_t(size) * size * channels;
  const size_t begin = step * options_.batch_size;
  const size_t count = std::min(options_.batch_size, epoch_indices_.size() - begin);
  for (size_t i = 0; i < count; ++i) {
    const int64_t index = epoch_indices_[begin + i];
    Sample sample;
    Image out;
    if (transform.kind == Transform::Kind::random_resized_crop_flip) {
      // The crop is chosen from the image's size alone, so a data set may decode only it.
      std::optional<ResizedCropDraw> draw;
      sample = dataset_->get_crop(size_t(index), [&](int height, int width) {
        draw.emplace(transform, height, width, options_.seed, epoch_, uint64_t(index));
        return draw->box();
      });
      out = draw->finish(sample.image);
    } else {
      sample = dataset_->get(size_t(index));
      try {
        out = apply_transform(transform, sample.image, options_.seed, epoch_, uint64_t(index));
      } catch (const Error& e) {
        fail(dataset_->source(size_t(index)), ": ", e.what());
      }
    }
    RDDP_ASSERT(out.height == size && out.width == size && out.channels == channels);
    std::memcpy(slot.pixels + i * image_bytes, out.pixels.data(), image_bytes);
    slot.labels[i] = sample.label;
    slot.indices[i] = index;
  }
  if (slot.input)
    normalize_to_nchw(slot.pixels, count, size, size, channels, options_.normalization, slot.input);
  Batch& batch = slot.batch;
  batch.step = step;
  batch.count = count;
  batch.height = batch.width = size;
  batch.channels = channels;
  batch.pixels = slot.pixels;
  batch.input = slot.input;
  batch.labels = slot.labels;
  batch.indices = slot.indices.data();
}

Loader::Lease Loader::next() {
  RDDP_ASSERT(!stopping_);  // start_epoch comes first
  if (next_to_deliver_ >= steps_) return Lease();
  const auto start = std::chrono::steady_clock::now();
  const size_t step = next_to_deliver_;
  const size_t index = step % slots_.size();
  Slot& slot = *slots_[index];
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] {
      return failure_ || (slot.state == Slot::State::ready && slot.step == step);
    });
    if (failure_) std::rethrow_exception(failure_);
    slot.state = Slot::State::leased;
    ++next_to_deliver_;
  }
  slot.batch.wait_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  total_wait_seconds_ += slot.batch.wait_seconds;
  return Lease(this, index, slot.batch);
}

void Loader::release(size_t slot_index) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Slot& slot = *slots_[slot_index];
    slot.state = Slot::State::free;
    slot.step += slots_.size();
  }
  changed_.notify_all();
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
