#pragma once
// Where every named tensor of the model lives. Parameters, their gradients and every
// optimizer moment share one layout over one flat buffer each, ordered as backward produces
// gradients (fc first, the stem last), so that a gradient bucket is one contiguous slice and
// the optimizer is one pass. BatchNorm running statistics and counters live in two more flat
// buffers of their own.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "resnet_ddp/model_spec.h"

namespace rddp {

enum class TensorRole {
  parameter,      // float, trained; in the parameter/gradient/moment buffers
  running_stat,   // float, BatchNorm running_mean / running_var
  batch_counter,  // int64, BatchNorm num_batches_tracked
};

struct TensorInfo {
  std::string name;            // torchvision state_dict name, e.g. "layer1.0.bn2.weight"
  TensorRole role = TensorRole::parameter;
  std::vector<int64_t> shape;  // PyTorch's shape; num_batches_tracked is a scalar (empty)
  size_t numel = 0;
  size_t offset = 0;           // in elements, into the flat buffer of its role
};

class ParamLayout {
 public:
  // Offsets of parameter tensors are multiples of this many elements (256 bytes of float),
  // the alignment vectorised kernels, cuBLAS and NCCL like best. Padding stays zero.
  static constexpr size_t kAlignElements = 64;

  explicit ParamLayout(const NetDesc& net);

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo& at(const std::string& name) const;  // throws Error if unknown
  const TensorInfo* find(const std::string& name) const;

  size_t parameter_elements() const { return parameter_elements_; }  // padded buffer size
  size_t parameter_count() const { return parameter_count_; }        // real values only
  size_t running_stat_elements() const { return running_stat_elements_; }
  size_t batch_counter_elements() const { return batch_counter_elements_; }

 private:
  void add(const std::string& name, TensorRole role, std::vector<int64_t> shape);
  void add_conv(const ConvDesc& conv);
  void add_batchnorm_params(const BatchNormDesc& bn);
  void add_batchnorm_buffers(const BatchNormDesc& bn);

  std::vector<TensorInfo> tensors_;
  size_t parameter_elements_ = 0, parameter_count_ = 0;
  size_t running_stat_elements_ = 0, batch_counter_elements_ = 0;
};

}  // namespace rddp
