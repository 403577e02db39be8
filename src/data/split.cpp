#include "resnet_ddp/data/split.h"

#include <cmath>

#include "resnet_ddp/data/sampler.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

class SubsetDataset final : public Dataset {
 public:
  SubsetDataset(DatasetPtr base, std::vector<int64_t> indices, std::string description)
      : base_(std::move(base)), indices_(std::move(indices)),
        description_(std::move(description)) {
    for (int64_t index : indices_) RDDP_ASSERT(index >= 0 && size_t(index) < base_->size());
  }

  size_t size() const override { return indices_.size(); }
  int num_classes() const override { return base_->num_classes(); }
  int channels() const override { return base_->channels(); }
  int height() const override { return base_->height(); }
  int width() const override { return base_->width(); }
  Sample get(size_t index) const override { return base_->get(size_t(indices_.at(index))); }
  std::string source(size_t index) const override {
    return base_->source(size_t(indices_.at(index)));
  }
  std::string description() const override { return description_; }

 private:
  DatasetPtr base_;
  std::vector<int64_t> indices_;
  std::string description_;
};

}  // namespace

DatasetPtr make_subset(DatasetPtr base, std::vector<int64_t> indices, std::string description) {
  return std::make_shared<SubsetDataset>(std::move(base), std::move(indices),
                                         std::move(description));
}

Splits split_for_validation(DatasetPtr base, double fraction, uint64_t seed) {
  if (!(fraction > 0.0 && fraction < 1.0))
    fail("the validation fraction must lie strictly between 0 and 1, not ", fraction);
  const size_t total = base->size();
  const size_t held_out = size_t(std::floor(fraction * double(total)));
  if (held_out == 0 || held_out == total)
    fail("a validation fraction of ", fraction, " of ", base->description(), " leaves ",
         held_out == 0 ? "no validation" : "no training", " samples; choose another fraction");
  const std::vector<int64_t> order = torch_randperm(int64_t(total), seed);
  const std::string split = ", validation fraction " + std::to_string(fraction) + " seed " +
                            std::to_string(seed) + ": ";
  Splits splits;
  splits.val = make_subset(base, {order.begin(), order.begin() + held_out},
                           base->description() + split + std::to_string(held_out) + " held out");
  splits.train = make_subset(base, {order.begin() + held_out, order.end()},
                             base->description() + split + std::to_string(total - held_out) +
                                 " kept for training");
  return splits;
}

DatasetPtr take_first(DatasetPtr base, size_t limit) {
  if (limit >= base->size()) return base;
  std::vector<int64_t> indices(limit);
  for (size_t i = 0; i < limit; ++i) indices[i] = int64_t(i);
  return make_subset(base, std::move(indices),
                     base->description() + ", first " + std::to_string(limit));
}

}  // namespace rddp::data
