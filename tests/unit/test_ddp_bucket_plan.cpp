// Gradient buckets: PyTorch DDP's assignment by size over the layout's backward order.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "resnet_ddp/ddp/bucket_plan.h"
#include "resnet_ddp/error.h"

using namespace rddp;
using namespace rddp::ddp;

namespace {

ParamLayout resnet18_layout(int classes) {
  ModelSpec spec;
  spec.num_classes = classes;
  return ParamLayout(describe(spec));
}

std::vector<size_t> tensors_per_bucket(const BucketPlan& plan) {
  std::vector<size_t> counts;
  for (const Bucket& bucket : plan.buckets) counts.push_back(bucket.tensors.size());
  return counts;
}

// What holds for every plan: contiguous slices in order that tile the gradient buffer, every
// parameter in exactly one bucket in layout order, and each bucket closed by the tensor that
// reached its limit.
void check_plan_structure(const ParamLayout& layout, const BucketPlan& plan, size_t first_limit, size_t limit) {
  REQUIRE(!plan.buckets.empty());
  const auto& tensors = layout.tensors();
  size_t expected_begin = 0, next_parameter = 0;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const Bucket& bucket = plan.buckets[b];
    CAPTURE(b);
    CHECK(bucket.begin == expected_begin);
    size_t bytes = 0;
    for (size_t index : bucket.tensors) {
      while (tensors[next_parameter].role != TensorRole::parameter) ++next_parameter;
      CHECK(index == next_parameter++);
      CHECK(tensors[index].offset >= bucket.begin);
      CHECK(tensors[index].offset + tensors[index].numel <= bucket.end);
      bytes += tensors[index].numel * 4;
    }
    CHECK(bucket.bytes == bytes);
    const size_t cap = b == 0 ? first_limit : limit;
    if (b + 1 < plan.buckets.size()) {
      CHECK(bucket.bytes >= cap);
      CHECK(bucket.bytes - tensors[bucket.tensors.back()].numel * 4 < cap);
    }
    expected_begin = bucket.end;
  }
  CHECK(expected_begin == layout.parameter_elements());
  size_t parameters = 0;
  for (const TensorInfo& info : tensors) parameters += info.role == TensorRole::parameter;
  CHECK(next_parameter == parameters);
}

}  // namespace

TEST_CASE("buckets of torchvision's ResNet-18 match PyTorch's assignment of the same tensors") {
  // Expected counts from torch 1.13: torch.distributed._compute_bucket_assignment_by_size over
  // the parameters of torchvision.models.resnet18(num_classes=...) taken in ParamLayout's
  // order (fc, then blocks from last to first, bn2/conv2/bn1/conv1 then downsample, then the
  // stem), with limits [first MiB, then MiB].
  struct Case {
    int classes;
    double first_mb, mb;
    std::vector<size_t> counts;
  };
  const std::vector<Case> cases = {
      {1000, 1, 25, {1, 10, 51}},
      {10, 1, 25, {5, 15, 42}},
      {1000, 0.5, 2, {1, 4, 3, 3, 3, 6, 3, 3, 12, 24}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.classes);
    CAPTURE(c.mb);
    const ParamLayout layout = resnet18_layout(c.classes);
    const BucketPlan plan = plan_buckets(layout, c.first_mb, c.mb);
    CHECK(tensors_per_bucket(plan) == c.counts);
    check_plan_structure(layout, plan, static_cast<size_t>(c.first_mb * 1048576),
                         static_cast<size_t>(c.mb * 1048576));
  }
}

TEST_CASE("bucket slices include the alignment padding and tile a narrow model's buffer") {
  ModelSpec spec;
  spec.stem = Stem::cifar;
  spec.num_classes = 5;
  spec.widths = {4, 8, 8, 8};
  const ParamLayout layout(describe(spec));
  for (double mb : {1e-6, 0.002, 0.01, 25.0}) {
    CAPTURE(mb);
    const BucketPlan plan = plan_buckets(layout, mb / 2, mb);
    check_plan_structure(layout, plan, std::max<size_t>(1, static_cast<size_t>(mb / 2 * 1048576)),
                         std::max<size_t>(1, static_cast<size_t>(mb * 1048576)));
  }
  // A limit below every tensor's size gives one bucket per parameter.
  const BucketPlan tiny = plan_buckets(layout, 1e-6, 1e-6);
  size_t parameters = 0;
  for (const TensorInfo& info : layout.tensors()) parameters += info.role == TensorRole::parameter;
  CHECK(tiny.buckets.size() == parameters);
  // fc.bias (5 values) is padded to 64: its bucket reaches the next tensor's offset.
  CHECK(tiny.buckets[1].end - tiny.buckets[1].begin == ParamLayout::kAlignElements);
  // A limit above the whole model: the small first bucket, then everything else.
  const BucketPlan whole = plan_buckets(layout, 1e-3, 100);
  CHECK(whole.buckets.size() == 2);
}

TEST_CASE("bucket sizes that are not positive are refused naming the flag") {
  const ParamLayout layout = resnet18_layout(10);
  for (double bad : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(plan_buckets(layout, 1, bad), doctest::Contains("--bucket-mb"), Error);
  }
  CHECK_THROWS_WITH_AS(plan_buckets(layout, 0, 25), doctest::Contains("first gradient bucket"), Error);
}

TEST_CASE("the bucket plan is described with its count, limits and sizes") {
  const BucketPlan plan = plan_buckets(resnet18_layout(1000), 1, 25);
  const std::string text = describe(plan);
  CHECK(text.rfind("3 buckets (first capped at 1 MiB, then 25 MiB): ", 0) == 0);
  // fc.weight alone: 512000 floats = 1.953125 MiB.
  CHECK(text.find(": 1.95, ") != std::string::npos);
  CHECK(text.substr(text.size() - 4) == " MiB");
}
