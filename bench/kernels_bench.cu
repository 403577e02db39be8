// Times our CUDA kernels and reports the bandwidth they reach against the device's peak:
// these kernels do little arithmetic per byte, so bandwidth is the figure of merit.
// Each case: 10 warm-up launches, then 200 timed ones, each between its own pair of CUDA
// events; the median is printed. Without a CUDA device it prints SKIPPED and exits 0.
// BatchNorm is timed beside cuDNN's legacy BatchNorm (BatchNormLayer), which it replaces, at
// ResNet-18's shapes, so that one run gives the before and the after.
// At the imagenet stem's shape, its BatchNorm and max-pool through the stored output and with the
// pool normalising on the fly. Last, every convolution of the 224x224 network in NHWC, bf16 and
// tf32, through the legacy API's timed choice and the graph API's (--conv-api), and their sums
// per training step. On a GPU below compute capability 8.0 (a V100), where cuDNN has no bfloat16
// BatchNorm or convolutions, those bf16 rows are fp16's, saying so.
//   kernels_bench                                every table
//   kernels_bench --only convolutions,batchnorm  these (softmax, optimizers, weights, batchnorm,
//                                                convolutions)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "resnet_ddp/json_line.h"
#include "resnet_ddp/cuda/batchnorm_kernels.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/conv_algorithms.h"
#include "resnet_ddp/cuda/cudnn_batchnorm.h"
#include "resnet_ddp/cuda/cudnn_conv.h"
#include "resnet_ddp/cuda/handles.h"
#include "resnet_ddp/cuda/kernels.h"
#include "resnet_ddp/cuda/layer_kernels.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/model_spec.h"
#include "resnet_ddp/param_layout.h"
#include "resnet_ddp/rng.h"
#include "resnet_ddp/kernel_math/weight_decay.h"

using namespace rddp;

