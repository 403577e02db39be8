#pragma once
// Gradient buckets as PyTorch DDP forms them: walking the parameters in the order backward
// produces their gradients, a bucket closes as soon as it holds at least its size limit (the
// tensor that crosses the limit stays in it); the first bucket's limit is small (1 MiB) so that
// communication starts early in backward, the others' is --bucket-mb (25 MiB). Sizes count the
// tensors' own bytes, as PyTorch does. Because ParamLayout stores gradients in that same order,
// a bucket is one contiguous slice of the gradient buffer, its alignment padding included
// (padding stays zero), and the buckets tile the whole buffer.
#include <cstddef>
#include <string>
#include <vector>

#include "resnet_ddp/param_layout.h"

namespace rddp::ddp {

struct Bucket {
  size_t begin = 0, end = 0;            // elements of the flat gradient buffer, [begin, end)
  std::vector<size_t> tensors;          // indices into ParamLayout::tensors(), in order
  size_t bytes = 0;                     // the tensors' own bytes, without padding
};

struct BucketPlan {
  double first_bucket_mb = 1.0, bucket_mb = 25.0;
  std::vector<Bucket> buckets;
};

// Throws Error naming --bucket-mb when a limit is not a positive finite number of MiB.
BucketPlan plan_buckets(const ParamLayout& layout, double first_bucket_mb, double bucket_mb);

// For the settings table: "3 buckets (first capped at 1 MiB, then 25 MiB): 1.95, 27.0,
// 15.6 MiB".
std::string describe(const BucketPlan& plan);

}  // namespace rddp::ddp
