#pragma once
// Optimizer settings and the CPU optimizer over the flat parameter buffer. The per-element
// update formulas live in include/resnet_ddp/kernel_math/adamw.h and include/resnet_ddp/kernel_math/sgd.h, shared with the CUDA
// kernels; this is the host loop around them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rddp {

enum class OptimizerKind { adamw, sgd };

const char* to_string(OptimizerKind kind);
OptimizerKind parse_optimizer(const std::string& text);  // throws Error naming the choices

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adamw;
  double lr = 1e-3;
  double weight_decay = 1e-2;  // AdamW: decoupled (p *= 1 - lr*wd); SGD: added to the gradient
  // AdamW
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  // SGD (dampening is always 0)
  double momentum = 0.0;
  bool nesterov = false;
  // false: BatchNorm weights and biases and fc.bias (every one-dimensional parameter) take no
  // weight decay, as a param group of weight_decay 0 (--no-decay-norm-bias;
  // weight_decay_mask.h).
  bool decay_norm_and_bias = true;

  void validate() const;  // throws Error naming the bad setting and its range
};

// Optimizer state: the step count and one or two moment buffers laid out like the parameters.
template <typename T>
class CpuOptimizer {
 public:
  // `no_decay_chunks`: the parameters weight decay leaves alone (include/resnet_ddp/kernel_math/weight_decay.h's
  // format; weight_decay_mask.h makes it from the config and layout); empty: none.
  CpuOptimizer(const OptimizerConfig& config, size_t elements,
               std::vector<uint32_t> no_decay_chunks = {});

  // One update of params from grads (each `elements` long) with learning rate `lr`, the
  // schedule's current value (>= 0). Throws Error on a negative or non-finite lr.
  void step(T* params, const T* grads, double lr);

  const OptimizerConfig& config() const { return config_; }
  size_t elements() const { return elements_; }
  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t steps) { step_count_ = steps; }
  // AdamW: exp_avg and exp_avg_sq. SGD: momentum_buffer (empty when momentum is 0, as
  // PyTorch keeps none) and an unused empty second buffer. Moments start at zero.
  std::vector<T>& first_moment() { return first_moment_; }
  std::vector<T>& second_moment() { return second_moment_; }

 private:
  OptimizerConfig config_;
  size_t elements_;
  int64_t step_count_ = 0;
  std::vector<T> first_moment_, second_moment_;
  std::vector<uint32_t> no_decay_chunks_;
};

}  // namespace rddp
