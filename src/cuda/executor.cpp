#include "resnet_ddp/cuda/executor.h"

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "resnet_ddp/cuda/batchnorm_kernels.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/cublas_check.h"
#include "resnet_ddp/cuda/cublas_linear.h"
#include "resnet_ddp/cuda/cudnn_batchnorm.h"
#include "resnet_ddp/cuda/cudnn_conv.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/cuda/free_range.h"
#include "resnet_ddp/cuda/lifetime_arena.h"
#include "resnet_ddp/cuda/layer_kernels.h"
#include "resnet_ddp/error.h"

namespace rddp::cuda {

namespace {

// The most workspace a convolution algorithm may have. A timed search skips candidates that
// need more, so that the workspace never crowds out the activations of a larger batch.
constexpr size_t kMaxConvWorkspaceBytes = size_t{1} << 30;
// The least workspace a convolution keeps after the search. A batch size first seen during
// training (the last, smaller batch of an epoch) gets heuristic algorithms that must fit the
// workspace already there; this floor leaves them room even where the searched algorithm needed
// none. It costs memory only where a workspace is in use at the step's peak, which it raises by
// up to this much: 16 MiB admits the heuristics' usual choices for a batch smaller than the
// largest, and is 3 % of the arena at 32x32, batch 128, bfloat16 (64 MiB was 12 %).
constexpr size_t kMinConvWorkspaceBytes = size_t{16} << 20;

// An activation and its gradient, [batch, channels, height, width], sized for max_batch, stored
// as T (float, or bfloat16 under mixed precision) in the plan's memory format (NCHW or NHWC).
// Both are slices of the plan's arena, which gives each the bytes of buffers dead or not yet
// written while it is in use (record_uses says when that is).
template <typename T>
struct Activation {
  int channels = 0, height = 0, width = 0;
  T* value = nullptr;
  T* grad = nullptr;  // null where no layer needs it

  void plan(LifetimeArena& arena, int max_batch, int c, int h, int w, bool needs_grad) {
    channels = c;
    height = h;
    width = w;
    arena.request(&value, count(max_batch));
    if (needs_grad) arena.request(&grad, count(max_batch));
  }
  size_t count(int batch) const { return static_cast<size_t>(batch) * channels * height * width; }
};

template <typename T>
struct Conv {
  const TensorInfo* weight = nullptr;
  // NHWC only: where its weight in OHWI, as the NHWC filter descriptor reads it, in T, starts
  // in Plan::conv_weights (elements), which is rewritten from the float masters at every forward.
  size_t weight_copy_offset = 0;
  Activation<T>* input = nullptr;  // null: the network's input
  Activation<T> output;
  std::unique_ptr<ConvLayer> layer;
  // Its own workspaces, one for the forward call and one for the two backward calls: slices of
  // the arena, free for other buffers at every other time. Both workspace_bytes long.
  std::byte* forward_workspace = nullptr;
  std::byte* backward_workspace = nullptr;
  size_t workspace_bytes = 0;
};

// Elements of the weight as the layer reads it (its OHWI copy) and as cuDNN writes its gradient.
template <typename T>
size_t copy_elements(const Conv<T>& conv) {
  const ConvShape s = conv.layer->shape(1);
  return static_cast<size_t>(s.out_channels) * s.in_channels * s.kernel * s.kernel;
}

// What the network folds into a BatchNorm: nothing, the ReLU after it, or the residual add and
// then the ReLU.
enum class BatchNormFusion { none, relu, add_relu };

template <typename T>
struct BatchNorm {
  const TensorInfo *weight = nullptr, *bias = nullptr;
  const TensorInfo *running_mean = nullptr, *running_var = nullptr;
  Activation<T>* input = nullptr;
  Activation<T>* output = nullptr;
  // What the network folds into it: a ReLU, a residual add before the ReLU, or neither.
  BatchNormFusion fusion = BatchNormFusion::none;
  float* save_mean = nullptr;
  float* save_invstd = nullptr;
  // Our kernels under a residual add: the ReLU's mask as bits, written by the training forward
  // for the backward (reads_relu_bits).
  uint8_t* relu_bits = nullptr;
  std::unique_ptr<BatchNormLayer> layer;
};

template <typename T>
struct Block {
  Activation<T>* input = nullptr;
  Conv<T> conv1, conv2;
  BatchNorm<T> bn1, bn2;
  Activation<T> hidden;  // relu(bn1(conv1(input))), ReLU in place
  bool has_downsample = false;
  Conv<T> downsample_conv;
  BatchNorm<T> downsample_bn;
  Activation<T> identity;  // downsample_bn's output
  // relu(bn2 + identity): bn2 writes here, then the sum and the ReLU are done in place. (bn2's
  // own output is not needed by any backward, unlike the CPU executor keeps it.)
  Activation<T> output;
};

template <typename T>
struct Plan {
  static constexpr bool kMixed = !std::is_same_v<T, float>;

  Plan(const ParamLayout& param_layout, const DeviceModel& device_model, ComputeContext& compute,
       const ExecutorOptions& options)
      : layout(param_layout),
        model(device_model),
        context(compute),
        algorithms(options.math),
        descriptors(options.math.data_type, options.math.format),
        format(options.math.format == CUDNN_TENSOR_NHWC ? MemoryFormat::nhwc : MemoryFormat::nchw),
        nhwc(format == MemoryFormat::nhwc),
        fused_bn(options.batchnorm == BatchNormImpl::fused),
        pixel_input(options.pixel_input) {}

  const ParamLayout& layout;
  DeviceModel model;
  ComputeContext& context;
  ConvAlgorithmCache algorithms;
  TensorDescriptorCache descriptors;
  LifetimeArena arena;
  // The arena without the convolutions' workspaces, as the timed search ran on it; what the
  // workspaces add to it.
  size_t arena_bytes_without_workspaces = 0;
  size_t workspace_bytes_added = 0;
  // The workspace the timed algorithm search held while it ran (0 for heuristic choices).
  size_t search_workspace_bytes = 0;
  // Every activation's layout; the parameters and gradients stay OIHW in the flat buffers.
  MemoryFormat format;
  bool nhwc;
  // Our BatchNorm kernels (batchnorm_kernels.h), with the ReLU and the residual add inside,
  // rather than cuDNN's BatchNorm followed by passes of their own; their partial sums go to
  // bn_scratch, which every BatchNorm uses in turn.
  bool fused_bn;
  std::byte* bn_scratch = nullptr;
  size_t bn_scratch_bytes = 0;

