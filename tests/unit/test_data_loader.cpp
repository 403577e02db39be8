#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "resnet_ddp/data/host_allocator.h"
#include "resnet_ddp/data/loader.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/data/worker_count.h"
#include "resnet_ddp/error.h"
#include "support/wrapped_dataset.h"

using namespace rddp;
using namespace rddp::data;
namespace fs = std::filesystem;

namespace {

struct Copy {
  size_t step, count;
  std::vector<uint8_t> pixels;
  std::vector<float> input;
  std::vector<int32_t> labels;
  std::vector<int64_t> indices;
};

std::vector<Copy> read_epoch(Loader& loader, uint64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<Copy> batches;
  while (Loader::Lease lease = loader.next()) {
    const Batch& b = *lease;
    const size_t image = size_t(b.height) * b.width * b.channels;
    Copy copy{b.step, b.count, {b.pixels, b.pixels + b.count * image}, {}, {b.labels, b.labels + b.count},
              {b.indices, b.indices + b.count}};
    if (b.input) copy.input.assign(b.input, b.input + b.count * image);
    batches.push_back(std::move(copy));
  }
  return batches;
}

DatasetPtr synthetic(size_t count) {
  SyntheticSpec spec;
  spec.train_count = count;
  spec.height = 12;
  spec.width = 10;
  return make_synthetic(spec).train;
}

LoaderOptions crop_flip_options(int workers, size_t batch = 8) {
  LoaderOptions options;
  options.batch_size = batch;
  options.workers = workers;
  options.transform.kind = Transform::Kind::random_crop_flip;
  options.transform.size = 10;
  options.transform.padding = 2;
  options.seed = 3;
  options.normalization = normalization_preset("cifar10", 3);
  return options;
}

// Throws on one sample, as a reader does on a bad file.
class FailingDataset final : public testing::WrappedDataset {
 public:
  FailingDataset(DatasetPtr base, size_t bad, bool rddp_error)
      : WrappedDataset(std::move(base)), bad_(bad), rddp_error_(rddp_error) {}
  Sample get(size_t index) const override {
    if (index == bad_) {
      if (rddp_error_) fail("cannot decode image /data/broken.jpg: bad Huffman code");
      throw std::runtime_error("something unexpected");
    }
    return base_->get(index);
  }
  std::string description() const override { return "failing"; }

 private:
  size_t bad_;
  bool rddp_error_;
};

// Slow reads, so that the consumer has to wait.
class SlowDataset final : public testing::WrappedDataset {
 public:
  explicit SlowDataset(DatasetPtr base) : WrappedDataset(std::move(base)) {}
  Sample get(size_t index) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    return base_->get(index);
  }
  std::string description() const override { return "slow"; }
};

}  // namespace

TEST_CASE("batches are the sampler's samples, transformed and normalised, in order") {
  const DatasetPtr dataset = synthetic(103);
  DistributedSampler sampler(103, 2, 1, true, 5);
  Loader loader(dataset, sampler, crop_flip_options(2), make_plain_allocator());
  CHECK(loader.steps_per_epoch() == 7);  // ceil(52 / 8)
  const std::vector<Copy> batches = read_epoch(loader, 4);
  REQUIRE(batches.size() == 7);
  const std::vector<int64_t> expected = sampler.indices(4);
  const Normalization cifar = normalization_preset("cifar10", 3);
  size_t position = 0;
  for (size_t s = 0; s < batches.size(); ++s) {
    const Copy& b = batches[s];
    CHECK(b.step == s);
    CHECK(b.count == (s < 6 ? 8u : 4u));
    for (size_t i = 0; i < b.count; ++i, ++position) {
      REQUIRE(b.indices[i] == expected[position]);
      const Sample sample = dataset->get(size_t(b.indices[i]));
      CHECK(b.labels[i] == sample.label);
      const Image image = apply_transform(loader.options().transform, sample.image, 3, 4, uint64_t(b.indices[i]));
      CHECK(std::equal(image.pixels.begin(), image.pixels.end(), b.pixels.begin() + long(i * 300)));
    }
    std::vector<float> input(b.count * 300);
    normalize_to_nchw(b.pixels.data(), b.count, 10, 10, 3, cifar, input.data());
    CHECK(input == b.input);
  }
  CHECK(position == 52);
}

