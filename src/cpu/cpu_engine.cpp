// The CPU engine: the reference executor, the fused softmax/cross-entropy twin and the CPU
// optimizer behind the Engine interface, so the CPU trains through the same loop as a GPU.
#include <algorithm>
#include <utility>

#include "resnet_ddp/cpu/executor.h"
#include "resnet_ddp/cpu/softmax_xent.h"
#include "resnet_ddp/data/normalize.h"
#include "resnet_ddp/engine.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/profile_range.h"
#include "resnet_ddp/weight_decay_mask.h"

namespace rddp {

namespace {

// tf32 and fp32 both mean float32 here (the CPU has no TF32); bf16 and fp16 are refused rather
// than silently trained in float32, which would not be what the user measured or asked for.
const EngineConfig& checked_precision(const EngineConfig& config) {
  if (config.precision == Precision::bf16 || config.precision == Precision::fp16)
    fail("--precision ", to_string(config.precision), " needs the CUDA engine: the CPU engine ",
         "computes in float32; use --device cuda on a GPU, or --precision fp32 on the CPU");
  check_batch_input(config);
  return config;
}

class CpuEngine final : public Engine {
 public:
  CpuEngine(const EngineConfig& config, uint64_t init_seed)
      : config_(checked_precision(config)),
        state_(config.spec),
        executor_(state_, config.max_batch, config.height, config.width),
        optimizer_(config.optimizer, state_.layout.parameter_elements(),
                   no_decay_mask(config.optimizer, state_.layout)),
        dlogits_(static_cast<size_t>(config.max_batch) * config.spec.num_classes),
        normalized_(config.input == BatchInput::pixels
                        ? static_cast<size_t>(config.max_batch) * config.spec.in_channels *
                              config.height * config.width
                        : 0),
        normalization_{"configured", config.pixel_mean, config.pixel_stddev} {
    init_torchvision(state_, init_seed);
  }

  DeviceKind device() const override { return DeviceKind::cpu; }
  std::string device_name() const override { return "cpu"; }
  const ParamLayout& layout() const override { return state_.layout; }
  float* params() override { return state_.params.data(); }
  float* grads() override { return state_.grads.data(); }
  float* running_stats() override { return state_.running.data(); }
  void* compute_stream() override { return nullptr; }

  void train_step(const HostBatch& batch, double lr, StepHooks* hooks) override {
    check_batch_fits(config_, batch);
    if (hooks) hooks->before_forward();
    const float* logits = [&] {
      const ProfileRange range("forward");
      return executor_.forward(input_of(batch), batch.size, true);
    }();
    {
      const ProfileRange range("loss");
      record(cpu::softmax_cross_entropy(logits, batch.labels, batch.size, config_.spec.num_classes,
                                        static_cast<float>(config_.label_smoothing), dlogits_.data()),
             batch.size);
    }
    {
      const ProfileRange range("backward");
      if (hooks)
        executor_.backward(dlogits_.data(), [hooks](const TensorInfo& info) { hooks->grad_ready(info); });
      else
        executor_.backward(dlogits_.data());
    }
    if (hooks) hooks->before_optimizer();
    const ProfileRange range("optimizer");
    optimizer_.step(state_.params.data(), state_.grads.data(), lr);
  }

  void eval_step(const HostBatch& batch) override {
    check_batch_fits(config_, batch);
    const float* logits = executor_.forward(input_of(batch), batch.size, false);
    // Evaluation reports the plain cross-entropy, as PyTorch's validation loops usually do
    // with the training criterion; label smoothing is part of that criterion.
    record(cpu::softmax_cross_entropy(logits, batch.labels, batch.size, config_.spec.num_classes,
                                      static_cast<float>(config_.label_smoothing), static_cast<float*>(nullptr)),
           batch.size);
  }

  Metrics take_metrics() override { return std::exchange(metrics_, Metrics{}); }

  void save_state(ModelState<float>& model, OptimizerState& optimizer) override {
    model = state_;
    optimizer.step_count = optimizer_.step_count();
    optimizer.first_moment = optimizer_.first_moment();
    optimizer.second_moment = optimizer_.second_moment();
  }

  void load_state(const ModelState<float>& model, const OptimizerState* optimizer) override {
    if (model.layout.parameter_elements() != state_.layout.parameter_elements())
      fail("cannot load a model of another shape into this engine (", model.layout.parameter_count(),
           " parameters, expected ", state_.layout.parameter_count(), ")");
    state_.params = model.params;
    state_.running = model.running;
    state_.counters = model.counters;
    if (optimizer) {
      if (optimizer->first_moment.size() != optimizer_.first_moment().size() ||
          optimizer->second_moment.size() != optimizer_.second_moment().size())
        fail("cannot load optimizer moments of ", optimizer->first_moment.size(), " and ",
             optimizer->second_moment.size(), " values into an optimizer that keeps ",
             optimizer_.first_moment().size(), " and ", optimizer_.second_moment().size());
      optimizer_.set_step_count(optimizer->step_count);
      optimizer_.first_moment() = optimizer->first_moment;
      optimizer_.second_moment() = optimizer->second_moment;
    }
  }

 private:
  // The batch's float NCHW images: its own, or its pixels normalised into normalized_, which
  // backward reads too.
  const float* input_of(const HostBatch& batch) {
    if (config_.input != BatchInput::pixels) return batch.images;
    data::normalize_to_nchw(batch.pixels, static_cast<size_t>(batch.size), batch.height,
                            batch.width, batch.channels, normalization_, normalized_.data());
    return normalized_.data();
  }

  void record(const cpu::XentResult& result, int batch_size) {
    Metrics step;
    step.loss_sum = result.loss * batch_size;
    step.correct = result.correct;
    step.correct_top5 = result.correct_top5;
    step.count = batch_size;
    metrics_ += step;
  }

  EngineConfig config_;
  ModelState<float> state_;
  cpu::Executor<float> executor_;
  CpuOptimizer<float> optimizer_;
  std::vector<float> dlogits_;
  std::vector<float> normalized_;  // pixels input only
  data::Normalization normalization_;
  Metrics metrics_;
};

}  // namespace

std::unique_ptr<Engine> make_cpu_engine(const EngineConfig& config, uint64_t init_seed) {
  return std::make_unique<CpuEngine>(config, init_seed);
}

}  // namespace rddp