  int in_channels = 0, height = 0, width = 0;
  // The input of the current step: the caller's float NCHW batch, or its copy in input_copy
  // converted to T and the plan's format (from the caller's pixels, normalised, when given).
  const T* input = nullptr;
  const bool pixel_input;
  T* input_copy = nullptr;  // pixel input, mixed precision or NHWC: [max_batch, in_channels, h, w]
  Conv<T> stem_conv;
  BatchNorm<T> stem_bn;
  Activation<T> stem_out;  // ReLU in place
  bool stem_maxpool = false;
  PoolShape pool_shape;
  Activation<T> pooled;
  uint8_t* pool_argmax = nullptr;  // each output's place in its window
  std::vector<Block<T>> blocks;
  Activation<T> features;  // [batch, channels] after global average pooling
  const TensorInfo *fc_weight = nullptr, *fc_bias = nullptr;
  int fc_in = 0, fc_out = 0;
  float* logits = nullptr;
  float* ones = nullptr;  // max_batch ones, for the fc bias gradient
  // Mixed precision only: d(loss)/d(logits) rounded to bfloat16 for the fc's two GEMMs (see
  // cublas_linear.h). Mixed precision or NHWC: one convolution's weight gradient as cuDNN writes
  // it, in the filter's type and layout, before it is widened and/or permuted into the float
  // OIHW gradient (sized for the largest convolution).
  T* dlogits_copy = nullptr;
  T* weight_grad_copy = nullptr;
  // NHWC only: every convolution's OHWI weight (Conv::weight_copy_offset) in one buffer, and the table
  // by which one launch per forward writes them all from the float masters.
  T* conv_weights = nullptr;
  DeviceBuffer<WeightPermutation> weight_table;
  int max_conv_out_channels = 0;
  // Whether cuDNN writes weight gradients somewhere other than the float gradient itself.
  bool weight_grad_scratch() const { return kMixed || nhwc; }
  int batch = 0;
  bool has_training_forward = false;

  // Every convolution and BatchNorm, listed once the plan is complete (set-up and checks walk
  // them; a step does not rebuild the lists).
  std::vector<Conv<T>*> convs;
  std::vector<BatchNorm<T>*> batchnorms;
  void list_layers() {
    convs = {&stem_conv};
    batchnorms = {&stem_bn};
    for (Block<T>& block : blocks) {
      convs.insert(convs.end(), {&block.conv1, &block.conv2});
      batchnorms.insert(batchnorms.end(), {&block.bn1, &block.bn2});
      if (block.has_downsample) {
        convs.push_back(&block.downsample_conv);
        batchnorms.push_back(&block.downsample_bn);
      }
    }
  }

