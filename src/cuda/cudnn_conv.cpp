#include "resnet_ddp/cuda/cudnn_conv.h"

#include <algorithm>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/cudnn_check.h"
#include "resnet_ddp/cuda/conv_graph.h"
#include "resnet_ddp/error.h"

namespace rddp::cuda {

namespace {

void check_workspace(const CudnnCall& call, const ConvAlgorithm& algorithm) {
  RDDP_ASSERT(call.workspace_bytes >= algorithm.workspace_bytes);
}

}  // namespace

ConvLayer::ConvLayer(const ConvShape& geometry, bool needs_input_grad, cudnnDataType_t data_type,
                     cudnnTensorFormat_t format)
    : geometry_(geometry),
      needs_input_grad_(needs_input_grad),
      data_type_(data_type),
      format_(format),
      filter_(make_filter_descriptor(geometry.out_channels, geometry.in_channels, geometry.kernel,
                                     data_type, format)) {
  if (geometry.in_channels < 1 || geometry.out_channels < 1 || geometry.kernel < 1 ||
      geometry.stride < 1 || geometry.pad < 0 || geometry.in_h < 1 || geometry.in_w < 1 ||
      geometry.in_h + 2 * geometry.pad < geometry.kernel ||
      geometry.in_w + 2 * geometry.pad < geometry.kernel)
    fail("convolution: ", geometry.in_channels, "->", geometry.out_channels, " channels, kernel ",
         geometry.kernel, ", stride ", geometry.stride, ", padding ", geometry.pad,
         " cannot be applied to a ", geometry.in_h, "x", geometry.in_w, " input");
}

ConvShape ConvLayer::shape(int batch) const {
  ConvShape shape = geometry_;
  shape.batch = batch;
  return shape;
}

size_t ConvLayer::prepare(int batch, cudnnHandle_t handle, ConvAlgorithmCache& algorithms,
                          TensorDescriptorCache& descriptors, const ConvSearchBuffers* buffers,
                          size_t workspace_limit) {
  RDDP_ASSERT(descriptors.type() == data_type_ && algorithms.policy().data_type == data_type_);
  RDDP_ASSERT(descriptors.format() == format_ && algorithms.policy().format == format_);
  auto found = batches_.find(batch);
  if (found == batches_.end()) {
    const ConvShape s = shape(batch);
    Prepared prepared;
    prepared.x = &descriptors.get(batch, s.in_channels, s.in_h, s.in_w);
    prepared.y = &descriptors.get(batch, s.out_channels, s.out_h(), s.out_w());
    prepared.forward =
        &algorithms.choose(handle, s, ConvDirection::forward, buffers, workspace_limit);
    if (needs_input_grad_) {
      prepared.backward_data =
          &algorithms.choose(handle, s, ConvDirection::backward_data, buffers, workspace_limit);
      // The same choice under the legacy API, which takes beta per call.
      prepared.backward_data_accumulate = &algorithms.choose(
          handle, s, ConvDirection::backward_data, buffers, workspace_limit, /*accumulate=*/true);
    }
    prepared.backward_filter =
        &algorithms.choose(handle, s, ConvDirection::backward_filter, buffers, workspace_limit);
    found = batches_.emplace(batch, prepared).first;
  }
  const Prepared& p = found->second;
  size_t bytes = std::max(p.forward->workspace_bytes, p.backward_filter->workspace_bytes);
  if (p.backward_data != nullptr)
    bytes = std::max({bytes, p.backward_data->workspace_bytes,
                      p.backward_data_accumulate->workspace_bytes});
  return bytes;
}

size_t ConvLayer::search_workspace_bytes(int batch, cudnnHandle_t handle,
                                         const ConvAlgorithmCache& algorithms,
                                         size_t workspace_limit) const {
  const ConvShape s = shape(batch);
  size_t bytes = std::max(
      algorithms.search_workspace_bytes(handle, s, ConvDirection::forward, workspace_limit),
      algorithms.search_workspace_bytes(handle, s, ConvDirection::backward_filter,
                                        workspace_limit));
  if (needs_input_grad_)
    for (const bool accumulate : {false, true})
      bytes = std::max(bytes, algorithms.search_workspace_bytes(
                                  handle, s, ConvDirection::backward_data, workspace_limit,
                                  accumulate));
  return bytes;
}

const ConvLayer::Prepared& ConvLayer::at(int batch) const {
  const auto found = batches_.find(batch);
  RDDP_ASSERT(found != batches_.end());
  return found->second;
}

void ConvLayer::check_type(cudnnDataType_t type) const {
  if (type != data_type_)
    fail("internal error: a convolution of ", to_string(data_type_), " data was given ",
         to_string(type), " buffers; please report this");
}

// alpha and beta are float for float and bfloat16 data alike: cuDNN takes them as float for
// every data type but double.
void ConvLayer::forward_untyped(const CudnnCall& call, int batch, const void* x, const void* w,
                                void* y) const {
  const Prepared& p = at(batch);
  check_workspace(call, *p.forward);
  if (p.forward->graph) {
    execute_conv_graph(call.handle, *p.forward->graph, x, w, y, call.workspace,
                       call.workspace_bytes);
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  RDDP_CUDNN_CHECK(cudnnConvolutionForward(
      call.handle, &one, p.x->get(), x, filter_->get(), w, p.forward->descriptor->get(),
      static_cast<cudnnConvolutionFwdAlgo_t>(p.forward->algorithm), call.workspace,
      call.workspace_bytes, &zero, p.y->get(), y));
}

void ConvLayer::backward_data_untyped(const CudnnCall& call, int batch, const void* dy,
                                      const void* w, void* dx, float beta) const {
  const Prepared& p = at(batch);
  RDDP_ASSERT(p.backward_data != nullptr);
  const ConvAlgorithm& choice = beta == 0.0f ? *p.backward_data : *p.backward_data_accumulate;
  check_workspace(call, choice);
  if (choice.graph) {
    // A graph-API plan has its beta built in: 0 or 1, as prepared.
    RDDP_ASSERT(beta == 0.0f || beta == 1.0f);
    execute_conv_graph(call.handle, *choice.graph, dx, w, dy, call.workspace,
                       call.workspace_bytes);
    return;
  }
  const float one = 1.0f;
  RDDP_CUDNN_CHECK(cudnnConvolutionBackwardData(
      call.handle, &one, filter_->get(), w, p.y->get(), dy, choice.descriptor->get(),
      static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algorithm), call.workspace,
      call.workspace_bytes, &beta, p.x->get(), dx));
}

void ConvLayer::backward_filter_untyped(const CudnnCall& call, int batch, const void* x,
                                        const void* dy, void* dw) const {
  const Prepared& p = at(batch);
  check_workspace(call, *p.backward_filter);
  if (p.backward_filter->graph) {
    execute_conv_graph(call.handle, *p.backward_filter->graph, x, dw, dy, call.workspace,
                       call.workspace_bytes);
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  RDDP_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      call.handle, &one, p.x->get(), x, p.y->get(), dy, p.backward_filter->descriptor->get(),
      static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.backward_filter->algorithm), call.workspace,
      call.workspace_bytes, &zero, filter_->get(), dw));
}

}  // namespace rddp::cuda
