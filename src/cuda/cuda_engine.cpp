// The CUDA engine: the CUDA executor, the fused softmax/cross-entropy kernel and the optimizer
// kernels behind the Engine interface, behaving as the CPU engine does (src/cpu/cpu_engine.cpp):
// the same initialisation, loss, metrics, optimizer maths and saved state.
//
// Under fp16 the step also carries GradScaler's dynamic loss scaling (cuda/loss_scaling.h), all
// of it on the device: the scale, the verdict on each step, the optimizer's step count and the
// count of skipped steps live in one loss_scale::StepState, which the host reads only with the
// metrics and checkpoints.
//
// A step only enqueues work: the batch is copied on a stream of its own, metrics are summed on
// the device, the optimizer's scalars are read from device memory, and nothing is allocated. The
// one wait inside a step is for the copy of the batch out of host memory (see batch_upload.h).
//
// With CudaEngineOptions::cuda_graphs the device work of a training step, forward to optimizer, is
// captured once as a CUDA graph and replayed (cuda/graph_step_policy.h decides which steps may).
// A replay repeats the captured kernels with their captured arguments and does none of the host
// work the step did while it was captured, so the step is split along that line:
//  - outside the graph, before it: the batch's copy out of its host buffer (the loader hands a
//    different pinned buffer each step, and BatchUpload alternates between two device slots),
//    then one device-to-device copy of the slot into a fixed input buffer, which is where the
//    graph starts; the optimizer's step count and scalars, computed on the host and staged into
//    device memory (StagedValue copies from a ring of pinned slots, another moving address), so
//    that a new learning rate reaches the graph through memory, never as a baked-in constant;
//    the refresh of the 16-bit copy of the parameters when someone wrote them;
//  - inside: every kernel, cuDNN and cuBLAS call of forward, loss, backward and optimizer, all
//    reading and writing buffers allocated once (activations, workspaces, the cuBLAS workspace
//    set with cublasSetWorkspace, gradients, moments, metric sums, fp16's loss-scaling state);
//  - outside, after it: the BatchNorm counters (host memory) and the batch slot's release.
// StepHooks (the DDP reducer) that are capturable have their device work, the buckets'
// allreduces on the comm stream, captured into the graph with the step: the engine calls them
// while it captures, and after each replay tells them the step ran (StepHooks::replayed), which
// is where they do their host bookkeeping and watch the step. Hooks that are not capturable
// make every step eager.
#include <cuda_profiler_api.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <optional>
#include <utility>

#include "resnet_ddp/cuda/batch_upload.h"
#include "resnet_ddp/cuda/captured_graph.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/cuda_engine.h"
#include "resnet_ddp/cuda/device.h"
#include "resnet_ddp/cuda/device_capabilities.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/cuda/executor.h"
#include "resnet_ddp/cuda/graph_step_policy.h"
#include "resnet_ddp/cuda/handles.h"
#include "resnet_ddp/cuda/kernels.h"
#include "resnet_ddp/cuda/layer_kernels.h"
#include "resnet_ddp/cuda/loss_scaling.h"
#include "resnet_ddp/cuda/staged_value.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/profile_range.h"
#include "resnet_ddp/weight_decay_mask.h"