TEST_CASE("the batches do not depend on the number of workers") {
  const DatasetPtr dataset = synthetic(200);
  DistributedSampler sampler(200, 3, 0, true, 1);
  std::vector<std::vector<Copy>> runs;
  for (int workers : {1, 2, 3}) {
    LoaderOptions options = crop_flip_options(workers, 7);
    options.batches_per_worker = workers == 3 ? 1 : 2;
    Loader loader(dataset, sampler, options, make_plain_allocator());
    runs.push_back(read_epoch(loader, 2));
  }
  REQUIRE(runs[0].size() == 10);  // ceil(67 / 7)
  for (size_t r = 1; r < runs.size(); ++r) {
    REQUIRE(runs[r].size() == runs[0].size());
    for (size_t s = 0; s < runs[0].size(); ++s) {
      CHECK(runs[r][s].pixels == runs[0][s].pixels);
      CHECK(runs[r][s].labels == runs[0][s].labels);
      CHECK(runs[r][s].indices == runs[0][s].indices);
    }
  }
}

TEST_CASE("an epoch started at a later step gives the same batches from there on") {
  const DatasetPtr dataset = synthetic(90);
  DistributedSampler sampler(90, 1, 0, true, 3);
  for (int workers : {1, 2, 3}) {
    CAPTURE(workers);
    Loader loader(dataset, sampler, crop_flip_options(workers, 8), make_plain_allocator());
    const std::vector<Copy> whole = read_epoch(loader, 4);
    REQUIRE(whole.size() == 12);
    for (size_t first : {size_t(1), size_t(5), size_t(11), size_t(12)}) {
      CAPTURE(first);
      loader.start_epoch(4, first);
      size_t step = first;
      while (Loader::Lease lease = loader.next()) {
        REQUIRE(step < whole.size());
        CHECK(lease->step == step);
        CHECK(std::vector<int64_t>(lease->indices, lease->indices + lease->count) == whole[step].indices);
        CHECK(std::equal(lease->pixels, lease->pixels + whole[step].pixels.size(), whole[step].pixels.begin()));
        ++step;
      }
      CHECK(step == whole.size());
    }
    CHECK_THROWS_AS(loader.start_epoch(4, 13), Error);
  }
}

TEST_CASE("epochs, drop_last, held batches and restarting an epoch") {
  const DatasetPtr dataset = synthetic(50);
  LoaderOptions options = crop_flip_options(2, 8);
  options.drop_last = true;
  options.make_float = false;
  Loader loader(dataset, DistributedSampler(50, 1, 0, true, 0), options, make_plain_allocator());
  CHECK(loader.steps_per_epoch() == 6);
  const std::vector<Copy> first = read_epoch(loader, 0);
  CHECK(first.size() == 6);
  CHECK(first.back().count == 8);
  CHECK(first[0].input.empty());
  CHECK(read_epoch(loader, 1)[0].indices != first[0].indices);
  CHECK(read_epoch(loader, 0)[0].pixels == first[0].pixels);

  // Two batches held at once (the ring has four slots), handed back out of order.
  loader.start_epoch(0);
  {
    Loader::Lease a = loader.next();
    Loader::Lease b = loader.next();
    CHECK(a->step == 0);
    CHECK(b->step == 1);
    CHECK(std::equal(a->pixels, a->pixels + 8 * 300, first[0].pixels.begin()));
    Loader::Lease moved = std::move(b);
    CHECK_FALSE(b);
    CHECK(moved->step == 1);
  }
  CHECK(loader.next()->step == 2);
  // Leaving an epoch half read and starting another is fine, once its batches are handed back.
  loader.start_epoch(1);
  int64_t first_index = -1;
  {
    Loader::Lease held = loader.next();
    first_index = held->indices[0];
    CHECK_THROWS_AS(loader.start_epoch(2), Error);
  }
  CHECK(first_index == read_epoch(loader, 1)[0].indices[0]);
}

