#include "resnet_ddp/cpu/executor.h"

#include <algorithm>
#include <cmath>

#include "resnet_ddp/cpu/layers.h"
#include "resnet_ddp/error.h"

namespace rddp::cpu {

namespace {

// torch.nn.BatchNorm2d defaults, which torchvision's ResNet keeps.
constexpr double kBatchNormMomentum = 0.1;
constexpr double kBatchNormEps = 1e-5;

// An activation and its gradient, [batch, channels, height, width], sized for max_batch.
template <typename T>
struct Activation {
  int channels = 0, height = 0, width = 0;
  std::vector<T> value, grad;

  void allocate(int max_batch, int c, int h, int w) {
    channels = c;
    height = h;
    width = w;
    value.assign(static_cast<size_t>(max_batch) * c * h * w, T(0));
    grad.assign(value.size(), T(0));
  }
  int64_t count(int batch) const { return static_cast<int64_t>(batch) * channels * height * width; }
};

template <typename T>
struct Conv {
  const ConvDesc* desc = nullptr;
  const TensorInfo* weight = nullptr;
  Activation<T>* input = nullptr;
  Activation<T> output;

  ConvShape shape(int batch) const {
    return {batch, desc->in_channels, input->height, input->width,
            desc->out_channels, desc->kernel, desc->stride, desc->pad};
  }
};

template <typename T>
struct BatchNorm {
  const TensorInfo *weight = nullptr, *bias = nullptr;
  const TensorInfo *running_mean = nullptr, *running_var = nullptr, *counter = nullptr;
  Activation<T>* input = nullptr;
  Activation<T> output;
  std::vector<T> save_mean, save_invstd;