namespace rddp {

namespace {

using cuda::DeviceBuffer;

const EngineConfig& validated(const EngineConfig& config) {
  config.spec.validate();
  config.optimizer.validate();
  if (config.max_batch < 1) fail("batch size must be >= 1, got ", config.max_batch);
  if (config.height < 1 || config.width < 1)
    fail("input images must be at least 1x1, got ", config.height, "x", config.width);
  if (!(config.label_smoothing >= 0.0 && config.label_smoothing <= 1.0))
    fail("--label-smoothing must be in [0, 1], got ", config.label_smoothing);
  check_batch_input(config);
  return config;
}

ModelState<float> initial_state(const ModelSpec& spec, uint64_t seed) {
  ModelState<float> state(spec);
  init_torchvision(state, seed);
  return state;
}

bool has_first_moment(const OptimizerConfig& optimizer) {
  return optimizer.kind == OptimizerKind::adamw || optimizer.momentum != 0.0;
}
bool has_second_moment(const OptimizerConfig& optimizer) {
  return optimizer.kind == OptimizerKind::adamw;
}

cuda::MathPolicy math_policy(Precision precision, const CudaEngineOptions& options) {
  cuda::MathPolicy policy;
  policy.allow_tf32 = precision == Precision::tf32;
  policy.deterministic = options.deterministic;
  policy.search = options.conv_search;
  policy.api = options.conv_api;
  policy.data_type = precision == Precision::bf16   ? CUDNN_DATA_BFLOAT16
                     : precision == Precision::fp16 ? CUDNN_DATA_HALF
                                                    : CUDNN_DATA_FLOAT;
  policy.format =
      options.memory_format == MemoryFormat::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  return policy;
}

// The model and optimizer state on the device: one allocation per flat buffer, laid out by the
// ParamLayout, so that a gradient bucket is a slice of `grads` and the optimizer one launch.
// Under bf16 (fp16) a bfloat16 (float16) copy of the parameters joins them (same layout; see
// DeviceModel); the float buffers are the same in every precision, so the reducer and
// checkpoints never notice. fp16 adds the loss scaling's state and the AdamW scalars that the
// device computes from its own step count.
struct DeviceState {
  DeviceState(const ModelState<float>& initial, const OptimizerConfig& optimizer,
              Precision precision, const loss_scale::Config& scaling, cudaStream_t stream)
      : params(initial.layout.parameter_elements()),
        grads(initial.layout.parameter_elements()),
        running(initial.layout.running_stat_elements()),
        first_moment(has_first_moment(optimizer) ? params.size() : 0),
        second_moment(has_second_moment(optimizer) ? params.size() : 0),
        params_bf16(precision == Precision::bf16 ? params.size() : 0),
        params_fp16(precision == Precision::fp16 ? params.size() : 0),
        loss_scaling(precision == Precision::fp16 ? 1 : 0),
        adamw_scalars(precision == Precision::fp16 ? 1 : 0) {
    // Alive until the synchronisation below, as the other host sources are.
    const std::vector<uint32_t> mask = no_decay_mask(optimizer, initial.layout);
    if (!mask.empty()) {
      no_decay = DeviceBuffer<uint32_t>(mask.size());
      cuda::copy_to_device(no_decay.get(), mask.data(), mask.size(), stream);
    }
    if (loss_scaling.size() > 0) {
      const loss_scale::StepState start = loss_scale::initial_step_state(scaling, 0);
      cuda::copy_to_device(loss_scaling.get(), &start, 1, stream);
    }
    cuda::copy_to_device(params.get(), initial.params.data(), params.size(), stream);
    cuda::copy_to_device(running.get(), initial.running.data(), running.size(), stream);
    // Gradient padding must read zero forever (the optimizer runs over it); moments start at 0.
    for (const DeviceBuffer<float>* zeroed : {&grads, &first_moment, &second_moment})
      if (zeroed->size() > 0)
        RDDP_CUDA_CHECK(cudaMemsetAsync(zeroed->get(), 0, zeroed->bytes(), stream));
    RDDP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  DeviceBuffer<float> params, grads, running, first_moment, second_moment;
  DeviceBuffer<__nv_bfloat16> params_bf16;  // empty unless bf16
  DeviceBuffer<__half> params_fp16;         // empty unless fp16
  DeviceBuffer<loss_scale::StepState> loss_scaling;    // fp16 only
  DeviceBuffer<adamw::Scalars<float>> adamw_scalars;   // fp16 only: written by the device
  DeviceBuffer<uint32_t> no_decay;  // the weight-decay mask; empty where every parameter decays

  // The mask for the optimizer kernels: null where every parameter decays.
  const uint32_t* no_decay_or_null() const {
    return no_decay.size() > 0 ? no_decay.get() : nullptr;
  }

  size_t bytes() const {
    return params.bytes() + grads.bytes() + running.bytes() + first_moment.bytes() +
           second_moment.bytes() + params_bf16.bytes() + params_fp16.bytes() +
           loss_scaling.bytes() + adamw_scalars.bytes() + no_decay.bytes();
  }
};

class CudaEngine final : public Engine {
 public:
  CudaEngine(const EngineConfig& config, const CudaEngineOptions& options, uint64_t init_seed)
      : config_(validated(config)),
        options_(options),
        device_name_(cuda::select_device(options.device_index)),
        device_(require_capable_device(options.device_index, config.precision)),
        net_(describe(config.spec)),
        layout_(net_),
        counters_(layout_.batch_counter_elements(), 0),
        state_(initial_state(config.spec, init_seed), config.optimizer, config.precision,
               options.loss_scale, context_.stream()),
        dlogits_(static_cast<size_t>(config.max_batch) * config.spec.num_classes),
        xent_rows_(static_cast<size_t>(config.max_batch)),
        step_metrics_(1),
        metric_sums_(1),
        pixel_mean_stddev_(pixel_input() ? 2 * static_cast<size_t>(config.spec.in_channels) : 0),
        upload_(config.max_batch, config.spec.in_channels, config.height, config.width,
                config.input),
        graph_policy_(options.cuda_graphs, config.max_batch),
        graph_input_(options.cuda_graphs ? uploaded_bytes(config) * config.max_batch : 0),
        graph_labels_(options.cuda_graphs ? static_cast<size_t>(config.max_batch) : 0),
        executor_(net_, layout_, device_model(), config.max_batch, config.height, config.width,
                  context_,
                  cuda::ExecutorOptions{math_policy(config.precision, options),
                                        options.batchnorm, pixel_input()}) {
    if (pixel_input()) {
      std::vector<float> mean_stddev = config_.pixel_mean;
      mean_stddev.insert(mean_stddev.end(), config_.pixel_stddev.begin(),
                         config_.pixel_stddev.end());
      cuda::copy_to_device(pixel_mean_stddev_.get(), mean_stddev.data(), mean_stddev.size(),
                           context_.stream());
    }
    if (config_.optimizer.kind == OptimizerKind::sgd)
      sgd_scalars_.emplace();
    else if (loss_scaling())
      adamw_hyperparameters_.emplace();
    else
      adamw_scalars_.emplace();
    // The timed algorithm search ran backward-filter candidates into the gradient buffer;
    // gradients start at zero, as on the CPU. (The 16-bit copy was made before the search,
    // which reads it, in device_model().)
    RDDP_CUDA_CHECK(
        cudaMemsetAsync(state_.grads.get(), 0, state_.grads.bytes(), context_.stream()));
    reset_metric_sums();
    context_.synchronize();
  }

