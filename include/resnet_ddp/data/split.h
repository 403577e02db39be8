#pragma once
// Views of part of a data set: a validation split carved from a training set, and a limit on
// the number of samples for quick runs.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "resnet_ddp/data/dataset.h"

namespace rddp::data {

// The samples of `base` at `indices`, in that order.
DatasetPtr make_subset(DatasetPtr base, std::vector<int64_t> indices, std::string description);

// Holds out k = floor(fraction * N) samples for validation: with the permutation
// p = torch.randperm(N, generator=torch.Generator().manual_seed(seed)), validation is
// Subset(base, p[:k]) and training is Subset(base, p[k:]), both in permutation order, so
// PyTorch users can rebuild the same split. Throws Error when either part would be empty.
Splits split_for_validation(DatasetPtr base, double fraction, uint64_t seed);

// The first `limit` samples of `base` (all of them where it has no more).
DatasetPtr take_first(DatasetPtr base, size_t limit);

}  // namespace rddp::data