  BatchNormShape shape(int batch) const {
    return {batch, input->channels, input->height, input->width};
  }
};

template <typename T>
struct Block {
  Activation<T>* input = nullptr;
  Conv<T> conv1, conv2;
  BatchNorm<T> bn1, bn2;
  bool has_downsample = false;
  Conv<T> downsample_conv;
  BatchNorm<T> downsample_bn;
  std::vector<T> downsample_input_grad;  // the identity path's share of input.grad
  Activation<T> output;  // relu(bn2 + identity)
};

}  // namespace

template <typename T>
struct Executor<T>::Plan {
  Activation<T> input;
  Conv<T> stem_conv;
  BatchNorm<T> stem_bn;  // its output is ReLU'd in place
  bool stem_maxpool = false;
  PoolShape pool_shape;
  Activation<T> pooled;
  std::vector<int32_t> pool_argmax;
  std::vector<Block<T>> blocks;
  Activation<T> features;  // [batch, channels, 1, 1] after global average pooling
  const TensorInfo *fc_weight = nullptr, *fc_bias = nullptr;
  Activation<T> logits;
  int batch = 0;
  bool has_training_forward = false;
};

namespace {

template <typename T>
void plan_conv(Conv<T>& conv, const ConvDesc& desc, const ParamLayout& layout, Activation<T>* input,
               int max_batch) {
  conv.desc = &desc;
  conv.weight = &layout.at(desc.name + ".weight");
  conv.input = input;
  conv.output.allocate(max_batch, desc.out_channels,
                       window_output_size(input->height, desc.kernel, desc.stride, desc.pad),
                       window_output_size(input->width, desc.kernel, desc.stride, desc.pad));
}

template <typename T>
void plan_batchnorm(BatchNorm<T>& bn, const BatchNormDesc& desc, const ParamLayout& layout,
                    Activation<T>* input, int max_batch) {
  bn.weight = &layout.at(desc.name + ".weight");
  bn.bias = &layout.at(desc.name + ".bias");
  bn.running_mean = &layout.at(desc.name + ".running_mean");
  bn.running_var = &layout.at(desc.name + ".running_var");
  bn.counter = &layout.at(desc.name + ".num_batches_tracked");
  bn.input = input;
  bn.output.allocate(max_batch, input->channels, input->height, input->width);
  bn.save_mean.assign(desc.channels, T(0));
  bn.save_invstd.assign(desc.channels, T(0));
}

template <typename T>
void conv_forward(ModelState<T>& state, Conv<T>& conv, int batch) {
  conv2d_forward(conv.shape(batch), conv.input->value.data(), state.params.data() + conv.weight->offset,
                 conv.output.value.data());
}

// Gradient of the weight from output.grad; the input gradient too unless `input_grad` is null.
template <typename T>
void conv_backward(ModelState<T>& state, Conv<T>& conv, int batch, T* input_grad,
                   const GradReadyFn& ready) {
  const ConvShape shape = conv.shape(batch);
  conv2d_backward_filter(shape, conv.input->value.data(), conv.output.grad.data(),
                         state.grads.data() + conv.weight->offset);
  if (ready) ready(*conv.weight);
  if (input_grad)
    conv2d_backward_data(shape, conv.output.grad.data(), state.params.data() + conv.weight->offset,
                         input_grad);
}

template <typename T>
void batchnorm_forward(ModelState<T>& state, BatchNorm<T>& bn, int batch, bool training) {
  const T* gamma = state.params.data() + bn.weight->offset;
  const T* beta = state.params.data() + bn.bias->offset;
  T* running_mean = state.running.data() + bn.running_mean->offset;
  T* running_var = state.running.data() + bn.running_var->offset;
  if (training) {
    batchnorm_forward_train(bn.shape(batch), bn.input->value.data(), gamma, beta,
                            static_cast<T>(kBatchNormMomentum), static_cast<T>(kBatchNormEps),
                            running_mean, running_var, bn.output.value.data(), bn.save_mean.data(),
                            bn.save_invstd.data());
    state.counters[bn.counter->offset] += 1;
  } else {
    batchnorm_forward_eval(bn.shape(batch), bn.input->value.data(), gamma, beta, running_mean,
                           running_var, static_cast<T>(kBatchNormEps), bn.output.value.data());
  }
}

// From output.grad to input.grad, writing the gradients of weight and bias.
template <typename T>
void batchnorm_backward(ModelState<T>& state, BatchNorm<T>& bn, int batch, const GradReadyFn& ready) {
  cpu::batchnorm_backward(bn.shape(batch), bn.input->value.data(), bn.output.grad.data(),
                          state.params.data() + bn.weight->offset, bn.save_mean.data(),
                          bn.save_invstd.data(), bn.input->grad.data(),
                          state.grads.data() + bn.weight->offset, state.grads.data() + bn.bias->offset);
  if (ready) {
    ready(*bn.weight);
    ready(*bn.bias);
  }
}

}  // namespace

template <typename T>
Executor<T>::Executor(ModelState<T>& state, int max_batch, int height, int width)
    : state_(state), max_batch_(max_batch), height_(height), width_(width), plan_(new Plan) {
  if (max_batch < 1) fail("batch size must be >= 1, got ", max_batch);
  if (height < 1 || width < 1) fail("input images must be at least 1x1, got ", height, "x", width);
  const NetDesc& net = state.net;
  const ParamLayout& layout = state.layout;
  Plan& plan = *plan_;

  plan.input.allocate(max_batch, state.spec.in_channels, height, width);
  plan_conv(plan.stem_conv, net.stem_conv, layout, &plan.input, max_batch);
  plan_batchnorm(plan.stem_bn, net.stem_bn, layout, &plan.stem_conv.output, max_batch);
  Activation<T>* current = &plan.stem_bn.output;
  plan.stem_maxpool = net.stem_maxpool;
  if (net.stem_maxpool) {
    plan.pool_shape = {max_batch, current->channels, current->height, current->width, 3, 2, 1};
    plan.pooled.allocate(max_batch, current->channels, plan.pool_shape.out_h(), plan.pool_shape.out_w());
    plan.pool_argmax.assign(plan.pooled.value.size(), 0);
    current = &plan.pooled;
  }

  // Blocks hold pointers into each other, so the vector must never reallocate.
  plan.blocks.resize(net.blocks.size());
  for (size_t i = 0; i < net.blocks.size(); ++i) {
    const BasicBlockDesc& desc = net.blocks[i];
    Block<T>& block = plan.blocks[i];
    block.input = current;
    plan_conv(block.conv1, desc.conv1, layout, current, max_batch);
    plan_batchnorm(block.bn1, desc.bn1, layout, &block.conv1.output, max_batch);
    plan_conv(block.conv2, desc.conv2, layout, &block.bn1.output, max_batch);
    plan_batchnorm(block.bn2, desc.bn2, layout, &block.conv2.output, max_batch);
    block.has_downsample = desc.has_downsample;
    if (desc.has_downsample) {
      plan_conv(block.downsample_conv, desc.downsample_conv, layout, current, max_batch);
      plan_batchnorm(block.downsample_bn, desc.downsample_bn, layout, &block.downsample_conv.output,
                     max_batch);
      block.downsample_input_grad.assign(current->value.size(), T(0));
    }
    const Activation<T>& out = block.bn2.output;
    block.output.allocate(max_batch, out.channels, out.height, out.width);
    current = &block.output;
  }

  plan.features.allocate(max_batch, current->channels, 1, 1);
  plan.fc_weight = &layout.at("fc.weight");
  plan.fc_bias = &layout.at("fc.bias");
  plan.logits.allocate(max_batch, net.fc.out_features, 1, 1);
}

template <typename T>
Executor<T>::~Executor() = default;

template <typename T>
const T* Executor<T>::forward(const T* input, int batch, bool training) {
  if (batch < 1 || batch > max_batch_)
    fail("batch of ", batch, " images does not fit an executor built for 1..", max_batch_);
  Plan& plan = *plan_;
  ModelState<T>& state = state_;
  plan.batch = batch;
  plan.has_training_forward = training;
  std::copy_n(input, plan.input.count(batch), plan.input.value.data());
  ties_.clear();
  // Notes the ties among the inputs of a ReLU about to run in place on `a`.
  const auto watch = [&](const BatchNorm<T>& bn, const Activation<T>& a) {
    if (training && tie_margin_ > 0.0)
      note_relu_ties(bn.bias, a.value.data(), batch, a.channels,
                     static_cast<int64_t>(a.height) * a.width);
  };

  conv_forward(state, plan.stem_conv, batch);
  batchnorm_forward(state, plan.stem_bn, batch, training);
  Activation<T>& stem_out = plan.stem_bn.output;
  watch(plan.stem_bn, stem_out);
  relu_forward(stem_out.count(batch), stem_out.value.data(), stem_out.value.data());
  if (plan.stem_maxpool) {
    PoolShape shape = plan.pool_shape;
    shape.batch = batch;
    maxpool_forward(shape, stem_out.value.data(), plan.pooled.value.data(), plan.pool_argmax.data());
  }

  for (Block<T>& block : plan.blocks) {
    conv_forward(state, block.conv1, batch);
    batchnorm_forward(state, block.bn1, batch, training);
    Activation<T>& hidden = block.bn1.output;
    watch(block.bn1, hidden);
    relu_forward(hidden.count(batch), hidden.value.data(), hidden.value.data());
    conv_forward(state, block.conv2, batch);
    batchnorm_forward(state, block.bn2, batch, training);
    const T* identity = block.input->value.data();
    if (block.has_downsample) {
      conv_forward(state, block.downsample_conv, batch);
      batchnorm_forward(state, block.downsample_bn, batch, training);
      identity = block.downsample_bn.output.value.data();
    }
    const int64_t count = block.output.count(batch);
    add(count, block.bn2.output.value.data(), identity, block.output.value.data());
    watch(block.bn2, block.output);
    relu_forward(count, block.output.value.data(), block.output.value.data());
  }

  const Activation<T>& last = plan.blocks.back().output;
  global_avgpool_forward(batch, last.channels, last.height * last.width, last.value.data(),
                         plan.features.value.data());
  linear_forward(batch, state.net.fc.in_features, state.net.fc.out_features,
                 plan.features.value.data(), state.params.data() + plan.fc_weight->offset,
                 state.params.data() + plan.fc_bias->offset, plan.logits.value.data());
  return plan.logits.value.data();
}

template <typename T>
void Executor<T>::backward(const T* dlogits, const GradReadyFn& ready) {
  Plan& plan = *plan_;
  ModelState<T>& state = state_;
  if (!plan.has_training_forward)
    fail("backward needs a training-mode forward first (evaluation mode keeps no batch statistics)");
  const int batch = plan.batch;

  linear_backward(batch, state.net.fc.in_features, state.net.fc.out_features,
                  plan.features.value.data(), state.params.data() + plan.fc_weight->offset, dlogits,
                  plan.features.grad.data(), state.grads.data() + plan.fc_weight->offset,
                  state.grads.data() + plan.fc_bias->offset);
  if (ready) {
    ready(*plan.fc_weight);
    ready(*plan.fc_bias);
  }
  Activation<T>& last = plan.blocks.back().output;
  global_avgpool_backward(batch, last.channels, last.height * last.width, plan.features.grad.data(),
                          last.grad.data());

  for (auto it = plan.blocks.rbegin(); it != plan.blocks.rend(); ++it) {
    Block<T>& block = *it;
    const int64_t count = block.output.count(batch);
    // d(loss)/d(bn2 + identity): through the final ReLU. Both branches receive it.
    T* sum_grad = block.output.grad.data();
    relu_backward(count, block.output.value.data(), sum_grad, sum_grad);

    std::copy_n(sum_grad, count, block.bn2.output.grad.data());
    batchnorm_backward(state, block.bn2, batch, ready);
    conv_backward(state, block.conv2, batch, block.bn1.output.grad.data(), ready);
    Activation<T>& hidden = block.bn1.output;
    relu_backward(hidden.count(batch), hidden.value.data(), hidden.grad.data(), hidden.grad.data());
    batchnorm_backward(state, block.bn1, batch, ready);
    // conv1 writes the block input's gradient; the identity branch is added on top.
    conv_backward(state, block.conv1, batch, block.input->grad.data(), ready);
    T* input_grad = block.input->grad.data();
    const int64_t input_count = block.input->count(batch);
    if (block.has_downsample) {
      std::copy_n(sum_grad, count, block.downsample_bn.output.grad.data());
      batchnorm_backward(state, block.downsample_bn, batch, ready);
      T* identity_grad = block.downsample_input_grad.data();
      conv_backward(state, block.downsample_conv, batch, identity_grad, ready);
      add(input_count, input_grad, identity_grad, input_grad);
    } else {
      add(input_count, input_grad, sum_grad, input_grad);
    }
  }

  Activation<T>& stem_out = plan.stem_bn.output;
  if (plan.stem_maxpool) {
    PoolShape shape = plan.pool_shape;
    shape.batch = batch;
    maxpool_backward(shape, plan.pooled.grad.data(), plan.pool_argmax.data(), stem_out.grad.data());
  }
  relu_backward(stem_out.count(batch), stem_out.value.data(), stem_out.grad.data(), stem_out.grad.data());
  batchnorm_backward(state, plan.stem_bn, batch, ready);
  conv_backward(state, plan.stem_conv, batch, static_cast<T*>(nullptr), ready);
}

template <typename T>
void Executor<T>::note_relu_ties(const TensorInfo* shift, const T* inputs, int batch,
                                 int channels, int64_t plane) {
  const int64_t count = static_cast<int64_t>(batch) * channels * plane;
  double scale = 0.0;
  for (int64_t i = 0; i < count; ++i) scale = std::max(scale, std::fabs(double(inputs[i])));
  const double margin = tie_margin_ * scale;
  for (int64_t i = 0; i < count; ++i)
    if (std::fabs(double(inputs[i])) <= margin)
      ties_.push_back({shift, static_cast<int>((i / plane) % channels), double(inputs[i]), scale});
}

template class Executor<float>;
template class Executor<double>;

}  // namespace rddp::cpu
