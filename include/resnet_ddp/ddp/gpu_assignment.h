#pragma once
// Makes a rank's GPU current and checks the assignment before anything is allocated on it.
#include <string>

namespace rddp::ddp {

class DistributedContext;

// Makes `device` current (cudaSetDevice) and checks, over every rank: that it is not a MIG
// instance in a job of several ranks (check_not_mig), and that no two ranks of a node took the
// same GPU, by PCI bus id, which tells physical GPUs apart however CUDA_VISIBLE_DEVICES
// numbers them (check_distinct_gpus). Collective; every rank learns the outcome, so each
// throws AllRanksError: the rank with the problem says what it is and the fix, the others
// name that rank. Returns the device's name for the settings table.
std::string check_one_rank_per_gpu(const DistributedContext& context, int device);

}  // namespace rddp::ddp
