#pragma once
// The host-side values of a model: parameters, their gradients and the BatchNorm buffers,
// each one flat buffer laid out by ParamLayout. T is float for training and double for
// gradient checks.
#include <cstdint>
#include <string>
#include <vector>

#include "resnet_ddp/model_spec.h"
#include "resnet_ddp/param_layout.h"

namespace rddp {

template <typename T>
struct ModelState {
  explicit ModelState(const ModelSpec& model_spec)
      : spec(model_spec),
        net(describe(model_spec)),
        layout(net),
        params(layout.parameter_elements(), T(0)),
        grads(layout.parameter_elements(), T(0)),
        running(layout.running_stat_elements(), T(0)),
        counters(layout.batch_counter_elements(), 0) {}

  ModelSpec spec;
  NetDesc net;
  ParamLayout layout;
  std::vector<T> params;
  std::vector<T> grads;
  std::vector<T> running;          // BatchNorm running_mean / running_var
  std::vector<int64_t> counters;   // BatchNorm num_batches_tracked

  T* param(const std::string& name) { return params.data() + layout.at(name).offset; }
  const T* param(const std::string& name) const { return params.data() + layout.at(name).offset; }
  T* grad(const std::string& name) { return grads.data() + layout.at(name).offset; }
  const T* grad(const std::string& name) const { return grads.data() + layout.at(name).offset; }
  T* running_stat(const std::string& name) { return running.data() + layout.at(name).offset; }
  int64_t& counter(const std::string& name) { return counters[layout.at(name).offset]; }
};

// torchvision's initialisation, drawn from `seed`: convolutions kaiming_normal_(fan_out,
// relu), BatchNorm weight 1 / bias 0, fc weight and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
// running_mean 0, running_var 1, counters 0. Each tensor draws from its own stream derived
// from (seed, name), so the values do not depend on the layout order.
template <typename T>
void init_torchvision(ModelState<T>& state, uint64_t seed);

}  // namespace rddp
