// A loader whose worker is stuck in a read that never returns (a hung network mount): next()
// gives up at the stall limit, or when its caller asks, naming the file; the destructor leaves
// the worker behind instead of waiting for it.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "resnet_ddp/data/host_allocator.h"
#include "resnet_ddp/data/loader.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/error.h"
#include "support/finishes_within.h"
#include "support/wrapped_dataset.h"

using namespace rddp;
using namespace rddp::data;

namespace {

using Clock = std::chrono::steady_clock;

// Sample `stuck` blocks in get() until release(), as a read of a file on an unanswering
// server would; `delay` slows every other sample down.
class HangingDataset final : public testing::WrappedDataset {
 public:
  HangingDataset(size_t stuck, std::chrono::milliseconds delay = {})
      : WrappedDataset(make_synthetic(spec()).train), stuck_(stuck), delay_(delay) {}
  static SyntheticSpec spec() {
    SyntheticSpec spec;
    spec.train_count = 32;
    spec.height = spec.width = 8;
    return spec;
  }
  Sample get(size_t index) const override {
    if (index == stuck_) {
      std::unique_lock<std::mutex> lock(mutex_);
      ++entered_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return released_; });
      ++left_;
      changed_.notify_all();
    } else {
      std::this_thread::sleep_for(delay_);
    }
    return base_->get(index);
  }
  std::string source(size_t index) const override {
    return "/mnt/hung/image-" + std::to_string(index) + ".jpg";
  }
  std::string description() const override { return "hanging"; }

  void wait_until_stuck() const {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return entered_ > 0; });
  }
  // Lets the stuck read return, and waits until it has.
  void release() const {
    std::unique_lock<std::mutex> lock(mutex_);
    released_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return left_ == entered_; });
  }

 private:
  size_t stuck_;
  std::chrono::milliseconds delay_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  mutable bool released_ = false;
  mutable int entered_ = 0, left_ = 0;
};

LoaderOptions options(int workers) {
  LoaderOptions options;
  options.batch_size = 4;
  options.workers = workers;
  options.transform.kind = Transform::Kind::center;
  options.transform.size = 8;
  options.make_float = false;
  return options;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a batch that never comes ends next() at the stall limit, naming the file") {
  auto dataset = std::make_shared<HangingDataset>(5);  // in batch 1
  LoaderOptions settings = options(2);
  settings.stall_limit_seconds = 0.5;
  std::string message;
  double waited = 0;
  testing::finishes_within(30, "next() with a worker stuck in a read", [&] {
    Loader loader(dataset, DistributedSampler(32, 1, 0, false), settings, make_plain_allocator());
    loader.start_epoch(0);
    CHECK(loader.next()->step == 0);
    const auto start = Clock::now();
    try {
      loader.next();
    } catch (const Error& e) {
      message = e.what();
    }
    waited = seconds_since(start);
  });
  dataset->release();
  CHECK(waited >= 0.5);
  CHECK(waited < 5);
  CHECK(contains(message, "no batch for 0."));
  CHECK(contains(message, " s (batch 1 of the epoch): loader thread"));
  CHECK(contains(message, "has been reading /mnt/hung/image-5.jpg for"));
  CHECK(contains(message, "check that its mount answers"));
}

TEST_CASE("next(stop) gives up once stop() asks and no batch comes within the grace") {
  auto dataset = std::make_shared<HangingDataset>(0);
  LoaderOptions settings = options(1);
  settings.stop_grace_seconds = 0.3;
  std::atomic<bool> asked{false};
  std::string message;
  double waited = 0;
  testing::finishes_within(30, "next(stop) with a worker stuck in a read", [&] {
    Loader loader(dataset, DistributedSampler(32, 1, 0, false), settings, make_plain_allocator());
    loader.start_epoch(0);
    std::thread asker([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      asked = true;  // as a SIGTERM sets the preemption flag
    });
    const auto start = Clock::now();
    try {
      loader.next([&] { return asked.load(); });
    } catch (const DataWaitInterrupted& e) {
      message = e.what();
    }
    waited = seconds_since(start);
    asker.join();
  });
  dataset->release();
  CHECK(waited >= 0.6);
  CHECK(waited < 5);
  CHECK(contains(message, "stopped waiting for batch 0 of the epoch after"));
  CHECK(contains(message, "loader thread 0 has been reading /mnt/hung/image-0.jpg"));
}

TEST_CASE("a stop asked while batches flow still delivers each batch on its way") {
  auto dataset = std::make_shared<HangingDataset>(size_t(-1), std::chrono::milliseconds(20));
  LoaderOptions settings = options(1);
  settings.stop_grace_seconds = 5;
  Loader loader(dataset, DistributedSampler(32, 1, 0, false), settings, make_plain_allocator());
  loader.start_epoch(0);
  size_t batches = 0;
  while (Loader::Lease lease = loader.next([] { return true; })) ++batches;
  CHECK(batches == 8);
}

TEST_CASE("the loader's destructor leaves a worker stuck in a read behind") {
  auto dataset = std::make_shared<HangingDataset>(2);
  double took = 0;
  testing::finishes_within(30, "destroying a loader whose worker is stuck", [&] {
    auto loader = std::make_unique<Loader>(dataset, DistributedSampler(32, 1, 0, false),
                                           options(2), make_plain_allocator());
    loader->start_epoch(0);
    dataset->wait_until_stuck();
    const auto start = Clock::now();
    loader.reset();
    took = seconds_since(start);
  });
  CHECK(took < 5);
  // The read returns after all: the worker left behind finds its memory still there, and ends.
  dataset->release();
}

TEST_CASE("a new epoch is refused while a worker of the last one is stuck") {
  auto dataset = std::make_shared<HangingDataset>(1);
  LoaderOptions settings = options(1);
  settings.stall_limit_seconds = 0.3;
  testing::finishes_within(30, "starting an epoch with a worker stuck", [&] {
    Loader loader(dataset, DistributedSampler(32, 1, 0, false), settings, make_plain_allocator());
    loader.start_epoch(0);
    CHECK_THROWS_WITH_AS(loader.next(), doctest::Contains("/mnt/hung/image-1.jpg"), Error);
    CHECK_THROWS_WITH_AS(loader.start_epoch(1),
                         doctest::Contains("did not stop within 0.3 s: loader thread 0 has been "
                                           "reading /mnt/hung/image-1.jpg"),
                         Error);
    CHECK_THROWS_WITH_AS(loader.start_epoch(1), doctest::Contains("still stuck in a read"), Error);
  });
  dataset->release();
}