  ~CudaEngine() override {
    // Buffers are freed after this; let the work that uses them finish first.
    cudaStreamSynchronize(context_.stream());
  }

  DeviceKind device() const override { return DeviceKind::cuda; }
  std::string device_name() const override { return device_name_; }
  DevicePeak peak() const override {
    return device_peak(device_.name, device_.major, device_.minor, device_.sms,
                       to_string(config_.precision));
  }
  const ParamLayout& layout() const override { return layout_; }
  float* params() override {
    // The caller may write the parameters through this pointer (the reducer broadcasts rank 0's
    // into it), behind the 16-bit copy's back: the next step refreshes the copy first.
    params_copy_stale_ = true;
    return state_.params.get();
  }
  float* grads() override { return state_.grads.get(); }
  float* running_stats() override { return state_.running.get(); }
  void* compute_stream() override { return context_.stream(); }

  void train_step(const HostBatch& batch, double lr, StepHooks* hooks) override {
    check_batch(batch);
    check_learning_rate(lr);
    executor_.check_batch(batch.size, /*training=*/true);
    cudaStream_t stream = context_.stream();
    const cuda::BatchUpload::Slot slot = [&] {
      const ProfileRange range("upload batch");
      return upload_.upload(batch, stream);
    }();
    if (hooks) hooks->before_forward();
    refresh_params_copy();
    stage_optimizer_scalars(lr);
    const cuda::GraphStepMode mode =
        graph_policy_.next(batch.size, hooks != nullptr && !hooks->capturable());
    if (mode == cuda::GraphStepMode::eager) {
      ++graph_stats_.eager_steps;
      enqueue_step(network_input(slot.images, slot.pixels), slot.labels, batch.size, hooks,
                   &slot);
    } else {
      copy_into_graph_input(slot, batch.size);
      upload_.release(slot, stream);
      if (mode == cuda::GraphStepMode::replay) {
        ++graph_stats_.replays;
        const ProfileRange range("graph replay");
        graph_.replay(stream);
        if (hooks) hooks->replayed();
      } else {
        const ProfileRange range("graph capture");
        capture_and_run_step(batch.size, hooks);
      }
    }
    // Every BatchNorm counted one more training batch; the counters live on the host, where
    // only checkpoints read them.
    for (int64_t& counter : counters_) ++counter;
    const ProfileRange range("wait for batch copy");
    upload_.wait_until_read(slot);
  }