namespace {

constexpr int kWarmup = 10;
constexpr int kRuns = 200;

template <typename T>
T* device_alloc(size_t count) {
  T* pointer = nullptr;
  RDDP_CUDA_CHECK(cudaMalloc(&pointer, count * sizeof(T)));
  return pointer;
}

template <typename T>
T* device_copy(const std::vector<T>& host) {
  T* pointer = device_alloc<T>(host.size());
  RDDP_CUDA_CHECK(
      cudaMemcpy(pointer, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return pointer;
}

// Median time of one launch in microseconds. All launches are queued before the first is
// waited for, so the GPU runs them back to back and host launch overhead stays out.
template <typename Launch>
double median_microseconds(Launch launch, cudaStream_t stream) {
  for (int i = 0; i < kWarmup; ++i) launch();
  std::vector<cudaEvent_t> events(2 * kRuns);
  for (cudaEvent_t& event : events) RDDP_CUDA_CHECK(cudaEventCreate(&event));
  for (int i = 0; i < kRuns; ++i) {
    RDDP_CUDA_CHECK(cudaEventRecord(events[2 * i], stream));
    launch();
    RDDP_CUDA_CHECK(cudaEventRecord(events[2 * i + 1], stream));
  }
  RDDP_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> milliseconds(kRuns);
  for (int i = 0; i < kRuns; ++i)
    RDDP_CUDA_CHECK(cudaEventElapsedTime(&milliseconds[i], events[2 * i], events[2 * i + 1]));
  for (cudaEvent_t& event : events) RDDP_CUDA_CHECK(cudaEventDestroy(event));
  std::nth_element(milliseconds.begin(), milliseconds.begin() + kRuns / 2, milliseconds.end());
  return 1e3 * milliseconds[kRuns / 2];
}

struct Reporter {
  double peak_bytes_per_second;
  void row(const std::string& kernel, const std::string& shape, double microseconds,
           double bytes) const {
    const double bytes_per_second = bytes / (microseconds * 1e-6);
    std::printf("%-36s %-26s %10.2f %10.1f %8.1f%%\n", kernel.c_str(), shape.c_str(),
                microseconds, bytes_per_second / 1e9,
                100.0 * bytes_per_second / peak_bytes_per_second);
  }
};

void bench_softmax_xent(const Reporter& report, cudaStream_t stream, int batch, int classes) {
  Rng rng(derive_seed(batch, "bench logits"));
  std::vector<float> logits(static_cast<size_t>(batch) * classes);
  for (float& x : logits) x = static_cast<float>(rng.uniform(-4.0, 4.0));
  std::vector<int32_t> labels(batch);
  for (int32_t& label : labels) label = static_cast<int32_t>(rng.below(classes));
  float* d_logits = device_copy(logits);
  int32_t* d_labels = device_copy(labels);
  float* d_dlogits = device_alloc<float>(logits.size());
  auto* rows = device_alloc<cuda::XentRow>(batch);
  auto* metrics = device_alloc<cuda::XentMetrics>(1);
  const double microseconds = median_microseconds(
      [&] {
        cuda::softmax_cross_entropy(d_logits, d_labels, batch, classes, 0.1f, d_dlogits, rows,
                                    metrics, stream);
      },
      stream);
  // Compulsory traffic: logits in, dlogits out, labels in, the per-row records out and back in.
  const double bytes = 2.0 * logits.size() * sizeof(float) + batch * sizeof(int32_t) +
                       2.0 * batch * sizeof(cuda::XentRow) + sizeof(cuda::XentMetrics);
  report.row("softmax_cross_entropy (fwd+bwd)",
             std::to_string(batch) + " x " + std::to_string(classes), microseconds, bytes);
  for (void* p : {static_cast<void*>(d_logits), static_cast<void*>(d_labels),
                  static_cast<void*>(d_dlogits), static_cast<void*>(rows),
                  static_cast<void*>(metrics)})
    RDDP_CUDA_CHECK(cudaFree(p));
}

template <typename Grad>
void bench_optimizers(const Reporter& report, cudaStream_t stream, size_t elements,
                      const char* grad_name) {
  Rng rng(derive_seed(elements, "bench optimizer"));
  std::vector<float> params(elements);
  std::vector<Grad> grads(elements);
  for (size_t i = 0; i < elements; ++i) {
    params[i] = static_cast<float>(rng.uniform(-1.0, 1.0));
    grads[i] = static_cast<Grad>(static_cast<float>(rng.uniform(-0.1, 0.1)));
  }
  float* d_params = device_copy(params);
  Grad* d_grads = device_copy(grads);
  float* first = device_alloc<float>(elements);
  float* second = device_alloc<float>(elements);
  RDDP_CUDA_CHECK(cudaMemset(first, 0, elements * sizeof(float)));
  RDDP_CUDA_CHECK(cudaMemset(second, 0, elements * sizeof(float)));
  auto* adamw_scalars = device_alloc<adamw::Scalars<float>>(1);
  const auto a = adamw::scalars<float>(1e-3, 1e-2, 0.9, 0.999, 1e-8, 10);
  RDDP_CUDA_CHECK(cudaMemcpy(adamw_scalars, &a, sizeof a, cudaMemcpyHostToDevice));
  const std::string shape = std::to_string(elements) + " fp32, " + grad_name + " grads";
  const double grad_bytes = elements * static_cast<double>(sizeof(Grad));
  const double float_bytes = elements * static_cast<double>(sizeof(float));

  // AdamW reads params, grads and both moments, and writes params and both moments.
  report.row("adamw_step (scalars in memory)", shape,
             median_microseconds(
                 [&] {
                   cuda::adamw_step(d_params, d_grads, first, second, elements,
                                    static_cast<const adamw::Scalars<float>*>(adamw_scalars),
                                    stream);
                 },
                 stream),
             grad_bytes + 6 * float_bytes);
  // The same with a weight-decay mask (--no-decay-norm-bias), one bit per 64 parameters: here
  // every fourth chunk is left undecayed, about the share of words a ResNet-18 mask's set bits
  // touch. What the mask's reads and tests cost against the row above.
  std::vector<uint32_t> mask(weight_decay::mask_words(elements), 0u);
  for (size_t chunk = 0; chunk < weight_decay::chunks_of(elements); chunk += 4)
    weight_decay::exclude(mask, chunk);
  uint32_t* d_mask = device_copy(mask);
  report.row("adamw_step (weight-decay mask)", shape,
             median_microseconds(
                 [&] {
                   cuda::adamw_step(d_params, d_grads, first, second, elements,
                                    static_cast<const adamw::Scalars<float>*>(adamw_scalars),
                                    stream, {}, nullptr, d_mask);
                 },
                 stream),
             grad_bytes + 6 * float_bytes + mask.size() * sizeof(uint32_t));
  // SGD with momentum reads params, grads and the buffer, and writes params and the buffer.
  const auto momentum = sgd::scalars<float>(0.1, 5e-4, 0.9, false);
  report.row("sgd_step (momentum)", shape,
             median_microseconds(
                 [&] { cuda::sgd_step(d_params, d_grads, first, elements, momentum, stream); },
                 stream),
             grad_bytes + 4 * float_bytes);
  const auto plain = sgd::scalars<float>(0.1, 0.0, 0.0, false);
  report.row("sgd_step (no momentum)", shape,
             median_microseconds(
                 [&] { cuda::sgd_step(d_params, d_grads, nullptr, elements, plain, stream); },
                 stream),
             grad_bytes + 2 * float_bytes);
  for (void* p : {static_cast<void*>(d_params), static_cast<void*>(d_grads),
                  static_cast<void*>(first), static_cast<void*>(second),
                  static_cast<void*>(adamw_scalars), static_cast<void*>(d_mask)})
    RDDP_CUDA_CHECK(cudaFree(p));
}

// Values in [-1, 1) from a hash of the index: BatchNorm's time does not depend on them, but
// filling hundreds of MB on the host would take longer than the benchmark.
template <typename T>
__global__ void fill_kernel(size_t count, uint32_t seed, T* out) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    out[i] = static_cast<T>(static_cast<float>(h & 0xFFFFu) / 32768.0f - 1.0f);
  }
}

template <typename T>
T* device_filled(size_t count, uint32_t seed) {
  T* pointer = device_alloc<T>(count);
  fill_kernel<T><<<1024, 256>>>(count, seed, pointer);
  RDDP_CUDA_CHECK_LAUNCH("fill_kernel");
  return pointer;
}

// One BatchNorm of ResNet-18: our kernels (plain, then with the fusions the executor will use:
// bn2's residual add and ReLU forward, the ReLU's mask backward) and cuDNN's legacy BatchNorm.
// The bytes are what our kernels move: the training forward reads x twice (statistics, then
// normalisation) and writes y, plus the residual when fused; the backward reads x and dy twice
// and writes dx, plus the ReLU's output twice when masked. cuDNN's rows are given the same
// bytes, so that their GB/s compare as the same work done.
template <typename T>
void bench_batchnorm(const Reporter& report, const cuda::ComputeContext& context, int batch,
                     int channels, int size, MemoryFormat format, const char* type_name) {
  cudaStream_t stream = context.stream();
  const size_t count = static_cast<size_t>(batch) * channels * size * size;
  const cuda::BatchNormShape shape{batch, channels, size, size, format};
  T* x = device_filled<T>(count, 1);
  T* residual = device_filled<T>(count, 2);
  T* dy = device_filled<T>(count, 3);
  T* y = device_filled<T>(count, 4);
  T* dx = device_alloc<T>(count);
  std::vector<float> ones(channels, 1.0f), zeros(channels, 0.0f);
  float* gamma = device_copy(ones);
  float* beta = device_copy(zeros);
  float* running_mean = device_copy(zeros);
  float* running_var = device_copy(ones);
  float* save_mean = device_alloc<float>(channels);
  float* save_invstd = device_alloc<float>(channels);
  float* dgamma = device_alloc<float>(channels);
  float* dbeta = device_alloc<float>(channels);
  const size_t scratch_bytes = cuda::batchnorm_scratch_bytes(shape);
  std::byte* scratch = device_alloc<std::byte>(scratch_bytes);
  const size_t relu_bits_bytes = cuda::batchnorm_relu_bits_bytes<T>(shape);
  uint8_t* relu_bits = device_alloc<uint8_t>(relu_bits_bytes);
  RDDP_CUDA_CHECK(cudaDeviceSynchronize());

  const cudnnTensorFormat_t cudnn_format =
      format == MemoryFormat::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  cuda::TensorDescriptorCache descriptors(cuda::data_type_of<T>(), cudnn_format);
  cuda::BatchNormLayer layer(channels, size, size, cuda::data_type_of<T>(), cudnn_format);
  layer.prepare(batch, descriptors);
  const std::string label = std::to_string(batch) + "x" + std::to_string(channels) + "x" +
                            std::to_string(size) + "x" + std::to_string(size) + " " +
                            to_string(format) + " " + type_name;
  const double n = count * static_cast<double>(sizeof(T));
  auto time = [&](const char* kernel, double bytes, auto launch) {
    report.row(kernel, label, median_microseconds(launch, stream), bytes);
  };
  time("batchnorm fwd train (ours)", 3 * n, [&] {
    cuda::batchnorm_forward_train(shape, x, gamma, beta, running_mean, running_var, save_mean,
                                  save_invstd, static_cast<const T*>(nullptr), false, y, scratch,
                                  scratch_bytes, stream);
  });
  time("batchnorm fwd +add+relu (ours)", 4 * n, [&] {
    cuda::batchnorm_forward_train(shape, x, gamma, beta, running_mean, running_var, save_mean,
                                  save_invstd, static_cast<const T*>(residual), true, y, scratch,
                                  scratch_bytes, stream);
  });
  // The same writing the ReLU's mask as bits for the backward, as the executor trains each
  // block's bn2 with our kernels.
  time("batchnorm fwd +add+relu, bits (ours)", 4 * n + relu_bits_bytes, [&] {
    cuda::batchnorm_forward_train(shape, x, gamma, beta, running_mean, running_var, save_mean,
                                  save_invstd, static_cast<const T*>(residual), true, y, scratch,
                                  scratch_bytes, stream, relu_bits);
  });
  time("batchnorm fwd train (cuDNN)", 3 * n, [&] {
    layer.forward_train(context.cudnn(), batch, x, gamma, beta, running_mean, running_var, y,
                        save_mean, save_invstd);
  });
  // The imagenet stem (64 channels of 112x112): BatchNorm with its ReLU and then the 3x3/2
  // max-pool, through the stored output or with the pool normalising on the fly, as the executor
  // trains it with our kernels. Bytes: x read twice and y written and read back, or x read twice
  // only; both write the pooled values and a byte of argmax for each.
  if (channels == 64 && size == 112) {
    const PoolShape pool{batch, channels, size, size, 3, 2, 1};
    const size_t pooled_count = static_cast<size_t>(batch) * channels * pool.out_h() * pool.out_w();
    T* pooled = device_alloc<T>(pooled_count);
    uint8_t* argmax = device_alloc<uint8_t>(pooled_count);
    const double pool_out = pooled_count * static_cast<double>(sizeof(T) + 1);
    time("stem bn+relu, maxpool (ours)", 4 * n + pool_out, [&] {
      cuda::batchnorm_forward_train(shape, x, gamma, beta, running_mean, running_var, save_mean,
                                    save_invstd, static_cast<const T*>(nullptr), true, y, scratch,
                                    scratch_bytes, stream);
      cuda::maxpool_forward(pool, static_cast<const T*>(y), pooled, argmax, stream, format);
    });
    time("stem bn stats, maxpool on the fly", 2 * n + pool_out, [&] {
      cuda::batchnorm_forward_train(shape, x, gamma, beta, running_mean, running_var, save_mean,
                                    save_invstd, static_cast<const T*>(nullptr), true,
                                    static_cast<T*>(nullptr), scratch, scratch_bytes, stream);
      cuda::maxpool_forward_of_batchnorm_relu(pool, static_cast<const T*>(x),
                                              {save_mean, save_invstd, gamma, beta}, pooled,
                                              argmax, stream, format);
    });
    // Its backward from the pool's gradient (and the argmax just made): the pool's backward
    // writing the stem's gradient and the BatchNorm's backward reading it twice. Bytes: the
    // pooled gradient and argmax read once, the stem's gradient written once, then x and it read
    // twice and dx written.
    T* pooled_grad = device_filled<T>(pooled_count, 5);
    time("stem maxpool bwd, bn bwd (ours)", 6 * n + pool_out, [&] {
      cuda::maxpool_backward(pool, static_cast<const T*>(pooled_grad), argmax, dy, stream, format);
      cuda::batchnorm_backward(shape, x, dy, cuda::ReluMask<T>::recomputed(beta), gamma,
                               save_mean, save_invstd, dx, dgamma, dbeta, scratch, scratch_bytes,
                               stream);
    });
    RDDP_CUDA_CHECK(cudaStreamSynchronize(stream));
    RDDP_CUDA_CHECK(cudaFree(pooled));
    RDDP_CUDA_CHECK(cudaFree(argmax));
    RDDP_CUDA_CHECK(cudaFree(pooled_grad));
  }
  time("batchnorm bwd (ours)", 5 * n, [&] {
    cuda::batchnorm_backward(shape, x, dy, cuda::ReluMask<T>::none(), gamma, save_mean,
                             save_invstd, dx, dgamma, dbeta, scratch, scratch_bytes, stream);
  });
  time("batchnorm bwd +relu mask (ours)", 7 * n, [&] {
    cuda::batchnorm_backward(shape, x, dy, cuda::ReluMask<T>::of_output(y), gamma, save_mean,
                             save_invstd, dx, dgamma, dbeta, scratch, scratch_bytes, stream);
  });
  // The mask from the output recomputed from x, as under a BatchNorm with no residual add.
  time("batchnorm bwd +relu mask recomputed (ours)", 5 * n, [&] {
    cuda::batchnorm_backward(shape, x, dy, cuda::ReluMask<T>::recomputed(beta), gamma,
                             save_mean, save_invstd, dx, dgamma, dbeta, scratch, scratch_bytes,
                             stream);
  });
  time("batchnorm bwd (cuDNN)", 5 * n, [&] {
    layer.backward(context.cudnn(), batch, x, dy, gamma, save_mean, save_invstd, dx, dgamma,
                   dbeta);
  });
  // A block's bn2 as the executor trains it with our kernels: the output gradient masked in
  // place (it feeds the identity branch too), the mask from the stored output or from the bits
  // "fwd +add+relu, bits" wrote. After the rows that read dy as it was: masking it in place
  // leaves zeros there. Bytes: the first pass reads dy, x and the mask and writes dy, the second
  // reads dy and x and writes dx.
  time("bn2 bwd, mask of y, in place (ours)", 7 * n, [&] {
    cuda::batchnorm_backward(shape, x, dy, cuda::ReluMask<T>::of_output(y), gamma, save_mean,
                             save_invstd, dx, dgamma, dbeta, scratch, scratch_bytes, stream, dy);
  });
  time("bn2 bwd, mask of bits, in place (ours)", 6 * n + relu_bits_bytes, [&] {
    cuda::batchnorm_backward(shape, x, dy, cuda::ReluMask<T>::of_bits(relu_bits), gamma,
                             save_mean, save_invstd, dx, dgamma, dbeta, scratch, scratch_bytes,
                             stream, dy);
  });
  RDDP_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (void* p : {static_cast<void*>(x), static_cast<void*>(residual), static_cast<void*>(dy),
                  static_cast<void*>(y), static_cast<void*>(dx), static_cast<void*>(gamma),
                  static_cast<void*>(beta), static_cast<void*>(running_mean),
                  static_cast<void*>(running_var), static_cast<void*>(save_mean),
                  static_cast<void*>(save_invstd), static_cast<void*>(dgamma),
                  static_cast<void*>(dbeta), static_cast<void*>(scratch),
                  static_cast<void*>(relu_bits)})
    RDDP_CUDA_CHECK(cudaFree(p));
}

// The NHWC executor's per-forward copy of every convolution weight of ResNet-18 (OIHW float
// masters to OHWI in the activations' type), in one launch, as the executor makes it, and the
// weight gradients' way back.
template <typename To>
void bench_weight_copies(const Reporter& report, cudaStream_t stream, const char* type_name) {
  const ParamLayout layout(describe(ModelSpec{}));
  std::vector<cuda::WeightPermutation> table;
  int64_t copies = 0;
  int max_out_channels = 0;
  for (const TensorInfo& info : layout.tensors()) {
    if (info.role != TensorRole::parameter || info.shape.size() != 4) continue;
    cuda::WeightPermutation p;
    p.param_offset = static_cast<int64_t>(info.offset);
    p.copy_offset = copies;
    p.out_channels = static_cast<int>(info.shape[0]);
    p.in_channels = static_cast<int>(info.shape[1]);
    p.kernel = static_cast<int>(info.shape[2]);
    table.push_back(p);
    copies += static_cast<int64_t>(info.numel);
    max_out_channels = std::max(max_out_channels, p.out_channels);
  }
  float* params = device_filled<float>(layout.parameter_elements(), 7);
  To* copy = device_alloc<To>(static_cast<size_t>(copies));
  cuda::WeightPermutation* d_table = device_copy(table);
  const double microseconds = median_microseconds(
      [&] {
        cuda::weights_to_ohwi(d_table, static_cast<int>(table.size()), max_out_channels, params,
                              copy, stream);
      },
      stream);
  const double bytes = static_cast<double>(copies) * (sizeof(float) + sizeof(To));
  const std::string shape =
      std::to_string(table.size()) + " convs, " + std::to_string(copies) + " " + type_name;
  report.row("weights_to_ohwi", shape, microseconds, bytes);
  // The way back, as each convolution's weight gradient comes from cuDNN during backward: one
  // launch per convolution, timed together.
  float* grads = device_alloc<float>(layout.parameter_elements());
  const double back_microseconds = median_microseconds(
      [&] {
        for (const cuda::WeightPermutation& p : table)
          cuda::ohwi_to_oihw(p.out_channels, p.in_channels, p.kernel, copy + p.copy_offset,
                             grads + p.param_offset, stream);
      },
      stream);
  report.row("ohwi_to_oihw (every conv)", shape, back_microseconds, bytes);
  for (void* p : {static_cast<void*>(params), static_cast<void*>(copy), static_cast<void*>(d_table),
                  static_cast<void*>(grads)})
    RDDP_CUDA_CHECK(cudaFree(p));
}

// ResNet-18's BatchNorm shapes: the cifar stem's network at 32x32, batch 128, and the
// torchvision network at 224x224, batch 256 (stem BatchNorm at 112x112, then the four stages).
void bench_batchnorms(const Reporter& report, bool bf16) {
  cuda::ComputeContext context;
  struct Layer {
    int batch, channels, size;
  };
  const Layer layers[] = {{128, 64, 32},  {128, 128, 16}, {128, 256, 8},  {128, 512, 4},
                          {256, 64, 112}, {256, 64, 56},  {256, 128, 28}, {256, 256, 14},
                          {256, 512, 7}};
  for (MemoryFormat format : {MemoryFormat::nchw, MemoryFormat::nhwc})
    for (const Layer& l : layers) {
      bench_batchnorm<float>(report, context, l.batch, l.channels, l.size, format, "fp32");
      if (bf16)
        bench_batchnorm<__nv_bfloat16>(report, context, l.batch, l.channels, l.size, format,
                                       "bf16");
      else
        bench_batchnorm<__half>(report, context, l.batch, l.channels, l.size, format, "fp16");
    }
}

// Prepares `layer` for `batch` by the policy's timed search on `operands` (whose workspace this
// fills in) and returns the workspace its calls then use, allocated: as large as the search or
// the choices need, whichever is more, and at least one byte.
std::pair<void*, size_t> prepare_timed(cuda::ConvLayer& layer, int batch, cudnnHandle_t handle,
                                       cuda::ConvAlgorithmCache& algorithms,
                                       cuda::TensorDescriptorCache& descriptors,
                                       cuda::ConvSearchBuffers operands, size_t limit) {
  const size_t search_bytes = layer.search_workspace_bytes(batch, handle, algorithms, limit);
  void* workspace = nullptr;
  RDDP_CUDA_CHECK(cudaMalloc(&workspace, std::max<size_t>(search_bytes, 1)));
  operands.workspace = workspace;
  operands.workspace_bytes = search_bytes;
  const size_t needed = layer.prepare(batch, handle, algorithms, descriptors, &operands, limit);
  if (needed <= search_bytes) return {workspace, search_bytes};
  RDDP_CUDA_CHECK(cudaFree(workspace));
  RDDP_CUDA_CHECK(cudaMalloc(&workspace, needed));
  return {workspace, needed};
}

// ResNet-18's convolutions at 224x224, batch 256, NHWC, as the fastest configuration runs them.
// `count` is how often a step runs the shape. Some input gradients add to what is there (beta 1:
// the downsampling 1x1's, and conv1's in a block without one): summed as overwriting, and timed
// adding on a row of their own ("data +="), which says what adding costs.
constexpr int kNetworkBatch = 256;
struct NetworkConv {
  const char* name;
  int in_channels, size, out_channels, kernel, stride, pad, count;
  bool input_grad;
};
constexpr NetworkConv kNetworkConvs[] = {
    {"conv1 7x7/2", 3, 224, 64, 7, 2, 3, 1, false},
    {"layer1 3x3", 64, 56, 64, 3, 1, 1, 4, true},
    {"layer2.0 3x3/2", 64, 56, 128, 3, 2, 1, 1, true},
    {"layer2.0 1x1/2", 64, 56, 128, 1, 2, 0, 1, true},
    {"layer2 3x3", 128, 28, 128, 3, 1, 1, 3, true},
    {"layer3.0 3x3/2", 128, 28, 256, 3, 2, 1, 1, true},
    {"layer3.0 1x1/2", 128, 28, 256, 1, 2, 0, 1, true},
    {"layer3 3x3", 256, 14, 256, 3, 1, 1, 3, true},
    {"layer4.0 3x3/2", 256, 14, 512, 3, 2, 1, 1, true},
    {"layer4.0 1x1/2", 256, 14, 512, 1, 2, 0, 1, true},
    {"layer4 3x3", 512, 7, 512, 3, 1, 1, 3, true},
};

// One direction of one convolution, as chosen by one API's timed search.
struct TimedConv {
  const char* direction;
  bool in_step_sum;  // the adding backward data is timed beside the overwriting one, not summed
  double us;
  int choice;  // the legacy algorithm, or the graph plan's engine
  bool graph;
  std::string why_legacy;  // under the graph API, why a direction of the shape fell back
};

// The three directions of `c` (two for the stem) through `api`, each as its timed search chose.
template <typename T>
std::vector<TimedConv> time_network_conv(const NetworkConv& c, bool tf32, cuda::ConvApi api) {
  constexpr int kBatch = kNetworkBatch;
  constexpr cudnnDataType_t type = cuda::data_type_of<T>();
  constexpr size_t kWorkspaceLimit = size_t{1} << 30;
  cuda::ComputeContext context;
  cuda::MathPolicy policy;
  policy.allow_tf32 = tf32;
  policy.data_type = type;
  policy.format = CUDNN_TENSOR_NHWC;
  policy.search = cuda::ConvAlgorithmSearch::timed;
  policy.api = api;
  cuda::ConvAlgorithmCache algorithms(policy);
  cuda::TensorDescriptorCache descriptors(type, CUDNN_TENSOR_NHWC);
  const ConvShape geometry{kBatch, c.in_channels, c.size, c.size, c.out_channels,
                                 c.kernel, c.stride, c.pad};
  cuda::ConvLayer layer(geometry, c.input_grad, type, CUDNN_TENSOR_NHWC);
  const ConvShape shape = layer.shape(kBatch);
  const size_t inputs = static_cast<size_t>(kBatch) * c.in_channels * c.size * c.size;
  const size_t outputs =
      static_cast<size_t>(kBatch) * c.out_channels * shape.out_h() * shape.out_w();
  const size_t weights =
      static_cast<size_t>(c.out_channels) * c.in_channels * c.kernel * c.kernel;
  T* x = device_filled<T>(inputs, 41);
  T* w = device_filled<T>(weights, 42);
  T* dy = device_filled<T>(outputs, 43);
  T* y = device_alloc<T>(outputs);
  T* dx = device_alloc<T>(inputs);
  T* dw = device_alloc<T>(weights);
  const auto [workspace, workspace_bytes] =
      prepare_timed(layer, kBatch, context.cudnn(), algorithms, descriptors,
                    {x, w, dy, y, dx, dw, nullptr, 0}, kWorkspaceLimit);
  const cuda::CudnnCall call{context.cudnn(), workspace, workspace_bytes};
  const auto timed = [&](const char* name, cuda::ConvDirection direction, bool accumulate,
                         auto launch) {
    const cuda::ConvAlgorithm& chosen = algorithms.choose(context.cudnn(), shape, direction,
                                                          nullptr, kWorkspaceLimit, accumulate);
    return TimedConv{name, !accumulate, median_microseconds(launch, context.stream()),
                     chosen.algorithm, chosen.graph != nullptr,
                     algorithms.api_use().first_fallback};
  };
  std::vector<TimedConv> times;
  times.push_back(timed("forward", cuda::ConvDirection::forward, false,
                        [&] { layer.forward(call, kBatch, x, w, y); }));
  if (c.input_grad) {
    times.push_back(timed("data", cuda::ConvDirection::backward_data, false,
                          [&] { layer.backward_data(call, kBatch, dy, w, dx); }));
    times.push_back(timed("data +=", cuda::ConvDirection::backward_data, true,
                          [&] { layer.backward_data(call, kBatch, dy, w, dx, 1.0f); }));
  }
  times.push_back(timed("filter", cuda::ConvDirection::backward_filter, false,
                        [&] { layer.backward_filter(call, kBatch, x, dy, dw); }));
  for (void* p : {static_cast<void*>(x), static_cast<void*>(w), static_cast<void*>(dy),
                  static_cast<void*>(y), static_cast<void*>(dx), static_cast<void*>(dw),
                  workspace})
    RDDP_CUDA_CHECK(cudaFree(p));
  return times;
}

// What a timed row chose under the graph API: its plan's engine, or the legacy API it fell back to.
std::string engine_text(const TimedConv& row) {
  return row.graph ? std::to_string(row.choice) : "legacy";
}
void engine_field(JsonLine& line, const char* key, const TimedConv& row) {
  if (row.graph)
    line.integer(key, row.choice);
  else
    line.null(key);
}

// A row of the network's convolutions as a JSON line, with its whole geometry: what
// bench/pytorch_convs.py times PyTorch's convolutions on, beside ours.
std::string conv_record(const char* precision, const NetworkConv& c, const TimedConv& legacy,
                        const TimedConv& graph) {
  JsonLine line;
  line.string("record", "conv").string("precision", precision).string("name", c.name);
  line.integer("batch", kNetworkBatch).integer("in_channels", c.in_channels);
  line.integer("size", c.size).integer("out_channels", c.out_channels);
  line.integer("kernel", c.kernel).integer("stride", c.stride).integer("pad", c.pad);
  line.integer("count", c.count).string("direction", legacy.direction);
  line.boolean("in_step_sum", legacy.in_step_sum).string("layout", "nhwc");
  line.number("legacy_us", legacy.us).integer("legacy_algorithm", legacy.choice);
  line.number("graph_us", graph.us);
  engine_field(line, "graph_engine", graph);
  return line.text();
}

// Every convolution of the 224x224 network through both of cuDNN's APIs, side by side, and what
// they add up to per training step: the convolutions' share of the step, and what
// --conv-api graph changes in it. Then each row again as a JSON line (conv_record).
template <typename T>
void bench_network_convolutions(const char* precision, bool tf32) {
  std::printf("\n%-32s %-10s %11s %11s %7s %9s %9s\n",
              (std::string("224x224 convolutions, ") + precision).c_str(), "direction",
              "legacy us", "graph us", "ratio", "algorithm", "engine");
  double legacy_step = 0.0, graph_step = 0.0;
  int missing = 0;
  std::vector<std::string> records;
  for (const NetworkConv& c : kNetworkConvs) {
    // A shape one API refuses must not cost the others' rows; the sums then say they lack it.
    std::vector<TimedConv> legacy, graph;
    try {
      legacy = time_network_conv<T>(c, tf32, cuda::ConvApi::legacy);
      graph = time_network_conv<T>(c, tf32, cuda::ConvApi::graph);
    } catch (const Error& error) {
      std::printf("%-32s not measured: %s\n", c.name, error.what());
      ++missing;
      continue;
    }
    for (size_t i = 0; i < legacy.size(); ++i) {
      std::printf("%-32s %-10s %11.1f %11.1f %7.3f %9d %9s\n", c.name, legacy[i].direction,
                  legacy[i].us, graph[i].us, graph[i].us / legacy[i].us, legacy[i].choice,
                  engine_text(graph[i]).c_str());
      records.push_back(conv_record(precision, c, legacy[i], graph[i]));
      if (!legacy[i].in_step_sum) continue;
      legacy_step += c.count * legacy[i].us;
      graph_step += c.count * graph[i].us;
    }
    for (const TimedConv& row : graph)
      if (!row.graph) {
        std::printf("%-32s the graph API fell back to the legacy API: %s\n", c.name,
                    row.why_legacy.c_str());
        break;
      }
  }
  std::printf("%-32s %-10s %11.1f %11.1f %7.3f%s\n", "per training step", "all", legacy_step,
              graph_step, graph_step / legacy_step,
              missing > 0 ? "  (without the shapes not measured)" : "");
  for (const std::string& record : records) std::printf("%s\n", record.c_str());
}

// The tables kernels_bench can print, in the order it prints them.
const std::vector<std::string> kSections = {"softmax", "optimizers", "weights", "batchnorm",
                                            "convolutions"};

void run(const std::set<std::string>& sections) {
  int device = 0;
  RDDP_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp properties;
  RDDP_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  // cudaDeviceProp's memoryClockRate and memoryBusWidth are gone in CUDA 13; the attributes
  // remain. The clock is in kHz and memory moves data on both clock edges.
  int clock_khz = 0, bus_bits = 0;
  RDDP_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device));
  RDDP_CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
  const double peak = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0);
  std::printf("kernels_bench on %s: %d-bit memory bus at %.0f MHz, peak %.0f GB/s; L2 %.0f MiB\n",
              properties.name, bus_bits, clock_khz / 1e3, peak / 1e9,
              properties.l2CacheSize / 1048576.0);
  std::printf("(working sets smaller than L2 can exceed the DRAM peak)\n");
  // cuDNN's bfloat16 BatchNorm and convolutions need compute capability 8.0; below, the 16-bit
  // rows that compare with cuDNN are float16's, the mixed precision such a GPU trains in.
  const bool bf16 = properties.major >= 8;
  if (!bf16)
    std::printf("bf16 BatchNorm and convolutions skipped: compute capability %d.%d has no "
                "bfloat16 tensor cores (8.0 and later); fp16 rows in their place\n",
                properties.major, properties.minor);
  std::printf("\n");
  std::printf("%-36s %-26s %10s %10s %9s\n", "kernel", "shape", "median us", "GB/s", "of peak");

  cudaStream_t stream;
  RDDP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const Reporter report{peak};
  if (sections.count("softmax"))
    for (const auto& [batch, classes] :
         {std::pair{256, 1000}, std::pair{512, 1000}, std::pair{16384, 1000}, std::pair{512, 10},
          std::pair{65536, 10}})
      bench_softmax_xent(report, stream, batch, classes);
  const size_t resnet18 = ParamLayout(describe(ModelSpec{})).parameter_elements();
  if (sections.count("optimizers")) {
    bench_optimizers<float>(report, stream, resnet18, "fp32");
    bench_optimizers<__nv_bfloat16>(report, stream, resnet18, "bf16");
  }
  if (sections.count("weights")) {
    bench_weight_copies<float>(report, stream, "fp32");
    bench_weight_copies<__nv_bfloat16>(report, stream, "bf16");
  }
  RDDP_CUDA_CHECK(cudaStreamDestroy(stream));
  if (sections.count("batchnorm")) bench_batchnorms(report, bf16);
  if (sections.count("convolutions")) {
    if (bf16)
      bench_network_convolutions<__nv_bfloat16>("bf16", /*tf32=*/false);
    else
      bench_network_convolutions<__half>("fp16", /*tf32=*/false);
    bench_network_convolutions<float>("tf32", /*tf32=*/true);
  }
}

