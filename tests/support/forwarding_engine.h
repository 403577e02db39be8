#pragma once
// An Engine that hands every call to another one, for tests that change one thing about an
// engine (what it says its memory is, what it notes when the profiler is switched) and keep
// the rest of a real engine's behaviour.
#include <memory>
#include <string>
#include <utility>

#include "resnet_ddp/engine.h"

namespace rddp::testing {

class ForwardingEngine : public Engine {
 public:
  explicit ForwardingEngine(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {}

  DeviceKind device() const override { return engine_->device(); }
  std::string device_name() const override { return engine_->device_name(); }
  const ParamLayout& layout() const override { return engine_->layout(); }
  float* params() override { return engine_->params(); }
  float* grads() override { return engine_->grads(); }
  float* running_stats() override { return engine_->running_stats(); }
  void* compute_stream() override { return engine_->compute_stream(); }
  void train_step(const HostBatch& batch, double lr, StepHooks* hooks) override {
    engine_->train_step(batch, lr, hooks);
  }
  void eval_step(const HostBatch& batch) override { engine_->eval_step(batch); }
  Metrics take_metrics() override { return engine_->take_metrics(); }
  void save_state(ModelState<float>& model, OptimizerState& optimizer) override {
    engine_->save_state(model, optimizer);
  }
  void load_state(const ModelState<float>& model, const OptimizerState* optimizer) override {
    engine_->load_state(model, optimizer);
  }
  void profiler_capture(bool on) override { engine_->profiler_capture(on); }

 private:
  std::unique_ptr<Engine> engine_;
};

}  // namespace rddp::testing