  const CudaGraphStats& graph_stats() const { return graph_stats_; }
  const cuda::DeviceCapabilities& capabilities() const { return device_; }
  cuda::ConvAlgorithmCache::ApiUse conv_api_use() const {
    return executor_.algorithms().api_use();
  }
  CudaMemoryPlan memory_plan() const {
    CudaMemoryPlan plan;
    plan.model_bytes = state_.bytes();
    plan.activation_bytes = executor_.activation_bytes();
    plan.conv_workspace_bytes = executor_.workspace_bytes();
    plan.search_workspace_bytes = executor_.search_workspace_bytes();
    plan.input_bytes = upload_.bytes() + graph_input_.bytes() + graph_labels_.bytes() +
                       pixel_mean_stddev_.bytes();
    return plan;
  }

  void eval_step(const HostBatch& batch) override {
    check_batch(batch);
    executor_.check_batch(batch.size, /*training=*/false);
    cudaStream_t stream = context_.stream();
    const cuda::BatchUpload::Slot slot = upload_.upload(batch, stream);
    refresh_params_copy();
    const float* logits =
        executor_.forward(network_input(slot.images, slot.pixels), batch.size, /*training=*/false);
    // The training criterion, label smoothing included, as the CPU engine reports it.
    loss(logits, slot.labels, batch.size, nullptr);
    upload_.release(slot, stream);
    upload_.wait_until_read(slot);
  }

  Metrics take_metrics() override {
    cuda::MetricSums sums{};
    cuda::copy_to_host(&sums, metric_sums_.get(), 1, context_.stream());
    reset_metric_sums();
    // Labels are checked on the host before each step; a bad one can only reach the GPU if the
    // batch memory changed while it was being copied.
    if (sums.bad_labels != 0)
      fail(sums.bad_labels, " label(s) outside [0, ", config_.spec.num_classes,
           ") reached the GPU although the batches passed the host's check: the batch memory ",
           "was rewritten while a step was copying it; keep each HostBatch unchanged until ",
           "train_step or eval_step returns");
    Metrics metrics;
    metrics.loss_sum = sums.loss_sum;
    metrics.correct = sums.correct;
    metrics.correct_top5 = sums.correct_top5;
    metrics.count = sums.count;
    metrics.nonfinite_losses = sums.nonfinite_losses;
    if (loss_scaling()) {
      loss_scale::StepState scaling{};
      cuda::copy_to_host(&scaling, state_.loss_scaling.get(), 1, context_.stream());
      metrics.skipped_steps = scaling.skipped_steps;
      void* skipped = reinterpret_cast<char*>(state_.loss_scaling.get()) +
                      offsetof(loss_scale::StepState, skipped_steps);
      RDDP_CUDA_CHECK(
          cudaMemsetAsync(skipped, 0, sizeof(scaling.skipped_steps), context_.stream()));
    }
    return metrics;
  }

  void profiler_capture(bool on) override {
    if (on) {
      RDDP_CUDA_CHECK(cudaProfilerStart());
      return;
    }
    RDDP_CUDA_CHECK(cudaStreamSynchronize(context_.stream()));
    RDDP_CUDA_CHECK(cudaProfilerStop());
  }

  void save_state(ModelState<float>& model, OptimizerState& optimizer) override {
    cudaStream_t stream = context_.stream();
    model = ModelState<float>(config_.spec);
    cuda::copy_to_host(model.params.data(), state_.params.get(), state_.params.size(), stream);
    cuda::copy_to_host(model.grads.data(), state_.grads.get(), state_.grads.size(), stream);
    cuda::copy_to_host(model.running.data(), state_.running.get(), state_.running.size(), stream);
    model.counters = counters_;
    optimizer.step_count = step_count_;
    optimizer.has_loss_scale = false;
    if (loss_scaling()) {
      // The device counts the steps taken, skipped ones excluded.
      loss_scale::StepState scaling{};
      cuda::copy_to_host(&scaling, state_.loss_scaling.get(), 1, stream);
      optimizer.step_count = scaling.step_count;
      optimizer.has_loss_scale = true;
      optimizer.loss_scale = scaling.scaler;
    }
    optimizer.first_moment =
        cuda::download(state_.first_moment.get(), state_.first_moment.size(), stream);
    optimizer.second_moment =
        cuda::download(state_.second_moment.get(), state_.second_moment.size(), stream);
  }