TEST_CASE("a worker's failure reaches the consumer as an Error naming the file") {
  const DatasetPtr dataset = synthetic(64);
  for (int workers : {1, 2}) {
    CAPTURE(workers);
    for (bool rddp_error : {true, false}) {
      DistributedSampler sampler(64, 1, 0, false);
      Loader loader(std::make_shared<FailingDataset>(dataset, 37, rddp_error), sampler,
                    crop_flip_options(workers), make_plain_allocator());
      loader.start_epoch(0);
      size_t delivered = 0;
      auto drain = [&] {
        while (Loader::Lease lease = loader.next()) ++delivered;
      };
      if (rddp_error)
        CHECK_THROWS_WITH_AS(drain(), doctest::Contains("/data/broken.jpg"), Error);
      else
        CHECK_THROWS_WITH_AS(drain(), doctest::Contains("something unexpected"), Error);
      CHECK(delivered <= 4);  // sample 37 is in batch 4
      // Asking again gives the same error rather than a hang.
      CHECK_THROWS_AS(loader.next(), Error);
    }  // the destructor joins the workers
  }
  // An image too small for its crop names the sample.
  LoaderOptions options = crop_flip_options(1);
  options.transform.size = 20;
  Loader loader(dataset, DistributedSampler(64, 1, 0), options, make_plain_allocator());
  loader.start_epoch(0);
  CHECK_THROWS_WITH_AS(loader.next(), doctest::Contains("synthetic train sample"), Error);
}

TEST_CASE("the consumer's wait for data is measured") {
  const DatasetPtr dataset = std::make_shared<SlowDataset>(synthetic(16));
  Loader loader(dataset, DistributedSampler(16, 1, 0), crop_flip_options(1, 4), make_plain_allocator());
  loader.start_epoch(0);
  double sum = 0;
  while (Loader::Lease lease = loader.next()) {
    CHECK(lease->wait_seconds >= 0);
    sum += lease->wait_seconds;
  }
  CHECK(sum == doctest::Approx(loader.total_wait_seconds()));
  CHECK(sum > 0.005);  // the first batch alone takes 4 x 3 ms to read
}

TEST_CASE("host allocators give writable aligned memory; pinned falls back without a device") {
  for (const auto& allocator : {make_plain_allocator(), make_pinned_allocator()}) {
    CAPTURE(allocator->description());
    void* memory = allocator->allocate(1 << 20);
    REQUIRE(memory != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(memory) % 64 == 0);
    std::memset(memory, 0xab, 1 << 20);
    allocator->deallocate(memory);
  }
  const std::string pinned = make_pinned_allocator()->description();
  CHECK((pinned.rfind("pinned", 0) == 0 || pinned.rfind("plain (no pinned memory: ", 0) == 0));
}

TEST_CASE("worker counts: explicit, then Slurm's CPUs per task, then the affinity mask") {
  const char* saved = std::getenv("SLURM_CPUS_PER_TASK");
  const std::string saved_value = saved ? saved : "";
  CHECK(resolve_worker_count(5).count == 5);
  CHECK_THROWS_AS(resolve_worker_count(-1), Error);
  setenv("SLURM_CPUS_PER_TASK", "6", 1);
  CHECK(resolve_worker_count(0).count == 5);
  CHECK(resolve_worker_count(0).source.find("SLURM_CPUS_PER_TASK=6") != std::string::npos);
  setenv("SLURM_CPUS_PER_TASK", "1", 1);
  CHECK(resolve_worker_count(0).count == 1);
  setenv("SLURM_CPUS_PER_TASK", "500", 1);
  CHECK(resolve_worker_count(0).count == kMaxDefaultWorkers);
  unsetenv("SLURM_CPUS_PER_TASK");
  const int cpus = affinity_cpu_count();
  CHECK(resolve_worker_count(0).count == std::max(1, std::min(cpus - 1, kMaxDefaultWorkers)));
  if (saved) setenv("SLURM_CPUS_PER_TASK", saved_value.c_str(), 1);
}
