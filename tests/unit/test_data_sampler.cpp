#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/data/sampler.h"
#include "resnet_ddp/data/split.h"
#include "resnet_ddp/error.h"

using namespace rddp;
using namespace rddp::data;

namespace {

// MT19937 written out from Matsumoto and Nishimura's paper, independent of std::mt19937.
class ReferenceMt19937 {
 public:
  explicit ReferenceMt19937(uint32_t seed) {
    state_[0] = seed;
    for (int i = 1; i < 624; ++i)
      state_[i] = 1812433253u * (state_[i - 1] ^ (state_[i - 1] >> 30)) + uint32_t(i);
  }
  uint32_t operator()() {
    if (index_ == 624) {
      for (int i = 0; i < 624; ++i) {
        const uint32_t y = (state_[i] & 0x80000000u) | (state_[(i + 1) % 624] & 0x7fffffffu);
        state_[i] = state_[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
      }
      index_ = 0;
    }
    uint32_t y = state_[index_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
  }

 private:
  uint32_t state_[624];
  int index_ = 624;
};

// DistributedSampler.__iter__ transcribed list operation by list operation.
std::vector<int64_t> python_sampler(int64_t n, int world, int rank, bool shuffle, uint64_t seed,
                                    bool drop_last) {
  std::vector<int64_t> indices(static_cast<size_t>(n));
  std::iota(indices.begin(), indices.end(), 0);
  if (shuffle) {
    ReferenceMt19937 engine{uint32_t(seed)};
    for (int64_t i = 0; i < n - 1; ++i) std::swap(indices[i], indices[i + engine() % (n - i)]);
  }
  int64_t num_samples = drop_last && n % world ? (n - world + world - 1) / world : (n + world - 1) / world;
  const int64_t total = num_samples * world;
  if (!drop_last) {
    std::vector<int64_t> repeated;
    while (int64_t(repeated.size()) < total - n) repeated.insert(repeated.end(), indices.begin(), indices.end());
    indices.insert(indices.end(), repeated.begin(), repeated.begin() + (total - n));
  } else {
    indices.resize(size_t(total));
  }
  std::vector<int64_t> mine;
  for (int64_t i = rank; i < total; i += world) mine.push_back(indices[size_t(i)]);
  return mine;
}

}  // namespace

TEST_CASE("the reference MT19937 is the standard engine") {
  // The C++ standard fixes the 10000th output of the default-seeded (5489) engine.
  ReferenceMt19937 engine(5489u);
  uint32_t value = 0;
  for (int i = 0; i < 10000; ++i) value = engine();
  CHECK(value == 4123659995u);
}

TEST_CASE("torch_randperm is a permutation drawn as PyTorch's Fisher-Yates does") {
  for (int64_t n : {0, 1, 2, 7, 1000}) {
    for (uint64_t seed : {0ull, 1ull, 42ull, (1ull << 32) + 5}) {
      const std::vector<int64_t> perm = torch_randperm(n, seed);
      std::vector<int64_t> sorted = perm;
      std::sort(sorted.begin(), sorted.end());
      for (int64_t i = 0; i < n; ++i) CHECK(sorted[size_t(i)] == i);
      // Only the low 32 bits of the seed reach the engine, as in at::mt19937.
      CHECK(perm == torch_randperm(n, seed & 0xffffffffu));
      CHECK(perm == python_sampler(n, 1, 0, true, seed, false));
    }
  }
  CHECK(torch_randperm(1000, 1) != torch_randperm(1000, 2));
  CHECK_THROWS_AS(torch_randperm(-1, 0), Error);
}

TEST_CASE("without shuffling, ranks take strided positions and padding wraps to the start") {
  // N = 10, W = 4: ceil(10/4) = 3 each, 12 in all, positions 10 and 11 repeat samples 0, 1.
  const std::vector<std::vector<int64_t>> expected = {{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}};
  for (int rank = 0; rank < 4; ++rank) {
    DistributedSampler sampler(10, 4, rank, false);
    CHECK(sampler.num_samples() == 3);
    CHECK(sampler.total_size() == 12);
    CHECK(sampler.indices(0) == expected[size_t(rank)]);
  }
  // drop_last: ceil((10 - 4) / 4) = 2 each; samples 8 and 9 are left out.
  for (int rank = 0; rank < 4; ++rank) {
    DistributedSampler sampler(10, 4, rank, false, 0, true);
    CHECK(sampler.num_samples() == 2);
    CHECK(sampler.indices(3) == std::vector<int64_t>{rank, rank + 4});
  }
  // A multiple of the world size needs neither.
  CHECK(DistributedSampler(12, 4, 1, false, 0, true).indices(0) == std::vector<int64_t>{1, 5, 9});
}

TEST_CASE("shuffled samplers follow PyTorch's recipe for every rank and epoch") {
  struct Case {
    int64_t n;
    int world;
    uint64_t seed;
    bool drop_last;
  };
  for (const Case& c : {Case{10, 4, 0, false}, Case{10, 4, 0, true}, Case{1000, 3, 7, false},
                        Case{1001, 8, 123, true}, Case{5, 5, 9, false}, Case{50000, 6, 0, false}}) {
    for (uint64_t epoch : {0ull, 1ull, 17ull}) {
      std::multiset<int64_t> seen;
      for (int rank = 0; rank < c.world; ++rank) {
        DistributedSampler sampler(size_t(c.n), c.world, rank, true, c.seed, c.drop_last);
        const std::vector<int64_t> mine = sampler.indices(epoch);
        CHECK(mine == python_sampler(c.n, c.world, rank, true, c.seed + epoch, c.drop_last));
        CHECK(mine.size() == sampler.num_samples());
        seen.insert(mine.begin(), mine.end());
      }
      if (!c.drop_last) {  // every sample at least once, padding repeats fewer than W
        for (int64_t i = 0; i < c.n; ++i) CHECK(seen.count(i) >= 1);
        CHECK(int64_t(seen.size()) - c.n < c.world);
      } else {  // no sample twice
        CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == seen.size());
      }
    }
  }
  DistributedSampler sampler(1000, 2, 0, true, 5);
  CHECK(sampler.indices(0) != sampler.indices(1));
  CHECK(sampler.indices(4) == DistributedSampler(1000, 2, 0, true, 6).indices(3));
}

TEST_CASE("fewer samples than ranks is refused") {
  CHECK_THROWS_WITH_AS(DistributedSampler(3, 4, 0), doctest::Contains("3 samples for 4 ranks"), Error);
  CHECK_THROWS_WITH_AS(DistributedSampler(3, 4, 0, true, 0, true), doctest::Contains("at least one"), Error);
  CHECK_THROWS_AS(DistributedSampler(10, 4, 4), Error);
  CHECK_THROWS_AS(DistributedSampler(10, 0, 0), Error);
  CHECK_NOTHROW(DistributedSampler(4, 4, 3));
}

TEST_CASE("steps per epoch are len(DataLoader)") {
  CHECK(steps_per_epoch(10, 4, false) == 3);
  CHECK(steps_per_epoch(10, 4, true) == 2);
  CHECK(steps_per_epoch(12, 4, true) == 3);
  CHECK(steps_per_epoch(3, 4, true) == 0);
  CHECK_THROWS_AS(steps_per_epoch(3, 0, false), Error);
  // Every rank has the same number of steps, whatever N and W.
  for (size_t n : {97u, 100u, 1001u})
    for (int world : {1, 3, 8}) {
      std::set<size_t> steps;
      for (int rank = 0; rank < world; ++rank)
        steps.insert(steps_per_epoch(DistributedSampler(n, world, rank).num_samples(), 16, false));
      CHECK(steps.size() == 1);
    }
}

TEST_CASE("a validation split holds out the first floor(f N) of a seeded permutation") {
  SyntheticSpec spec;
  spec.train_count = 103;
  const DatasetPtr base = make_synthetic(spec).train;
  const Splits splits = split_for_validation(base, 0.2, 11);
  REQUIRE(splits.val->size() == 20);  // floor(0.2 * 103)
  REQUIRE(splits.train->size() == 83);
  const std::vector<int64_t> order = torch_randperm(103, 11);
  for (size_t i = 0; i < 20; ++i) CHECK(splits.val->get(i).image.pixels == base->get(size_t(order[i])).image.pixels);
  for (size_t i = 0; i < 83; ++i) CHECK(splits.train->source(i) == base->source(size_t(order[20 + i])));
  CHECK_THROWS_AS(split_for_validation(base, 0.001, 0), Error);  // nothing held out
  CHECK_THROWS_AS(split_for_validation(base, 1.0, 0), Error);
  CHECK(take_first(base, 10)->size() == 10);
  CHECK(take_first(base, 1000)->size() == 103);
}

// Not a test of its own: tests/parity/test_sampler_parity.py runs it with a request file
// naming cases and compares what it writes with PyTorch. Request lines:
//   sampler N WORLD SEED EPOCH SHUFFLE DROP_LAST   -> one line of indices per rank
//   randperm N SEED                                -> one line
TEST_CASE("parity export: sampler indices" * doctest::skip()) {
  const char* request_path = std::getenv("RDDP_PARITY_REQUEST");
  const char* reply_path = std::getenv("RDDP_PARITY_REPLY");
  REQUIRE_MESSAGE(request_path, "set RDDP_PARITY_REQUEST and RDDP_PARITY_REPLY");
  REQUIRE(reply_path);
  std::ifstream request(request_path);
  std::ofstream reply(reply_path);
  REQUIRE(request);
  auto write = [&](const std::vector<int64_t>& values) {
    for (size_t i = 0; i < values.size(); ++i) reply << (i ? " " : "") << values[i];
    reply << "\n";
  };
  std::string line;
  while (std::getline(request, line)) {
    std::istringstream fields(line);
    std::string what;
    fields >> what;
    if (what == "sampler") {
      size_t n;
      int world, shuffle, drop_last;
      uint64_t seed, epoch;
      const bool parsed = bool(fields >> n >> world >> seed >> epoch >> shuffle >> drop_last);
      REQUIRE(parsed);
      for (int rank = 0; rank < world; ++rank)
        write(DistributedSampler(n, world, rank, shuffle != 0, seed, drop_last != 0).indices(epoch));
    } else if (what == "randperm") {
      int64_t n;
      uint64_t seed;
      const bool parsed = bool(fields >> n >> seed);
      REQUIRE(parsed);
      write(torch_randperm(n, seed));
    } else {
      FAIL("unknown request: ", line);
    }
  }
  CHECK(reply.good());
}