  void load_state(const ModelState<float>& model, const OptimizerState* optimizer) override {
    if (model.layout.parameter_elements() != layout_.parameter_elements() ||
        model.layout.running_stat_elements() != layout_.running_stat_elements() ||
        model.layout.batch_counter_elements() != layout_.batch_counter_elements())
      fail("cannot load a model of another shape into this engine (",
           model.layout.parameter_count(), " parameters, expected ", layout_.parameter_count(),
           ")");
    if (optimizer != nullptr) check_optimizer_state(*optimizer);
    cudaStream_t stream = context_.stream();
    cuda::copy_to_device(state_.params.get(), model.params.data(), state_.params.size(), stream);
    params_copy_stale_ = true;
    refresh_params_copy();
    cuda::copy_to_device(state_.running.get(), model.running.data(), state_.running.size(), stream);
    counters_ = model.counters;
    if (optimizer != nullptr) {
      step_count_ = optimizer->step_count;
      cuda::copy_to_device(state_.first_moment.get(), optimizer->first_moment.data(),
                           state_.first_moment.size(), stream);
      cuda::copy_to_device(state_.second_moment.get(), optimizer->second_moment.data(),
                           state_.second_moment.size(), stream);
      if (loss_scaling()) {
        loss_scale::StepState scaling =
            loss_scale::initial_step_state(options_.loss_scale, optimizer->step_count);
        if (optimizer->has_loss_scale) scaling.scaler = optimizer->loss_scale;
        cuda::copy_to_device(state_.loss_scaling.get(), &scaling, 1, stream);
      }
    }
  }

 private:
  void check_batch(const HostBatch& batch) const {
    check_batch_fits(config_, batch);
    // Here rather than on the device: a bad label makes NaN gradients, which the optimizer would
    // spread into every parameter before the metrics could report it.
    const int classes = config_.spec.num_classes;
    for (int row = 0; row < batch.size; ++row)
      if (batch.labels[row] < 0 || batch.labels[row] >= classes)
        fail("label ", batch.labels[row], " of image ", row, " of the batch is outside [0, ",
             classes, "): the data's labels do not fit a model of ", classes,
             " classes; check the dataset or the number of classes");
  }

  static void check_learning_rate(double lr) {
    // As CpuOptimizer::step: a schedule may reach 0 (the start of a warm-up), never below.
    if (!(lr >= 0.0) || !std::isfinite(lr))
      fail("optimizer step: the learning rate from the schedule must be finite and >= 0, got ", lr,
           "; check --lr and the schedule's settings");
  }

  void check_optimizer_state(const OptimizerState& optimizer) const {
    const size_t first = state_.first_moment.size(), second = state_.second_moment.size();
    if (optimizer.first_moment.size() != first || optimizer.second_moment.size() != second)
      fail("the optimizer state does not fit this engine's optimizer (",
           to_string(config_.optimizer.kind), ", momentum ", config_.optimizer.momentum,
           "): it holds moments of ", optimizer.first_moment.size(), " and ",
           optimizer.second_moment.size(), " values, expected ", first, " and ", second,
           "; resume with the optimizer settings the checkpoint was saved with");
  }

  bool pixel_input() const { return config_.input == BatchInput::pixels; }

  // One image's bytes as the batch carries it (and BatchUpload copies it).
  static size_t uploaded_bytes(const EngineConfig& config) {
    const size_t elements =
        static_cast<size_t>(config.spec.in_channels) * config.height * config.width;
    return elements * (config.input == BatchInput::pixels ? sizeof(uint8_t) : sizeof(float));
  }

  // The executor's view of a batch on the device: its images, or its pixels with the
  // normalisation they need.
  cuda::NetworkInput network_input(const float* images, const uint8_t* pixels) const {
    if (pixels != nullptr) return {nullptr, pixels, pixel_mean_stddev_.get()};
    return {images, nullptr, nullptr};
  }

