#pragma once
// torch.utils.data.distributed.DistributedSampler, index for index: the same (N, world size,
// seed, epoch, drop_last) gives every rank exactly the indices PyTorch gives it.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rddp::data {

// torch.randperm(n, generator=torch.Generator().manual_seed(seed)) on the CPU. PyTorch's CPU
// generator is the standard 32-bit MT19937 seeded with the low 32 bits of the seed, and
// randperm is a Fisher-Yates shuffle drawing one 32-bit output per position. Every PyTorch
// version agrees below n = 2^32/20 (214,748,364); above it we follow PyTorch 2.6 and later,
// which switched to an inside-out shuffle on 64-bit draws (earlier versions keep the 32-bit
// draws, whose remainders modulo so large an n are biased).
std::vector<int64_t> torch_randperm(int64_t n, uint64_t seed);

class DistributedSampler {
 public:
  // Throws Error when there are fewer samples than ranks: some rank would get none (with
  // drop_last) or only copies of other ranks' samples.
  DistributedSampler(size_t dataset_size, int world_size, int rank, bool shuffle = true,
                     uint64_t seed = 0, bool drop_last = false);

  // Samples each rank takes per epoch; the same on every rank.
  size_t num_samples() const { return num_samples_; }
  // Samples all ranks take together: num_samples() * world size.
  size_t total_size() const { return num_samples_ * size_t(world_size_); }
  size_t dataset_size() const { return dataset_size_; }
  int world_size() const { return world_size_; }
  int rank() const { return rank_; }

  // This rank's indices for an epoch. Shuffled with seed + epoch (as set_epoch does), then
  // padded by repeating from the start, or cut to total_size() with drop_last; this rank
  // takes positions rank, rank + W, rank + 2W...
  std::vector<int64_t> indices(uint64_t epoch) const;

 private:
  size_t dataset_size_;
  int world_size_;
  int rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  size_t num_samples_;
};

// Batches per epoch for one rank, as len(DataLoader) gives it. Every rank gets the same
// count, which the distributed layer checks, because a rank with one step more would wait
// forever in its gradient allreduce.
size_t steps_per_epoch(size_t samples_per_rank, size_t batch_size, bool drop_last_batch);

}  // namespace rddp::data
