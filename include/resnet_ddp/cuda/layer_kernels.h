#pragma once
// Host launchers of the small layer kernels of the CUDA executor, each the GPU twin of the CPU
// layer function of the same name in cpu/layers.h, checked against it element by element by
// tests/gpu/test_cuda_layers.cpp. Tensors are NCHW unless a launcher takes a MemoryFormat (the
// elementwise ones do not care); the CPU twins are NCHW. Each launcher only
// enqueues work on `stream` and checks the launch, so that it may be captured in a CUDA graph;
// the first throws Error on a shape its twin refuses.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "resnet_ddp/layer_shapes.h"
#include "resnet_ddp/cuda/kernels.h"
#include "resnet_ddp/memory_format.h"

namespace rddp::cuda {

// ---- kernels/elementwise.cu

// y = x < 0 ? 0 : x (NaN and -0.0 pass, as torch.relu); in place allowed.
template <typename T>
void relu_forward(int64_t count, const T* x, T* y, cudaStream_t stream);
// dx = y <= 0 ? 0 : dy (torch's threshold_backward on the output); in place allowed.
template <typename T>
void relu_backward(int64_t count, const T* y, const T* dy, T* dx, cudaStream_t stream);
// z = x + y; z may alias x or y.
template <typename T>
void add(int64_t count, const T* x, const T* y, T* z, cudaStream_t stream);
// z = relu(x + y): the residual sum and the block's ReLU in one pass, the same float
// operations as cpu::add followed by cpu::relu_forward. z may alias x or y.
template <typename T>
void add_relu(int64_t count, const T* x, const T* y, T* z, cudaStream_t stream);
// to[i] = from[i] converted, rounding to nearest even when narrowing (float <-> bfloat16): the
// network's input and the weights' 16-bit copies going in, weight gradients coming out.
template <typename From, typename To>
void convert(int64_t count, const From* from, To* to, cudaStream_t stream);
// out[r, c] = row[c] for every r < rows (a bias broadcast over the batch).
template <typename T>
void broadcast_rows(int rows, int cols, const T* row, T* out, cudaStream_t stream);

// ---- kernels/maxpool.cu

// PyTorch's max pooling: the first maximum of each window in row-major order, a NaN winning
// (the last NaN if several); argmax holds its place in the window, one byte stored like y:
// (ih - h0) * kernel + (iw - w0), (h0, w0) = (oh * stride - pad, ow * stride - pad) the window's
// corner, padding included (the CPU twin holds the input's index in its plane instead).
// Windows up to 16x16.
template <typename T>
void maxpool_forward(const PoolShape& shape, const T* x, T* y, uint8_t* argmax,
                     cudaStream_t stream, MemoryFormat format = MemoryFormat::nchw);
// What maxpool_forward_of_batchnorm_relu normalises with: a training BatchNorm's save_mean and
// save_invstd (batchnorm_forward_train's) and its gamma and beta, float [C], device memory.
struct BatchNormOnTheFly {
  const float *save_mean = nullptr, *save_invstd = nullptr, *gamma = nullptr, *beta = nullptr;
};
// maxpool_forward over relu(BatchNorm(x)) as batchnorm_forward_train (our kernels, no residual)
// would have stored it, each input normalised and rounded to T on the fly: the same y and argmax
// bit for bit, without writing that output or reading it back (the imagenet stem's, whose
// backward recomputes its ReLU's mask: cuda::ReluMask).
template <typename T>
void maxpool_forward_of_batchnorm_relu(const PoolShape& shape, const T* x,
                                       const BatchNormOnTheFly& stats, T* y, uint8_t* argmax,
                                       cudaStream_t stream, MemoryFormat format);
// dx receives, at each input, the sum of dy over the outputs that chose it, added in output
// order like the CPU twin, so the result is the same bit for bit. No atomics.
template <typename T>
void maxpool_backward(const PoolShape& shape, const T* dy, const uint8_t* argmax, T* dx,
                      cudaStream_t stream, MemoryFormat format = MemoryFormat::nchw);

// ---- kernels/global_avgpool.cu

// [N, C, H, W] (stored in `format`) -> [N, C], summing each plane in double like the twin.
template <typename T>
void global_avgpool_forward(int batch, int channels, int spatial, const T* x, T* y,
                            cudaStream_t stream, MemoryFormat format = MemoryFormat::nchw);
template <typename T>
void global_avgpool_backward(int batch, int channels, int spatial, const T* dy, T* dx,
                             cudaStream_t stream, MemoryFormat format = MemoryFormat::nchw);

// ---- kernels/layout.cu (index maths: include/resnet_ddp/kernel_math/layout.h)

// y (NHWC) = x (NCHW), converted from From to To (rounding to nearest even when narrowing):
// the network's input, in the pass that converts its type.
template <typename From, typename To>
void nchw_to_nhwc(int batch, int channels, int height, int width, const From* x, To* y,
                  cudaStream_t stream);

// y = the network's input from a batch as it is uploaded: uint8 pixels [batch, height, width,
// channels], normalised as ToTensor + Normalize do, (x / 255 - mean[c]) / stddev[c] in float
// (kernel_math/pixel.h, the loader's formula), then converted to To like convert(), in `format`.
// mean_stddev (device memory): the channels' means, then their standard deviations.
template <typename To>
void pixels_to_input(int batch, int channels, int height, int width, const uint8_t* hwc,
                     const float* mean_stddev, To* y, MemoryFormat format, cudaStream_t stream);

// One convolution weight: where it is in the flat float parameters (OIHW) and where its OHWI
// copy goes.
struct WeightPermutation {
  int64_t param_offset = 0, copy_offset = 0;
  int out_channels = 0, in_channels = 0, kernel = 0;
};
// copy[table[k].copy_offset + OHWI index] = params[table[k].param_offset + OIHW index],
// converted to To, for the `convolutions` entries of `table` (device memory) in one launch;
// `max_out_channels` is the most output channels any entry has.
template <typename To>
void weights_to_ohwi(const WeightPermutation* table, int convolutions, int max_out_channels,
                     const float* params, To* copy, cudaStream_t stream);
// oihw (float) = ohwi widened: a weight gradient as cuDNN writes it for an NHWC filter, into
// the layout of the flat gradient buffer.
template <typename From>
void ohwi_to_oihw(int out_channels, int in_channels, int kernel, const From* ohwi, float* oihw,
                  cudaStream_t stream);

// ---- kernels/metrics.cu

// Running sums of the steps' metrics, kept on the device so that a step never waits for them.
struct MetricSums {
  double loss_sum;  // sum over steps of mean loss * batch
  int64_t correct;
  int64_t correct_top5;
  int64_t count;
  int64_t bad_labels;
  int64_t nonfinite_losses;  // steps left out of the sums above (drop_nonfinite only)
};

// sums += the metrics of one step of `batch` rows (one thread; no host round trip). With
// drop_nonfinite (fp16 loss scaling, where such a step is skipped rather than fatal), a step
// whose loss is Inf or NaN only counts in nonfinite_losses.
void accumulate_metrics(const XentMetrics* step, int batch, MetricSums* sums, cudaStream_t stream,
                        bool drop_nonfinite = false);

}  // namespace rddp::cuda
