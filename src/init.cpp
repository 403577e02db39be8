#include <algorithm>
#include <cmath>

#include "resnet_ddp/model_state.h"
#include "resnet_ddp/rng.h"

namespace rddp {

namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

template <typename T>
void init_torchvision(ModelState<T>& state, uint64_t seed) {
  std::fill(state.params.begin(), state.params.end(), T(0));
  const int64_t fc_fan_in = state.net.fc.in_features;
  for (const TensorInfo& info : state.layout.tensors()) {
    Rng rng(derive_seed(seed, info.name));
    if (info.role == TensorRole::batch_counter) {
      state.counters[info.offset] = 0;
      continue;
    }
    if (info.role == TensorRole::running_stat) {
      const T value = ends_with(info.name, ".running_var") ? T(1) : T(0);
      std::fill_n(state.running.begin() + info.offset, info.numel, value);
      continue;
    }
    T* values = state.params.data() + info.offset;
    if (info.shape.size() == 4) {
      // kaiming_normal_(mode="fan_out", nonlinearity="relu"): std = sqrt(2 / fan_out).
      const double fan_out = static_cast<double>(info.shape[0] * info.shape[2] * info.shape[3]);
      const double stddev = std::sqrt(2.0 / fan_out);
      for (size_t i = 0; i < info.numel; ++i) values[i] = static_cast<T>(stddev * rng.normal());
    } else if (info.name.rfind("fc.", 0) == 0) {
      // nn.Linear's reset_parameters: kaiming_uniform_(a=sqrt(5)) on the weight reduces to
      // U(+-1/sqrt(fan_in)), and the bias uses the same bound.
      const double bound = 1.0 / std::sqrt(static_cast<double>(fc_fan_in));
      for (size_t i = 0; i < info.numel; ++i) values[i] = static_cast<T>(rng.uniform(-bound, bound));
    } else {
      // BatchNorm affine parameters: weight 1, bias 0.
      const T value = ends_with(info.name, ".weight") ? T(1) : T(0);
      std::fill_n(values, info.numel, value);
    }
  }
}

template void init_torchvision<float>(ModelState<float>&, uint64_t);
template void init_torchvision<double>(ModelState<double>&, uint64_t);

}  // namespace rddp