  // The device work of one training step, from the batch on the device to the updated
  // parameters; the optimizer's scalars are staged already. This is what a CUDA graph captures
  // (with no slot, and only capturable hooks: see the comment at the top of the file). `slot`, when given, is
  // released once backward has read the last of it.
  void enqueue_step(const cuda::NetworkInput& input, const int32_t* labels, int batch,
                    StepHooks* hooks, const cuda::BatchUpload::Slot* slot) {
    cudaStream_t stream = context_.stream();
    const float* logits = [&] {
      const ProfileRange range("forward");
      return executor_.forward(input, batch, /*training=*/true);
    }();
    {
      const ProfileRange range("loss");
      loss(logits, labels, batch, dlogits_.get());
      if (loss_scaling())
        cuda::scale_loss_gradient(dlogits_.get(),
                                  static_cast<int64_t>(batch) * config_.spec.num_classes,
                                  state_.loss_scaling.get(), stream);
    }
    {
      const ProfileRange range("backward");
      if (hooks)
        executor_.backward(dlogits_.get(),
                           [hooks](const TensorInfo& tensor) { hooks->grad_ready(tensor); });
      else
        executor_.backward(dlogits_.get());
    }
    if (slot) upload_.release(*slot, stream);
    if (hooks) hooks->before_optimizer();
    const ProfileRange range("optimizer");
    enqueue_optimizer();
  }

  // The graph reads its batch from one fixed buffer; the slot the batch landed in alternates.
  void copy_into_graph_input(const cuda::BatchUpload::Slot& slot, int batch) {
    cudaStream_t stream = context_.stream();
    const void* images =
        slot.pixels != nullptr ? static_cast<const void*>(slot.pixels) : slot.images;
    RDDP_CUDA_CHECK(cudaMemcpyAsync(graph_input_.get(), images, uploaded_bytes(config_) * batch,
                                    cudaMemcpyDeviceToDevice, stream));
    RDDP_CUDA_CHECK(cudaMemcpyAsync(graph_labels_.get(), slot.labels,
                                    static_cast<size_t>(batch) * sizeof(int32_t),
                                    cudaMemcpyDeviceToDevice, stream));
  }

  cuda::NetworkInput graph_network_input() const {
    const std::byte* input = graph_input_.get();
    return pixel_input() ? network_input(nullptr, reinterpret_cast<const uint8_t*>(input))
                         : network_input(reinterpret_cast<const float*>(input), nullptr);
  }

  // Captures the step (capturing runs nothing) and runs it by its first replay. A capture that
  // fails (any CUDA, cuDNN or cuBLAS error, or a call that cannot be captured) leaves the stream
  // out of capture mode with nothing run; the step then runs eagerly, and so does every later
  // one, with the cause on stderr: slower, never wrong, never hung. Not so with hooks: a
  // reducer's collectives were handed to the communicator while capturing, and whether it can
  // carry on in step with the other ranks after a failed capture is not something to guess, so
  // the run stops with the cause.
  void capture_and_run_step(int batch, StepHooks* hooks) {
    cudaStream_t stream = context_.stream();
    if (hooks) hooks->capturing(true);
    const std::string failure = graph_.capture(stream, [&] {
      enqueue_step(graph_network_input(), graph_labels_.get(), batch, hooks, nullptr);
    });
    if (hooks) hooks->capturing(false);
    if (failure.empty()) {
      graph_policy_.captured();
      ++graph_stats_.captures;
      ++graph_stats_.replays;
      graph_stats_.graph_nodes = graph_.nodes();
      graph_.replay(stream);
      if (hooks) hooks->replayed();
      return;
    }
    if (hooks)
      fail("capturing the training step with its step hooks' work (the gradient allreduces) "
           "as a CUDA graph failed: ",
           failure, ". Rerun with --cuda-graphs off");
    graph_policy_.capture_failed();
    graph_stats_.capture_failure = failure;
    ++graph_stats_.eager_steps;
    std::fprintf(stderr,
                 "resnet_ddp: warning: capturing the training step as a CUDA graph failed; "
                 "every step runs eagerly from now on, as with --cuda-graphs off. Cause: %s\n",
                 failure.c_str());
    enqueue_step(graph_network_input(), graph_labels_.get(), batch, nullptr, nullptr);
  }

  // Loss, d(loss)/d(logits) when `dlogits` is not null, and the step's metrics added to the
  // running sums: all on the device.
  void loss(const float* logits, const int32_t* labels, int batch, float* dlogits) {
    cudaStream_t stream = context_.stream();
    cuda::softmax_cross_entropy<float>(logits, labels, batch, config_.spec.num_classes,
                                       static_cast<float>(config_.label_smoothing), dlogits,
                                       xent_rows_.get(), step_metrics_.get(), stream);
    cuda::accumulate_metrics(step_metrics_.get(), batch, metric_sums_.get(), stream,
                             /*drop_nonfinite=*/loss_scaling() && dlogits != nullptr);
  }

