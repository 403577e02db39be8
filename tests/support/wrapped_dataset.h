#pragma once
// A data set that passes everything on to another: a test overrides get() (or source()) to
// make reads fail, slow down or hang, and keeps the rest of the data set as it was.
#include <string>
#include <utility>

#include "resnet_ddp/data/dataset.h"

namespace rddp::testing {

class WrappedDataset : public data::Dataset {
 public:
  explicit WrappedDataset(data::DatasetPtr base) : base_(std::move(base)) {}
  size_t size() const override { return base_->size(); }
  int num_classes() const override { return base_->num_classes(); }
  int channels() const override { return base_->channels(); }
  int height() const override { return base_->height(); }
  int width() const override { return base_->width(); }
  data::Sample get(size_t index) const override { return base_->get(index); }
  std::string source(size_t index) const override { return base_->source(index); }

 protected:
  data::DatasetPtr base_;
};

}  // namespace rddp::testing
