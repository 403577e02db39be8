// torch/utils/data/distributed.py, DistributedSampler.__init__ and __iter__.
#include "resnet_ddp/data/sampler.h"

#include "resnet_ddp/error.h"

namespace rddp::data {

DistributedSampler::DistributedSampler(size_t dataset_size, int world_size, int rank,
                                       bool shuffle, uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size), world_size_(world_size), rank_(rank), shuffle_(shuffle),
      seed_(seed), drop_last_(drop_last) {
  if (world_size < 1) fail("the world size must be at least 1, not ", world_size);
  if (rank < 0 || rank >= world_size)
    fail("rank ", rank, " is out of range for a world of ", world_size, " ranks");
  const size_t world = size_t(world_size);
  if (dataset_size < world)
    fail("the data set has ", dataset_size, " samples for ", world_size, " ranks: every rank "
         "needs at least one sample of its own. Use fewer ranks or more data (or a larger "
         "limit on the samples used)");
  // ceil((N - W) / W) with drop_last and a remainder, which is floor(N / W) for N > W.
  num_samples_ = drop_last && dataset_size % world != 0 ? dataset_size / world
                                                        : (dataset_size + world - 1) / world;
}

std::vector<int64_t> DistributedSampler::indices(uint64_t epoch) const {
  std::vector<int64_t> order;
  if (shuffle_) {
    order = torch_randperm(int64_t(dataset_size_), seed_ + epoch);
  } else {
    order.resize(dataset_size_);
    for (size_t i = 0; i < dataset_size_; ++i) order[i] = int64_t(i);
  }
  // Padding repeats the list from its start, as often as needed; drop_last cuts the tail.
  // Either way position p of the padded or cut list is order[p % N].
  std::vector<int64_t> mine;
  mine.reserve(num_samples_);
  for (size_t position = size_t(rank_); position < total_size(); position += size_t(world_size_))
    mine.push_back(order[position % dataset_size_]);
  return mine;
}

size_t steps_per_epoch(size_t samples_per_rank, size_t batch_size, bool drop_last_batch) {
  if (batch_size == 0) fail("the batch size must be at least 1");
  return drop_last_batch ? samples_per_rank / batch_size
                         : (samples_per_rank + batch_size - 1) / batch_size;
}

}  // namespace rddp::data