  // The host's part of one optimizer update, done before any of the step's kernels are
  // enqueued: the step count advanced and the scalars computed in double from it and `lr`,
  // exactly as CpuOptimizer computes them, and staged into device memory, where the kernels
  // (eager or replayed from a graph) read them. Under loss scaling the device alone knows the
  // count: only the hyperparameters are staged, and the device computes AdamW's scalars.
  void stage_optimizer_scalars(double lr) {
    cudaStream_t stream = context_.stream();
    const OptimizerConfig& o = config_.optimizer;
    if (o.kind == OptimizerKind::sgd) {
      if (!loss_scaling()) ++step_count_;
      sgd_scalars_->set(sgd::scalars<float>(lr, o.weight_decay, o.momentum, o.nesterov), stream);
    } else if (loss_scaling()) {
      adamw_hyperparameters_->set(
          adamw::Hyperparameters{lr, o.weight_decay, o.beta1, o.beta2, o.eps}, stream);
    } else {
      ++step_count_;
      adamw_scalars_->set(
          adamw::scalars<float>(lr, o.weight_decay, o.beta1, o.beta2, o.eps, step_count_), stream);
    }
  }

  // One update of every parameter, reading the scalars staged by stage_optimizer_scalars().
  void enqueue_optimizer() {
    if (loss_scaling()) return enqueue_scaled_optimizer();
    cudaStream_t stream = context_.stream();
    const size_t elements = state_.params.size();
    if (config_.optimizer.kind == OptimizerKind::adamw)
      cuda::adamw_step<float>(state_.params.get(), state_.grads.get(), state_.first_moment.get(),
                              state_.second_moment.get(), elements, adamw_scalars_->device(),
                              stream, params_copy(), nullptr, state_.no_decay_or_null());
    else
      cuda::sgd_step<float>(state_.params.get(), state_.grads.get(), state_.first_moment.get(),
                            elements, sgd_scalars_->device(), stream, params_copy(), nullptr,
                            state_.no_decay_or_null());
  }

  // fp16: GradScaler.unscale_, step and update, on the device. The gradients have been averaged
  // across ranks by now (before_optimizer), so every rank finds the same Inf or NaN, or none,
  // and skips or takes the same step.
  void enqueue_scaled_optimizer() {
    cudaStream_t stream = context_.stream();
    const size_t elements = state_.params.size();
    loss_scale::StepState* scaling = state_.loss_scaling.get();
    cuda::find_non_finite(state_.grads.get(), elements, scaling, stream);
    if (config_.optimizer.kind == OptimizerKind::adamw) {
      cuda::begin_scaled_step(scaling, options_.loss_scale, adamw_hyperparameters_->device(),
                              state_.adamw_scalars.get(), stream);
      cuda::adamw_step<float>(state_.params.get(), state_.grads.get(), state_.first_moment.get(),
                              state_.second_moment.get(), elements, state_.adamw_scalars.get(),
                              stream, params_copy(), scaling, state_.no_decay_or_null());
    } else {
      cuda::begin_scaled_step(scaling, options_.loss_scale, nullptr, nullptr, stream);
      cuda::sgd_step<float>(state_.params.get(), state_.grads.get(), state_.first_moment.get(),
                            elements, sgd_scalars_->device(), stream, params_copy(), scaling,
                            state_.no_decay_or_null());
    }
  }

  bool loss_scaling() const { return config_.precision == Precision::fp16; }

  // The 16-bit copy of the parameters the optimizer keeps up to date, if any.
  cuda::ParamCopy16 params_copy() const {
    cuda::ParamCopy16 copy;
    if (state_.params_bf16.size() > 0) copy.bf16 = state_.params_bf16.get();
    if (state_.params_fp16.size() > 0) copy.fp16 = state_.params_fp16.get();
    return copy;
  }

  // Under bf16 or fp16, the executor's view of the model, with the 16-bit copy of the parameters
  // made now: the executor's timed search runs on it.
  cuda::DeviceModel device_model() {
    const cuda::ParamCopy16 copy = params_copy();
    cuda::DeviceModel model{state_.params.get(), state_.grads.get(), state_.running.get(),
                            copy.bf16, copy.fp16};
    params_copy_stale_ = true;
    refresh_params_copy();
    return model;
  }

