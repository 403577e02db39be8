// Bucket assignment by size, as torch.distributed's compute_bucket_assignment_by_size.
#include "resnet_ddp/ddp/bucket_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "resnet_ddp/error.h"

namespace rddp::ddp {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

size_t limit_bytes(double mb, const char* what) {
  if (!std::isfinite(mb) || mb <= 0 || mb * kMiB > 1e15)
    fail(what, " must be a positive number of MiB (e.g. --bucket-mb 25), got ", mb);
  // PyTorch takes int(bucket_cap_mb * 1024 * 1024); at least one byte, so that a tiny limit
  // means one tensor a bucket.
  return std::max<size_t>(1, static_cast<size_t>(mb * kMiB));
}

}  // namespace

BucketPlan plan_buckets(const ParamLayout& layout, double first_bucket_mb, double bucket_mb) {
  BucketPlan plan;
  plan.first_bucket_mb = first_bucket_mb;
  plan.bucket_mb = bucket_mb;
  const size_t first_limit = limit_bytes(first_bucket_mb, "the first gradient bucket's size");
  const size_t limit = limit_bytes(bucket_mb, "--bucket-mb");

  const auto& tensors = layout.tensors();
  Bucket current;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].role != TensorRole::parameter) continue;
    current.tensors.push_back(i);
    current.bytes += tensors[i].numel * sizeof(float);
    if (current.bytes >= (plan.buckets.empty() ? first_limit : limit)) {
      plan.buckets.push_back(std::move(current));
      current = Bucket{};
    }
  }
  if (!current.tensors.empty()) plan.buckets.push_back(std::move(current));

  // Each bucket reaches to where the next one starts, so the padding after its last tensor is
  // in it, and the last reaches the buffer's end: the buckets tile the buffer.
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    Bucket& bucket = plan.buckets[b];
    bucket.begin = tensors[bucket.tensors.front()].offset;
    bucket.end = b + 1 < plan.buckets.size() ? tensors[plan.buckets[b + 1].tensors.front()].offset
                                             : layout.parameter_elements();
    RDDP_ASSERT(b == 0 ? bucket.begin == 0 : bucket.begin == plan.buckets[b - 1].end);
    RDDP_ASSERT(bucket.end >= tensors[bucket.tensors.back()].offset + tensors[bucket.tensors.back()].numel);
  }
  return plan;
}

std::string describe(const BucketPlan& plan) {
  std::string text = std::to_string(plan.buckets.size()) +
                     (plan.buckets.size() == 1 ? " bucket" : " buckets");
  char limits[96];
  std::snprintf(limits, sizeof limits, " (first capped at %g MiB, then %g MiB):", plan.first_bucket_mb,
                plan.bucket_mb);
  text += limits;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    char size[32];
    std::snprintf(size, sizeof size, "%s %.3g", b == 0 ? "" : ",", plan.buckets[b].bytes / kMiB);
    text += size;
  }
  return text + " MiB";
}

}  // namespace rddp::ddp