  cudaStream_t stream() const { return context.stream(); }
  CudnnCall forward_call(const Conv<T>& conv) const {
    return {context.cudnn(), conv.forward_workspace, conv.workspace_bytes};
  }
  CudnnCall backward_call(const Conv<T>& conv) const {
    return {context.cudnn(), conv.backward_workspace, conv.workspace_bytes};
  }
  const float* param(const TensorInfo* info) const { return model.params + info->offset; }
  // What convolutions and the fc multiply by: the float parameter, or its bfloat16 copy.
  const T* weight(const TensorInfo* info) const {
    if constexpr (std::is_same_v<T, __nv_bfloat16>)
      return model.params_bf16 + info->offset;
    else if constexpr (std::is_same_v<T, __half>)
      return model.params_fp16 + info->offset;
    else
      return model.params + info->offset;
  }
  float* grad(const TensorInfo* info) const { return model.grads + info->offset; }
  float* running(const TensorInfo* info) const { return model.running + info->offset; }
  const T* conv_input(const Conv<T>& conv) const {
    return conv.input != nullptr ? conv.input->value : input;
  }
  // What a convolution multiplies by, in its filter descriptor's layout.
  const T* conv_weight(const Conv<T>& conv) const {
    return nhwc ? conv_weights + conv.weight_copy_offset : weight(conv.weight);
  }
  cudnnTensorFormat_t cudnn_format() const {
    return nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  }
  // NHWC: the convolutions' OHWI copies from the float masters, converted to T in the same
  // pass (for bfloat16 the rounding the optimizer applies to its bfloat16 copy, so both copies
  // hold the same values). Every forward runs it: the masters may have changed since (an
  // optimizer step, load_state, a broadcast into params()), and one launch reading 4 bytes and
  // writing sizeof(T) per convolution weight is cheap next to the convolutions themselves.
  void refresh_conv_weights() const {
    if (!nhwc) return;
    weights_to_ohwi(weight_table.get(), static_cast<int>(weight_table.size()),
                    max_conv_out_channels, model.params, conv_weights, stream());
  }
};

template <typename T>
void plan_conv(Plan<T>& plan, Conv<T>& conv, const ConvDesc& desc, Activation<T>* input, int in_h,
               int in_w, int max_batch) {
  conv.weight = &plan.layout.at(desc.name + ".weight");
  conv.input = input;
  const ConvShape geometry{1, desc.in_channels, in_h, in_w, desc.out_channels,
                           desc.kernel, desc.stride, desc.pad};
  // The stem convolution reads the network's input, whose gradient nobody needs.
  conv.layer = std::make_unique<ConvLayer>(geometry, /*needs_input_grad=*/input != nullptr,
                                           data_type_of<T>(), plan.cudnn_format());
  conv.output.plan(plan.arena, max_batch, desc.out_channels, geometry.out_h(), geometry.out_w(),
                   /*needs_grad=*/true);
}

// Whether bn's backward reads its ReLU's mask from bits its training forward wrote
// (ReluMask::of_bits) rather than from its output: our kernels, under the residual add (each
// block's bn2), where the mask cannot be recomputed. The bits are a sixteenth of the output's
// bytes, the read the backward's first pass saves
// (bench/results/next-run/predictions-H100-2026-11-28.md).
template <typename T>
bool reads_relu_bits(const Plan<T>& plan, const BatchNorm<T>& bn) {
  return plan.fused_bn && bn.fusion == BatchNormFusion::add_relu;
}

template <typename T>
void plan_batchnorm(Plan<T>& plan, BatchNorm<T>& bn, const BatchNormDesc& desc,
                    Activation<T>* input, Activation<T>* output, BatchNormFusion fusion,
                    int max_batch) {
  bn.weight = &plan.layout.at(desc.name + ".weight");
  bn.bias = &plan.layout.at(desc.name + ".bias");
  bn.running_mean = &plan.layout.at(desc.name + ".running_mean");
  bn.running_var = &plan.layout.at(desc.name + ".running_var");
  bn.input = input;
  bn.output = output;
  bn.fusion = fusion;
  bn.layer = std::make_unique<BatchNormLayer>(desc.channels, input->height, input->width,
                                              data_type_of<T>(), plan.cudnn_format());
  plan.arena.request(&bn.save_mean, static_cast<size_t>(desc.channels));
  plan.arena.request(&bn.save_invstd, static_cast<size_t>(desc.channels));
  if (reads_relu_bits(plan, bn))
    plan.arena.request(&bn.relu_bits,
                       batchnorm_relu_bits_bytes<T>({max_batch, input->channels, input->height,
                                                     input->width, plan.format}));
}

// Whether bn's backward finds its ReLU's mask by recomputing the output from the input
// (ReluMask::recomputed) instead of reading the output, which then need not live until then:
// our kernels, where no residual was added before the ReLU (the stem's BatchNorm and each
// block's bn1). Under bn2's ReLU the residual's values are gone by then.
template <typename T>
bool recomputes_relu_mask(const Plan<T>& plan, const BatchNorm<T>& bn) {
  return plan.fused_bn && bn.fusion == BatchNormFusion::relu;
}

// The buffers a timed search of `conv` runs on: the layer's own activations and the model's
// weight and gradient (under mixed precision or NHWC the weight's copy the convolutions read and
// the weight gradient scratch), so that the search costs no memory beyond its workspace.
template <typename T>
ConvSearchBuffers search_buffers(const Plan<T>& plan, const Conv<T>& conv, const T* network_input,
                                 void* workspace, size_t workspace_bytes) {
  ConvSearchBuffers buffers;
  buffers.x = conv.input != nullptr ? conv.input->value : network_input;
  buffers.w = plan.conv_weight(conv);
  buffers.dy = conv.output.grad;
  buffers.y = conv.output.value;
  buffers.dx = conv.input != nullptr ? conv.input->grad : nullptr;
  if (plan.weight_grad_scratch())
    buffers.dw = plan.weight_grad_copy;
  else
    buffers.dw = plan.grad(conv.weight);
  buffers.workspace = workspace;
  buffers.workspace_bytes = workspace_bytes;
  return buffers;
}

// How much workspace a convolution's algorithms may have, and where its timed search finds its
// workspace. Before the first step the activations hold nothing worth keeping, so the search's
// workspace can lie in the longest stretch of the arena that none of the convolution's own
// buffers touches (the search runs once, before any step; build() writes what must survive it,
// the fc bias's ones, afterwards, and the NHWC weight copies are rewritten by every forward).
// The algorithms may then have as much workspace as that stretch holds, or the floor where it
// is shorter (within the device's `limit`): so the search never adds more than the floor to
// the engine's peak memory, and each step finds the workspace its algorithms need in memory
// that is idle at the time. The search's workspace is as many bytes as the hungriest candidate
// within that limit needs, not the limit itself.
struct SearchWorkspace {
  size_t limit = 0;
  size_t bytes = 0;
  bool in_arena = false;
  size_t begin = 0;  // byte offset in the arena, if in_arena
};

template <typename T>
std::vector<SearchWorkspace> place_search_workspaces(const Plan<T>& plan, const T* stand_in,
                                                     int max_batch, size_t limit) {
  const auto* base = plan.arena.data();
  const size_t arena_bytes = plan.arena.bytes();
  std::vector<SearchWorkspace> places;
  for (const Conv<T>* conv : plan.convs) {
    SearchWorkspace place;
    // What the search reads and writes (search_buffers): the ranges of them in the arena.
    std::vector<ByteRange> used;
    const auto add = [&](const void* pointer, size_t bytes) {
      const auto* p = static_cast<const std::byte*>(pointer);
      if (p == nullptr || p < base || p >= base + arena_bytes) return;
      const size_t offset = static_cast<size_t>(p - base);
      used.push_back({offset, offset + bytes});
    };
    const ConvShape shape = conv->layer->shape(max_batch);
    const size_t input_bytes = static_cast<size_t>(max_batch) * shape.in_channels * shape.in_h *
                               shape.in_w * sizeof(T);
    const size_t output_bytes = conv->output.count(max_batch) * sizeof(T);
    const size_t weight_bytes = copy_elements(*conv) * sizeof(T);
    const ConvSearchBuffers buffers = search_buffers(plan, *conv, stand_in, nullptr, 0);
    add(buffers.x, input_bytes);
    add(buffers.dx, input_bytes);
    add(buffers.w, weight_bytes);
    add(buffers.y, output_bytes);
    add(buffers.dy, output_bytes);
    add(buffers.dw, weight_bytes);
    const ByteRange free = largest_free_range(arena_bytes, used, LifetimeArena::kAlignBytes);
    place.limit = std::min(limit, std::max(free.size(), kMinConvWorkspaceBytes));
    place.bytes = conv->layer->search_workspace_bytes(max_batch, plan.context.cudnn(),
                                                      plan.algorithms, place.limit);
    if (place.bytes > 0 && free.size() >= place.bytes) {
      place.in_arena = true;
      place.begin = free.begin;
    }
    places.push_back(place);
  }
  return places;
}

size_t search_workspace_limit() {
  size_t free_bytes = 0, total_bytes = 0;
  RDDP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return std::min(kMaxConvWorkspaceBytes, free_bytes / 2);
}

template <typename T>
void conv_forward(const Plan<T>& plan, const Conv<T>& conv, int batch) {
  conv.layer->forward(plan.forward_call(conv), batch, plan.conv_input(conv),
                      plan.conv_weight(conv), conv.output.value);
}

// The weight's gradient, reported, then (unless `input_grad` is null) the input's gradient,
// accumulated onto what is there when `accumulate`.
template <typename T>
void conv_backward(const Plan<T>& plan, const Conv<T>& conv, int batch, T* input_grad,
                   bool accumulate, const GradReadyFn& ready) {
  const CudnnCall call = plan.backward_call(conv);
  if (plan.nhwc) {
    // cuDNN writes dw as the NHWC filter is laid out, OHWI, in the filter's type; the pass that
    // widens it under NCHW (below) also permutes it here, into the OIHW float gradient.
    conv.layer->backward_filter(call, batch, plan.conv_input(conv), conv.output.grad,
                                plan.weight_grad_copy);
    const ConvShape s = conv.layer->shape(batch);
    ohwi_to_oihw(s.out_channels, s.in_channels, s.kernel, plan.weight_grad_copy,
                 plan.grad(conv.weight), plan.stream());
  } else if constexpr (Plan<T>::kMixed) {
    // cuDNN writes dw in the filter's type (bfloat16), accumulated in float inside; it is then
    // widened into the float gradient, exactly (autocast's weight gradient is likewise bfloat16,
    // converted to float by the backward of the weight's cast). One launch, before grad_ready.
    conv.layer->backward_filter(call, batch, plan.conv_input(conv), conv.output.grad,
                                plan.weight_grad_copy);
    convert(static_cast<int64_t>(conv.weight->numel), plan.weight_grad_copy,
            plan.grad(conv.weight), plan.stream());
  } else {
    conv.layer->backward_filter(call, batch, plan.conv_input(conv), conv.output.grad,
                                plan.grad(conv.weight));
  }
  if (ready) ready(*conv.weight);
  if (input_grad != nullptr)
    conv.layer->backward_data(call, batch, conv.output.grad, plan.conv_weight(conv), input_grad,
                              accumulate ? 1.0f : 0.0f);
}

template <typename T>
BatchNormShape batchnorm_shape(const Plan<T>& plan, const BatchNorm<T>& bn, int batch) {
  return {batch, bn.input->channels, bn.input->height, bn.input->width, plan.format};
}

// bn's output from its input: relu?(bn(input) + residual?). Under cuDNN's BatchNorm the residual
// add and the ReLU are passes of their own (add_relu, relu_forward); ours does them in its own
// output pass.
// `residual` may be null. Without `store_output` (our kernels in training only) the statistics
// alone are computed, for a consumer that normalises on the fly.
template <typename T>
void batchnorm_forward(const Plan<T>& plan, const BatchNorm<T>& bn, int batch, bool training,
                       const T* residual, bool relu, bool store_output = true) {
  RDDP_ASSERT(residual == nullptr || relu);  // ResNet adds a residual only before a ReLU
  RDDP_ASSERT(store_output || (plan.fused_bn && training));
  T* y = store_output ? bn.output->value : nullptr;
  if (plan.fused_bn) {
    const BatchNormShape shape = batchnorm_shape(plan, bn, batch);
    if (training)
      batchnorm_forward_train(shape, bn.input->value, plan.param(bn.weight), plan.param(bn.bias),
                              plan.running(bn.running_mean), plan.running(bn.running_var),
                              bn.save_mean, bn.save_invstd, residual, relu, y, plan.bn_scratch,
                              plan.bn_scratch_bytes, plan.stream(),
                              reads_relu_bits(plan, bn) ? bn.relu_bits : nullptr);
    else
      batchnorm_forward_eval(shape, bn.input->value, plan.param(bn.weight), plan.param(bn.bias),
                             plan.running(bn.running_mean), plan.running(bn.running_var),
                             residual, relu, y, plan.stream());
    return;
  }
  cudnnHandle_t handle = plan.context.cudnn();
  if (training)
    bn.layer->forward_train(handle, batch, bn.input->value, plan.param(bn.weight),
                            plan.param(bn.bias), plan.running(bn.running_mean),
                            plan.running(bn.running_var), y, bn.save_mean, bn.save_invstd);
  else
    bn.layer->forward_eval(handle, batch, bn.input->value, plan.param(bn.weight),
                           plan.param(bn.bias), plan.running(bn.running_mean),
                           plan.running(bn.running_var), y);
  const int64_t count = static_cast<int64_t>(bn.output->count(batch));
  if (residual != nullptr)
    add_relu(count, y, residual, y, plan.stream());
  else if (relu)
    relu_forward(count, y, y, plan.stream());
}

// From `output_grad` (d loss / d bn's output, after the ReLU when `relu`) to the input's
// gradient, writing and reporting the gradients of weight and bias. With `relu`, output_grad is
// first masked by bn's output (the ReLU's backward): in place when `keep_masked` (a block's
// identity branch needs the masked gradient too), else on the fly where ours does it.
template <typename T>
void batchnorm_backward(const Plan<T>& plan, const BatchNorm<T>& bn, int batch, T* output_grad,
                        bool relu, bool keep_masked, const GradReadyFn& ready) {
  RDDP_ASSERT(relu == (bn.fusion != BatchNormFusion::none) &&
              keep_masked == (bn.fusion == BatchNormFusion::add_relu));
  const T* relu_output = relu ? bn.output->value : nullptr;
  if (plan.fused_bn) {
    const ReluMask<T> mask = !relu ? ReluMask<T>::none()
                             : recomputes_relu_mask(plan, bn)
                                 ? ReluMask<T>::recomputed(plan.param(bn.bias))
                             : reads_relu_bits(plan, bn) ? ReluMask<T>::of_bits(bn.relu_bits)
                                                         : ReluMask<T>::of_output(relu_output);
    batchnorm_backward(batchnorm_shape(plan, bn, batch), bn.input->value, output_grad, mask,
                       plan.param(bn.weight), bn.save_mean, bn.save_invstd, bn.input->grad,
                       plan.grad(bn.weight), plan.grad(bn.bias), plan.bn_scratch,
                       plan.bn_scratch_bytes, plan.stream(),
                       relu && keep_masked ? output_grad : nullptr);
  } else {
    if (relu)
      relu_backward(bn.output->count(batch), relu_output, output_grad, output_grad,
                    plan.stream());
    bn.layer->backward(plan.context.cudnn(), batch, bn.input->value, output_grad,
                       plan.param(bn.weight), bn.save_mean, bn.save_invstd, bn.input->grad,
                       plan.grad(bn.weight), plan.grad(bn.bias));
  }
  if (ready) {
    ready(*bn.weight);
    ready(*bn.bias);
  }
}

// Numbers the operations of a training step in the order forward_of and backward_of run them
// and tells the arena which buffers each reads or writes: a buffer's lifetime runs from the
// first to the last, and the arena lets buffers whose lifetimes do not meet share bytes. So a
// gradient lies where dead activations were, and a convolution's workspace where activations
// are dead or not yet written. Every buffer forward_of or backward_of touches must be named here
// at every operation that touches it: what is left out may be overwritten while still in use
// (the emulated engine tests compare every gradient with the CPU executor's, and the emulated
// cuDNN fills each workspace with NaN, so such a slip shows there). An evaluation forward runs a
// prefix of the same operations.
template <typename T>
void record_uses(Plan<T>& plan) {
  LifetimeArena& arena = plan.arena;
  arena.clear_uses();
  int op = 0;
  // Forward reads the input and writes the output; backward reads the input and the output's
  // gradient and writes the weight's gradient (through the scratch copy) and the input's.
  const auto conv_op = [&](Conv<T>& conv, bool forward) {
    ++op;
    if (conv.input != nullptr)
      arena.use(&conv.input->value, op);
    else
      arena.use(&plan.input_copy, op);
    if (conv.input != nullptr && !forward) arena.use(&conv.input->grad, op);
    if (forward) {
      arena.use(&conv.output.value, op);
      arena.use(&conv.forward_workspace, op);
    } else {
      arena.use(&conv.output.grad, op);
      arena.use(&plan.weight_grad_copy, op);
      arena.use(&conv.backward_workspace, op);
    }
  };
  // A BatchNorm with its ReLU and residual add folded in (whoever's kernels run them). Backward
  // reads the input and the output's gradient, and with a ReLU the output (its mask) unless it
  // recomputes it or reads the bits the forward wrote; it writes the input's gradient. Its
  // output's gradient is `output_grad`: the output's own, or for the downsample branch the block
  // output's.
  const auto batchnorm_op = [&](BatchNorm<T>& bn, bool forward, bool relu,
                                Activation<T>* residual, T* const* output_grad) {
    ++op;
    arena.use(&bn.input->value, op);
    arena.use(&bn.save_mean, op);
    arena.use(&bn.save_invstd, op);
    arena.use(&plan.bn_scratch, op);
    arena.use(&bn.relu_bits, op);
    if (forward) {
      arena.use(&bn.output->value, op);
      if (residual != nullptr) arena.use(&residual->value, op);
    } else {
      if (relu && !recomputes_relu_mask(plan, bn) && !reads_relu_bits(plan, bn))
        arena.use(&bn.output->value, op);
      arena.use(output_grad, op);
      arena.use(&bn.input->grad, op);
    }
  };

  // Kept from one step to the next: the logits until the next forward, the fc bias's ones and
  // the NHWC weight copies (rewritten by each forward, read by backward) for good.
  const int first = 0;
  arena.use(&plan.logits, first);
  arena.use(&plan.ones, first);
  arena.use(&plan.conv_weights, first);
  arena.use(&plan.input_copy, first);

  conv_op(plan.stem_conv, true);
  batchnorm_op(plan.stem_bn, true, true, nullptr, nullptr);
  if (plan.stem_maxpool) {
    ++op;
    arena.use(&plan.stem_out.value, op);
    arena.use(&plan.pooled.value, op);
    arena.use(&plan.pool_argmax, op);
  }
  for (Block<T>& block : plan.blocks) {
    conv_op(block.conv1, true);
    batchnorm_op(block.bn1, true, true, nullptr, nullptr);
    conv_op(block.conv2, true);
    if (block.has_downsample) {
      conv_op(block.downsample_conv, true);
      batchnorm_op(block.downsample_bn, true, false, nullptr, nullptr);
    }
    batchnorm_op(block.bn2, true, true, block.has_downsample ? &block.identity : block.input,
                 nullptr);
  }
  Activation<T>& last = plan.blocks.back().output;
  ++op;  // global average pooling
  arena.use(&last.value, op);
  arena.use(&plan.features.value, op);
  ++op;  // fc
  arena.use(&plan.features.value, op);
  arena.use(&plan.logits, op);

  ++op;  // the fc's backward, dlogits in T first
  arena.use(&plan.dlogits_copy, op);
  arena.use(&plan.features.value, op);
  arena.use(&plan.features.grad, op);
  arena.use(&plan.ones, op);
  ++op;  // global average pooling's backward
  arena.use(&plan.features.grad, op);
  arena.use(&last.grad, op);
  for (auto it = plan.blocks.rbegin(); it != plan.blocks.rend(); ++it) {
    Block<T>& block = *it;
    batchnorm_op(block.bn2, false, true, nullptr, &block.output.grad);
    conv_op(block.conv2, false);
    batchnorm_op(block.bn1, false, true, nullptr, &block.hidden.grad);
    // Without a downsample branch conv1 adds onto the block output's gradient, in its buffer.
    conv_op(block.conv1, false);
    if (block.has_downsample) {
      // From the block output's gradient, as bn2's backward masked it.
      batchnorm_op(block.downsample_bn, false, false, nullptr, &block.output.grad);
      conv_op(block.downsample_conv, false);
    }
  }
  if (plan.stem_maxpool) {
    ++op;
    arena.use(&plan.pooled.grad, op);
    arena.use(&plan.pool_argmax, op);
    arena.use(&plan.stem_out.grad, op);
  }
  batchnorm_op(plan.stem_bn, false, true, nullptr, &plan.stem_out.grad);
  conv_op(plan.stem_conv, false);

  const int last_op = op;
  arena.use(&plan.logits, last_op);
  arena.use(&plan.ones, last_op);
  arena.use(&plan.conv_weights, last_op);
}

// Plans the network into `plan`, allocates every buffer and chooses every algorithm for
// max_batch (see Executor's constructor).
template <typename T>
void build(Plan<T>& plan, const NetDesc& net, int max_batch, int height, int width,
           const MathPolicy& policy) {
  const ParamLayout& layout = plan.layout;
  ComputeContext& context = plan.context;
  plan.in_channels = net.stem_conv.in_channels;
  plan.height = height;
  plan.width = width;
  const size_t input_elements =
      static_cast<size_t>(max_batch) * plan.in_channels * height * width;
  if (Plan<T>::kMixed || plan.nhwc || plan.pixel_input)
    plan.arena.request(&plan.input_copy, input_elements);

  plan_conv<T>(plan, plan.stem_conv, net.stem_conv, nullptr, height, width, max_batch);
  const Activation<T>& stem_conv_out = plan.stem_conv.output;
  plan.stem_out.plan(plan.arena, max_batch, stem_conv_out.channels, stem_conv_out.height,
                     stem_conv_out.width, /*needs_grad=*/true);
  plan_batchnorm(plan, plan.stem_bn, net.stem_bn, &plan.stem_conv.output, &plan.stem_out,
                 BatchNormFusion::relu, max_batch);
  Activation<T>* current = &plan.stem_out;
  plan.stem_maxpool = net.stem_maxpool;
  if (net.stem_maxpool) {
    plan.pool_shape = {max_batch, current->channels, current->height, current->width, 3, 2, 1};
    plan.pooled.plan(plan.arena, max_batch, current->channels, plan.pool_shape.out_h(),
                     plan.pool_shape.out_w(), true);
    plan.arena.request(&plan.pool_argmax, plan.pooled.count(max_batch));
    current = &plan.pooled;
  }

  // Blocks hold pointers into each other, so the vector must never reallocate.
  plan.blocks.resize(net.blocks.size());
  for (size_t i = 0; i < net.blocks.size(); ++i) {
    const BasicBlockDesc& desc = net.blocks[i];
    Block<T>& block = plan.blocks[i];
    block.input = current;
    plan_conv(plan, block.conv1, desc.conv1, current, current->height, current->width, max_batch);
    const Activation<T>& c1 = block.conv1.output;
    block.hidden.plan(plan.arena, max_batch, c1.channels, c1.height, c1.width, true);
    plan_batchnorm(plan, block.bn1, desc.bn1, &block.conv1.output, &block.hidden,
                   BatchNormFusion::relu, max_batch);
    plan_conv(plan, block.conv2, desc.conv2, &block.hidden, c1.height, c1.width, max_batch);
    const Activation<T>& c2 = block.conv2.output;
    // Without a downsample branch the block's output gradient, once bn2's backward has masked
    // it in place, is the identity branch's share of the input's gradient: one buffer, onto
    // which conv1's backward adds its share, instead of a second buffer and an add.
    block.output.plan(plan.arena, max_batch, c2.channels, c2.height, c2.width,
                      /*needs_grad=*/desc.has_downsample);
    if (!desc.has_downsample) plan.arena.share(&block.output.grad, &current->grad);
    plan_batchnorm(plan, block.bn2, desc.bn2, &block.conv2.output, &block.output,
                   BatchNormFusion::add_relu, max_batch);
    block.has_downsample = desc.has_downsample;
    if (desc.has_downsample) {
      plan_conv(plan, block.downsample_conv, desc.downsample_conv, current, current->height,
                current->width, max_batch);
      const Activation<T>& d = block.downsample_conv.output;
      // Read by bn2's forward only: no gradient, and its bytes are free once bn2 has run.
      block.identity.plan(plan.arena, max_batch, d.channels, d.height, d.width, false);
      plan_batchnorm(plan, block.downsample_bn, desc.downsample_bn, &block.downsample_conv.output,
                     &block.identity, BatchNormFusion::none, max_batch);
    }
    current = &block.output;
  }

  plan.features.plan(plan.arena, max_batch, current->channels, 1, 1, true);
  plan.fc_weight = &layout.at("fc.weight");
  plan.fc_bias = &layout.at("fc.bias");
  plan.fc_in = net.fc.in_features;
  plan.fc_out = net.fc.out_features;
  plan.arena.request(&plan.logits, static_cast<size_t>(max_batch) * plan.fc_out);
  plan.arena.request(&plan.ones, static_cast<size_t>(max_batch));
  plan.list_layers();
  if constexpr (Plan<T>::kMixed)
    plan.arena.request(&plan.dlogits_copy, static_cast<size_t>(max_batch) * plan.fc_out);
  size_t largest_weight = 0, all_weights = 0;
  std::vector<WeightPermutation> permutations;
  for (Conv<T>* conv : plan.convs) {
    const size_t copy = copy_elements(*conv);
    largest_weight = std::max(largest_weight, copy);
    const ConvShape s = conv->layer->shape(1);
    WeightPermutation p;
    p.param_offset = static_cast<int64_t>(conv->weight->offset);
    p.copy_offset = static_cast<int64_t>(all_weights);
    conv->weight_copy_offset = all_weights;
    p.out_channels = s.out_channels;
    p.in_channels = s.in_channels;
    p.kernel = s.kernel;
    permutations.push_back(p);
    all_weights += copy;
  }
  if (plan.weight_grad_scratch()) plan.arena.request(&plan.weight_grad_copy, largest_weight);
  if (plan.nhwc) plan.arena.request(&plan.conv_weights, all_weights);
  if (plan.fused_bn) {
    for (const BatchNorm<T>* bn : plan.batchnorms)
      plan.bn_scratch_bytes = std::max(plan.bn_scratch_bytes,
                                       batchnorm_scratch_bytes(batchnorm_shape(plan, *bn, max_batch)));
    plan.arena.request(&plan.bn_scratch, plan.bn_scratch_bytes);
  }
  // Everything but the convolutions' workspaces, whose sizes the algorithms chosen below decide.
  record_uses(plan);
  plan.arena.allocate(context.stream());
  plan.arena_bytes_without_workspaces = plan.arena.bytes();
  if (plan.nhwc) {
    plan.weight_table = DeviceBuffer<WeightPermutation>(permutations.size());
    copy_to_device(plan.weight_table.get(), permutations.data(), permutations.size(),
                   context.stream());
    for (const WeightPermutation& p : permutations)
      plan.max_conv_out_channels = std::max(plan.max_conv_out_channels, p.out_channels);
    // The timed search below convolves with the real weights, as under NCHW.
    plan.refresh_conv_weights();
  }
  // PyTorch's flag for matrix products is torch.backends.cuda.matmul.allow_tf32 (off by default
  // since 1.12); here one setting governs convolutions and GEMMs alike. Under mixed precision the
  // fc's GEMMs are bfloat16 cublasGemmEx calls, which use tensor cores whatever the mode, and the
  // only float product left is the bias gradient's gemv, kept strict.
  const bool tf32_gemm = policy.allow_tf32 && !Plan<T>::kMixed;
  RDDP_CUBLAS_CHECK(cublasSetMathMode(
      context.cublas(), tf32_gemm ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));

  // Choose every algorithm for max_batch now, on the real buffers; each convolution's workspace
  // then gets the size its choices need.
  for (const BatchNorm<T>* bn : plan.batchnorms) bn->layer->prepare(max_batch, plan.descriptors);
  const size_t limit = search_workspace_limit();
  {
    const bool timed = policy.search == ConvAlgorithmSearch::timed;
    // The network's input is not ours, so a stand-in holds its place: the input's copy in T
    // where the plan has one, else a buffer of its own.
    DeviceBuffer<T> own_stand_in(timed && plan.input_copy == nullptr ? input_elements : 0);
    T* stand_in = plan.input_copy != nullptr ? plan.input_copy : own_stand_in.get();
    if (timed)
      RDDP_CUDA_CHECK(
          cudaMemsetAsync(stand_in, 0, input_elements * sizeof(T), context.stream()));
    const std::vector<SearchWorkspace> places =
        place_search_workspaces(plan, stand_in, max_batch, limit);
    // Only what fits nowhere in the arena is allocated beside it, for as long as the search runs.
    size_t outside = 0;
    for (const SearchWorkspace& place : places)
      if (timed && !place.in_arena) outside = std::max(outside, place.bytes);
    DeviceBuffer<std::byte> search_workspace(outside);
    plan.search_workspace_bytes = outside;
    for (size_t i = 0; i < plan.convs.size(); ++i) {
      Conv<T>& conv = *plan.convs[i];
      std::byte* workspace = places[i].in_arena ? plan.arena.data() + places[i].begin
                                                : search_workspace.get();
      const ConvSearchBuffers buffers =
          search_buffers(plan, conv, stand_in, workspace, places[i].bytes);
      const size_t needed = conv.layer->prepare(max_batch, context.cudnn(), plan.algorithms,
                                                plan.descriptors, timed ? &buffers : nullptr,
                                                places[i].limit);
      conv.workspace_bytes = std::max(needed, kMinConvWorkspaceBytes);
    }
    context.synchronize();
  }

  // Now the plan again, with the workspaces: the arena is laid out anew and every pointer into
  // it moves. Nothing in it needs keeping yet.
  for (Conv<T>* conv : plan.convs) {
    plan.arena.request(&conv->forward_workspace, conv->workspace_bytes);
    plan.arena.request(&conv->backward_workspace, conv->workspace_bytes);
  }
  record_uses(plan);
  plan.arena.allocate(context.stream());
  plan.workspace_bytes_added = plan.arena.bytes() - plan.arena_bytes_without_workspaces;
  const std::vector<float> ones(static_cast<size_t>(max_batch), 1.0f);
  copy_to_device(plan.ones, ones.data(), ones.size(), context.stream());
}

template <typename T>
void check_batch_of(const Plan<T>& plan, int max_batch, int batch, bool training) {
  if (batch < 1 || batch > max_batch)
    fail("batch of ", batch, " images does not fit an executor built for 1..", max_batch);
  if (training)
    for (const BatchNorm<T>* bn : plan.batchnorms) bn->layer->check_trainable(batch);
}

template <typename T>
const float* forward_of(Plan<T>& plan, const NetworkInput& input, int batch, bool training) {
  if (!plan.stem_conv.layer->prepared(batch)) {
    for (Conv<T>* conv : plan.convs) {
      const size_t needed = conv->layer->prepare(batch, plan.context.cudnn(), plan.algorithms,
                                                 plan.descriptors, nullptr, conv->workspace_bytes);
      RDDP_ASSERT(needed <= conv->workspace_bytes);
    }
    for (const BatchNorm<T>* bn : plan.batchnorms) {
      // (cuDNN's *Ex calls check their memory themselves: BatchNormLayer::check_ex.)
      bn->layer->prepare(batch, plan.descriptors);
      if (plan.fused_bn &&
          batchnorm_scratch_bytes(batchnorm_shape(plan, *bn, batch)) > plan.bn_scratch_bytes)
        fail("internal error: a batch of ", batch, " images needs more BatchNorm scratch than ",
             "the largest batch, which it was sized for; please report this");
    }
  }
  cudaStream_t stream = plan.stream();
  if (input.pixels != nullptr) {
    // ToTensor + Normalize, then what the two branches below do, in one launch.
    if (!plan.pixel_input)
      fail("internal error: an executor built for float input was given pixels; please report ",
           "this");
    pixels_to_input(batch, plan.in_channels, plan.height, plan.width, input.pixels,
                    input.mean_stddev, plan.input_copy, plan.format, stream);
    plan.input = plan.input_copy;
  } else if (plan.nhwc) {
    // model.to(memory_format=torch.channels_last) with the input moved likewise (and, under
    // autocast, cast to bfloat16 by the first convolution): one launch does both.
    nchw_to_nhwc(batch, plan.in_channels, plan.height, plan.width, input.images, plan.input_copy,
                 stream);
    plan.input = plan.input_copy;
  } else if constexpr (Plan<T>::kMixed) {
    // autocast casts the float input of the first convolution to bfloat16: one launch here.
    convert(static_cast<int64_t>(batch) * plan.in_channels * plan.height * plan.width,
            input.images, plan.input_copy, stream);
    plan.input = plan.input_copy;
  } else {
    plan.input = input.images;
  }
  plan.refresh_conv_weights();
  plan.batch = batch;
  plan.has_training_forward = training;

  conv_forward(plan, plan.stem_conv, batch);
  Activation<T>& stem_out = plan.stem_out;
  PoolShape pool_shape = plan.pool_shape;
  pool_shape.batch = batch;
  if (plan.stem_maxpool && training && recomputes_relu_mask(plan, plan.stem_bn)) {
    // Nothing but the max-pool reads the stem BatchNorm's output in training (its backward
    // recomputes the ReLU's mask), so the pool normalises on the fly and the output is never
    // stored: at 224x224 the network's largest activation, written once and read once less.
    const BatchNorm<T>& bn = plan.stem_bn;
    batchnorm_forward<T>(plan, bn, batch, training, nullptr, /*relu=*/true,
                         /*store_output=*/false);
    maxpool_forward_of_batchnorm_relu(
        pool_shape, bn.input->value,
        {bn.save_mean, bn.save_invstd, plan.param(bn.weight), plan.param(bn.bias)},
        plan.pooled.value, plan.pool_argmax, stream, plan.format);
  } else {
    batchnorm_forward<T>(plan, plan.stem_bn, batch, training, nullptr, /*relu=*/true);
    if (plan.stem_maxpool)
      maxpool_forward(pool_shape, stem_out.value, plan.pooled.value, plan.pool_argmax, stream,
                      plan.format);
  }

  for (Block<T>& block : plan.blocks) {
    conv_forward(plan, block.conv1, batch);
    batchnorm_forward<T>(plan, block.bn1, batch, training, nullptr, /*relu=*/true);
    conv_forward(plan, block.conv2, batch);
    // The identity branch first: bn2's output is relu(bn2 + identity).
    const T* identity = block.input->value;
    if (block.has_downsample) {
      conv_forward(plan, block.downsample_conv, batch);
      batchnorm_forward<T>(plan, block.downsample_bn, batch, training, nullptr, /*relu=*/false);
      identity = block.identity.value;
    }
    batchnorm_forward(plan, block.bn2, batch, training, identity, /*relu=*/true);
  }

  const Activation<T>& last = plan.blocks.back().output;
  global_avgpool_forward(batch, last.channels, last.height * last.width, last.value,
                         plan.features.value, stream, plan.format);
  linear_forward(plan.context.cublas(), batch, plan.fc_in, plan.fc_out, plan.features.value,
                 plan.weight(plan.fc_weight), plan.param(plan.fc_bias), plan.logits);
  return plan.logits;
}

template <typename T>
void backward_of(Plan<T>& plan, const float* dlogits, const GradReadyFn& ready) {
  if (!plan.has_training_forward)
    fail("backward needs a training-mode forward since the last backward (evaluation mode keeps ",
         "no batch statistics, and backward reuses the blocks' activations for the stem's ",
         "gradients)");
  plan.has_training_forward = false;
  const int batch = plan.batch;
  cudaStream_t stream = plan.stream();
  cublasHandle_t cublas = plan.context.cublas();

  // The fc's products read dlogits in the activations' type (cublas_linear.h says why); the
  // bias gradient sums the float dlogits.
  const T* fc_dlogits = nullptr;
  if constexpr (Plan<T>::kMixed) {
    convert(static_cast<int64_t>(batch) * plan.fc_out, dlogits, plan.dlogits_copy, stream);
    fc_dlogits = plan.dlogits_copy;
  } else {
    fc_dlogits = dlogits;
  }
  linear_backward_weight(cublas, batch, plan.fc_in, plan.fc_out, plan.features.value, fc_dlogits,
                         plan.grad(plan.fc_weight));
  linear_backward_bias(cublas, batch, plan.fc_out, dlogits, plan.ones, plan.grad(plan.fc_bias));
  if (ready) {
    ready(*plan.fc_weight);
    ready(*plan.fc_bias);
  }
  linear_backward_data(cublas, batch, plan.fc_in, plan.fc_out, fc_dlogits,
                       plan.weight(plan.fc_weight), plan.features.grad);
  Activation<T>& last = plan.blocks.back().output;
  global_avgpool_backward(batch, last.channels, last.height * last.width, plan.features.grad,
                          last.grad, stream, plan.format);

  for (auto it = plan.blocks.rbegin(); it != plan.blocks.rend(); ++it) {
    Block<T>& block = *it;
    // d(loss)/d(bn2 + identity): the block output's gradient through its ReLU, masked in place,
    // for both branches receive it.
    T* sum_grad = block.output.grad;
    batchnorm_backward(plan, block.bn2, batch, sum_grad, /*relu=*/true, /*keep_masked=*/true,
                       ready);
    conv_backward(plan, block.conv2, batch, block.hidden.grad, false, ready);
    batchnorm_backward(plan, block.bn1, batch, block.hidden.grad, /*relu=*/true,
                       /*keep_masked=*/false, ready);
    // With a downsample branch conv1 writes the block input's gradient and the branch adds its
    // share on top. Without, the input's gradient is sum_grad's buffer (see build), which
    // holds the identity branch's share already: conv1 adds its own.
    T* input_grad = block.input->grad;
    RDDP_ASSERT(block.has_downsample || input_grad == sum_grad);
    conv_backward(plan, block.conv1, batch, input_grad, /*accumulate=*/!block.has_downsample,
                  ready);
    if (block.has_downsample) {
      batchnorm_backward(plan, block.downsample_bn, batch, sum_grad, /*relu=*/false,
                         /*keep_masked=*/false, ready);
      conv_backward(plan, block.downsample_conv, batch, input_grad, true, ready);
    }
  }

  Activation<T>& stem_out = plan.stem_out;
  PoolShape pool_shape = plan.pool_shape;
  pool_shape.batch = batch;
  if (plan.stem_maxpool)
    maxpool_backward(pool_shape, plan.pooled.grad, plan.pool_argmax, stem_out.grad,
                     plan.stream(), plan.format);
  batchnorm_backward(plan, plan.stem_bn, batch, stem_out.grad, /*relu=*/true,
                     /*keep_masked=*/false, ready);
  conv_backward<T>(plan, plan.stem_conv, batch, nullptr, false, ready);
}

}  // namespace

namespace detail {

// The executor's work for one activation type; Executor forwards to it.
class ExecutorImpl {
 public:
  virtual ~ExecutorImpl() = default;
  virtual void check_batch(int batch, bool training) const = 0;
  virtual const float* forward(const NetworkInput& input, int batch, bool training) = 0;
  virtual void backward(const float* dlogits, const GradReadyFn& ready) = 0;
  virtual size_t workspace_bytes() const = 0;
  virtual size_t activation_bytes() const = 0;
  virtual size_t search_workspace_bytes() const = 0;
  virtual const ConvAlgorithmCache& algorithms() const = 0;
};

}  // namespace detail

namespace {

template <typename T>
class TypedExecutor final : public detail::ExecutorImpl {
 public:
  TypedExecutor(const NetDesc& net, const ParamLayout& layout, const DeviceModel& model,
                int max_batch, int height, int width, ComputeContext& context,
                const ExecutorOptions& options)
      : max_batch_(max_batch), plan_(layout, model, context, options) {
    build(plan_, net, max_batch, height, width, options.math);
  }
  void check_batch(int batch, bool training) const override {
    check_batch_of(plan_, max_batch_, batch, training);
  }
  const float* forward(const NetworkInput& input, int batch, bool training) override {
    check_batch(batch, training);
    return forward_of(plan_, input, batch, training);
  }
  void backward(const float* dlogits, const GradReadyFn& ready) override {
    backward_of(plan_, dlogits, ready);
  }
  size_t workspace_bytes() const override { return plan_.workspace_bytes_added; }
  size_t activation_bytes() const override { return plan_.arena_bytes_without_workspaces; }
  size_t search_workspace_bytes() const override { return plan_.search_workspace_bytes; }
  const ConvAlgorithmCache& algorithms() const override { return plan_.algorithms; }