  // The optimizer kernel rewrites the copy with every update; this covers the other writers of
  // the float parameters (load_state, and whoever was handed params()), with one conversion
  // launch on the compute stream, ordered after their writes: load_state's copies wait for the
  // device, and the reducer makes the compute stream wait for its broadcast of rank 0's.
  void refresh_params_copy() {
    if (!params_copy_stale_) return;
    params_copy_stale_ = false;
    const cuda::ParamCopy16 copy = params_copy();
    const auto count = static_cast<int64_t>(state_.params.size());
    if (copy.bf16 != nullptr)
      cuda::convert(count, state_.params.get(), copy.bf16, context_.stream());
    if (copy.fp16 != nullptr)
      cuda::convert(count, state_.params.get(), copy.fp16, context_.stream());
  }

  void reset_metric_sums() {
    RDDP_CUDA_CHECK(
        cudaMemsetAsync(metric_sums_.get(), 0, metric_sums_.bytes(), context_.stream()));
  }

  EngineConfig config_;
  CudaEngineOptions options_;
  std::string device_name_;  // selecting the device comes before any other CUDA call
  cuda::DeviceCapabilities device_;  // and then refusing a precision it lacks
  NetDesc net_;
  ParamLayout layout_;
  std::vector<int64_t> counters_;  // BatchNorm num_batches_tracked, by layout offset
  int64_t step_count_ = 0;  // all precisions but fp16, whose count lives on the device
  bool params_copy_stale_ = false;  // the float parameters may have changed since the last copy
  cuda::ComputeContext context_;
  DeviceState state_;
  DeviceBuffer<float> dlogits_;
  DeviceBuffer<cuda::XentRow> xent_rows_;
  DeviceBuffer<cuda::XentMetrics> step_metrics_;
  DeviceBuffer<cuda::MetricSums> metric_sums_;
  std::optional<cuda::StagedValue<adamw::Scalars<float>>> adamw_scalars_;
  std::optional<cuda::StagedValue<sgd::Scalars<float>>> sgd_scalars_;
  std::optional<cuda::StagedValue<adamw::Hyperparameters>> adamw_hyperparameters_;  // fp16
  DeviceBuffer<float> pixel_mean_stddev_;  // pixel input: the channels' means, then stddevs
  cuda::BatchUpload upload_;
  // --cuda-graphs: which steps replay, the graph, and its fixed input (empty when off).
  cuda::GraphStepPolicy graph_policy_;
  cuda::CapturedGraph graph_;
  CudaGraphStats graph_stats_;
  DeviceBuffer<std::byte> graph_input_;  // a batch as uploaded
  DeviceBuffer<int32_t> graph_labels_;
  cuda::Executor executor_;
};

}  // namespace

cuda::DeviceCapabilities require_capable_device(int index, Precision precision) {
  cuda::DeviceCapabilities device = cuda::query_device_capabilities(index);
  cuda::require_kernels_for(device);
  cuda::require_precision_supported(device, precision);
  return device;
}

std::unique_ptr<Engine> make_cuda_engine(const EngineConfig& config,
                                         const CudaEngineOptions& options, uint64_t init_seed) {
  return std::make_unique<CudaEngine>(config, options, init_seed);
}

namespace {

// `engine` as the CUDA engine it must be for a question only that engine answers (`what`).
const CudaEngine& as_cuda_engine(const Engine& engine, const char* what) {
  const auto* cuda_engine = dynamic_cast<const CudaEngine*>(&engine);
  if (cuda_engine == nullptr)
    fail("internal error: ", what, " asked of the ", to_string(engine.device()),
         " engine; only a CUDA engine has them");
  return *cuda_engine;
}

}  // namespace

CudaGraphStats cuda_graph_stats(const Engine& engine) {
  return as_cuda_engine(engine, "CUDA graph statistics").graph_stats();
}

cuda::ConvAlgorithmCache::ApiUse cuda_conv_api_use(const Engine& engine) {
  return as_cuda_engine(engine, "convolution API figures").conv_api_use();
}

cuda::DeviceCapabilities cuda_device_capabilities(const Engine& engine) {
  return as_cuda_engine(engine, "the GPU's capabilities").capabilities();
}

CudaMemoryPlan cuda_memory_plan(const Engine& engine) {
  return as_cuda_engine(engine, "CUDA memory plan figures").memory_plan();
}

}  // namespace rddp