// The sections of a comma-separated --only list; exits 2 on one it does not know.
std::set<std::string> parse_sections(int argc, char** argv) {
  const auto usage = [] {
    std::string names;
    for (const std::string& name : kSections) names += (names.empty() ? "" : ",") + name;
    std::fprintf(stderr, "usage: kernels_bench [--only SECTION,...]   sections: %s\n",
                 names.c_str());
    std::exit(2);
  };
  if (argc == 1) return {kSections.begin(), kSections.end()};
  if (argc != 3 || std::string(argv[1]) != "--only") usage();
  std::set<std::string> sections;
  const std::string list = argv[2];
  for (size_t begin = 0; begin <= list.size();) {
    const size_t end = std::min(list.find(',', begin), list.size());
    const std::string name = list.substr(begin, end - begin);
    if (std::find(kSections.begin(), kSections.end(), name) == kSections.end()) {
      std::fprintf(stderr, "kernels_bench: --only: no section '%s'\n", name.c_str());
      usage();
    }
    sections.insert(name);
    begin = end + 1;
  }
  return sections;
}

}  // namespace

int main(int argc, char** argv) {
  const std::set<std::string> sections = parse_sections(argc, argv);
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: kernels_bench: no CUDA device answers (%s)\n",
                status != cudaSuccess ? cudaGetErrorString(status) : "no devices");
    return 0;
  }
  try {
    run(sections);
  } catch (const Error& error) {
    std::fprintf(stderr, "kernels_bench: %s\n", error.what());
    return 1;
  }
  return 0;
}