 private:
  int max_batch_;
  Plan<T> plan_;
};

std::unique_ptr<detail::ExecutorImpl> make_impl(const NetDesc& net, const ParamLayout& layout,
                                                const DeviceModel& model, int max_batch,
                                                int height, int width, ComputeContext& context,
                                                const ExecutorOptions& options) {
  switch (options.math.data_type) {
    case CUDNN_DATA_FLOAT:
      return std::make_unique<TypedExecutor<float>>(net, layout, model, max_batch, height, width,
                                                    context, options);
    case CUDNN_DATA_BFLOAT16:
      if (model.params_bf16 == nullptr)
        fail("internal error: a bfloat16 executor needs the bfloat16 copy of the parameters; ",
             "please report this");
      return std::make_unique<TypedExecutor<__nv_bfloat16>>(net, layout, model, max_batch, height,
                                                            width, context, options);
    case CUDNN_DATA_HALF:
      if (model.params_fp16 == nullptr)
        fail("internal error: a float16 executor needs the float16 copy of the parameters; ",
             "please report this");
      return std::make_unique<TypedExecutor<__half>>(net, layout, model, max_batch, height, width,
                                                     context, options);
    default:
      fail("the CUDA executor stores activations in float32, bfloat16 or float16, not ",
           to_string(options.math.data_type));
  }
}

}  // namespace

Executor::Executor(const NetDesc& net, const ParamLayout& layout, const DeviceModel& model,
                   int max_batch, int height, int width, ComputeContext& context,
                   const ExecutorOptions& options)
    : max_batch_(max_batch) {
  if (max_batch < 1) fail("batch size must be >= 1, got ", max_batch);
  if (height < 1 || width < 1) fail("input images must be at least 1x1, got ", height, "x", width);
  impl_ = make_impl(net, layout, model, max_batch, height, width, context, options);
}

Executor::~Executor() = default;

size_t Executor::workspace_bytes() const { return impl_->workspace_bytes(); }
size_t Executor::activation_bytes() const { return impl_->activation_bytes(); }
size_t Executor::search_workspace_bytes() const { return impl_->search_workspace_bytes(); }
const ConvAlgorithmCache& Executor::algorithms() const { return impl_->algorithms(); }

void Executor::check_batch(int batch, bool training) const { impl_->check_batch(batch, training); }

const float* Executor::forward(const NetworkInput& input, int batch, bool training) {
  return impl_->forward(input, batch, training);
}

void Executor::backward(const float* dlogits, const GradReadyFn& ready) {
  impl_->backward(dlogits, ready);
}

}  // namespace rddp::cuda
