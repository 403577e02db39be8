// A host-memory stand-in for the part of cuDNN the CUDA engine calls (src/cuda/*.cpp), so that
// the engine runs on the CPU with the emulated CUDA runtime, where "device" memory is host memory
// from the emulated cudaMalloc. The graph ("backend") API's part, fake_cudnn_graph.cpp, computes
// through this file's convolutions (fake_cudnn_internal.h); its head comment says what it keeps
// of real cuDNN and what it does not model.
//
// What it keeps of real cuDNN, because the engine relies on it:
// - the signatures of cudnn.h (cuDNN 9), its status codes and the descriptors' meaning: float,
//   bfloat16 and half data in NCHW or NHWC (filters KCRS or KRSC), padding and stride;
// - y = alpha * result + beta * y, where beta == 0 never reads y (it may hold NaN);
// - algorithm lists with workspace sizes, math types and determinism that the engine's selection
//   (src/cuda/conv_algorithms.cpp) has to sort through, and a workspace that is scratch: a
//   convolution overwrites the workspace bytes its algorithm needs, and a search (Find*Ex) the
//   whole workspace it is given, with 0xff (NaN in every float type), so that live data placed
//   there is destroyed as it would be on the GPU; too small a workspace is CUDNN_STATUS_BAD_PARAM;
// - BatchNorm's maths: biased variance to normalise, unbiased variance in the running average,
//   1 / sqrt(var + eps) as the saved inverse variance;
// - work that touches data goes through emu::enqueue on the handle's stream with everything it
//   needs copied at call time, so that CUDA-graph capture records it and a replay redoes it.
//
// What it does not model:
// - no real algorithms: every algorithm computes the same result (im2col + GEMM of the CPU twin,
//   src/cpu/conv2d.cpp, in float), and Find*Ex reports fabricated times in a fixed order;
// - compute is in float whatever the math type (no TF32 or 16-bit products), so results are
//   closer to the CPU twin than a GPU's would be;
// - only what the engine uses: 4-d descriptors with packed strides, square kernels with equal
//   padding and stride in both dimensions, dilation 1, one group, cross-correlation, float
//   compute; BatchNorm in CUDNN_BATCHNORM_SPATIAL mode only. Anything else is refused with
//   CUDNN_STATUS_NOT_SUPPORTED rather than computed wrongly;
// - no asynchrony of its own: work runs when emu::enqueue runs it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "call_log.h"
#include "fake_cudnn_internal.h"
#include "resnet_ddp/cpu/layers.h"
#include "stream_work.h"

namespace fake_cudnn {

struct Convolution {
  bool set = false;
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

}  // namespace fake_cudnn

struct cudnnTensorStruct {
  fake_cudnn::Layout layout;
};
struct cudnnFilterStruct {
  fake_cudnn::Layout layout;
};
struct cudnnConvolutionStruct {
  fake_cudnn::Convolution convolution;
};

namespace fake_cudnn {

// Failures: cuDNN 9 keeps a sentence about the last one (fake_cudnn_internal.h).
thread_local std::string last_error;

namespace {

// cudnnCreate*Descriptor: a fresh, unset descriptor of the struct `out` points to.
template <typename Struct>
cudnnStatus_t create_descriptor(const char* function, Struct** out) {
  if (out == nullptr) return failure(CUDNN_STATUS_BAD_PARAM, function, "the descriptor is null");
  *out = new Struct;
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Element types: loads and stores convert through float, which is what the maths runs in.

bool supported_type(cudnnDataType_t type) {
  return type == CUDNN_DATA_FLOAT || type == CUDNN_DATA_BFLOAT16 || type == CUDNN_DATA_HALF;
}

size_t element_bytes(cudnnDataType_t type) { return type == CUDNN_DATA_FLOAT ? 4 : 2; }

size_t byte_size(const Layout& d) { return static_cast<size_t>(d.count()) * element_bytes(d.type); }

namespace {

float to_float(float v) { return v; }
float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
float to_float(__half v) { return __half2float(v); }

template <typename T>
T from_float(float v);
template <>
float from_float<float>(float v) {
  return v;
}
template <>
__nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);  // round to nearest even
}
template <>
__half from_float<__half>(float v) {
  return __float2half(v);
}

// Calls f with a null T* naming the element type of `type` (one of the supported ones).
template <typename F>
void with_element_type(cudnnDataType_t type, F&& f) {
  switch (type) {
    case CUDNN_DATA_BFLOAT16: f(static_cast<__nv_bfloat16*>(nullptr)); break;
    case CUDNN_DATA_HALF: f(static_cast<__half*>(nullptr)); break;
    default: f(static_cast<float*>(nullptr)); break;
  }
}

// Below this many elements a loop is not worth waking the thread team for.
constexpr int64_t kParallelElements = int64_t(1) << 15;

// `src`, in d's type and format, as dense NCHW float.
std::vector<float> load_nchw(const Layout& d, const void* src) {
  std::vector<float> out(static_cast<size_t>(d.count()));
  float* dst = out.data();
  with_element_type(d.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* s = static_cast<const T*>(src);
    const int64_t count = d.count(), plane = d.plane(), channels = d.c;
    if (d.format == CUDNN_TENSOR_NCHW) {
#pragma omp parallel for schedule(static) if (count >= kParallelElements)
      for (int64_t i = 0; i < count; ++i) dst[i] = to_float(s[i]);
      return;
    }
    // NHWC: one row of C values per (image, pixel), channel innermost.
    const int64_t rows = static_cast<int64_t>(d.n) * plane;
#pragma omp parallel for schedule(static) if (count >= kParallelElements)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t image = row / plane, pixel = row % plane;
      const T* in = s + row * channels;
      float* out_image = dst + image * channels * plane + pixel;
      for (int64_t c = 0; c < channels; ++c) out_image[c * plane] = to_float(in[c]);
    }
  });
  return out;
}

// alpha * result + beta * old(), where beta == 0 does not read the old value: it may be NaN.
template <typename Old>
float blend(float alpha, float result, float beta, Old&& old) {
  return beta == 0.0f ? alpha * result : alpha * result + beta * old();
}

// dst = alpha * result + beta * dst, with `result` dense NCHW float and dst in d's type and
// format, rounded once to d's type.
void store_nchw(const Layout& d, const float* result, float alpha, float beta, void* dst) {
  with_element_type(d.type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    T* out = static_cast<T*>(dst);
    const int64_t count = d.count(), plane = d.plane(), channels = d.c;
    const auto put = [&](T& slot, float value) {
      slot = from_float<T>(blend(alpha, value, beta, [&] { return to_float(slot); }));
    };
    if (d.format == CUDNN_TENSOR_NCHW) {
#pragma omp parallel for schedule(static) if (count >= kParallelElements)
      for (int64_t i = 0; i < count; ++i) put(out[i], result[i]);
      return;
    }
    const int64_t rows = static_cast<int64_t>(d.n) * plane;
#pragma omp parallel for schedule(static) if (count >= kParallelElements)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t image = row / plane, pixel = row % plane;
      T* o = out + row * channels;
      const float* r = result + image * channels * plane + pixel;
      for (int64_t c = 0; c < channels; ++c) put(o[c], r[c * plane]);
    }
  });
}

}  // namespace

void poison(void* workspace, size_t bytes) {
  if (workspace != nullptr && bytes > 0) std::memset(workspace, 0xff, bytes);
}

namespace {

float scalar(const void* p) { return *static_cast<const float*>(p); }

// ---------------------------------------------------------------------------------------------
// Argument checks shared by the calls.

// Every call that takes a handle comes here first: the call log counts them by name.
cudnnStatus_t check_handle(const char* function, cudnnHandle_t handle) {
  if (handle == nullptr) return failure(CUDNN_STATUS_BAD_PARAM, function, "handle is null");
  emu::log_call(function);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t check_layout(const char* function, const char* name, const void* descriptor,
                           const Layout* d) {
  if (descriptor == nullptr) return failure(CUDNN_STATUS_BAD_PARAM, function, name, " is null");
  if (!d->set) return failure(CUDNN_STATUS_BAD_PARAM, function, name, " was created but never set");
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

cudnnStatus_t check_device(const char* function, const char* name, const void* p, size_t bytes) {
  if (p == nullptr) return failure(CUDNN_STATUS_BAD_PARAM, function, name, " is null");
  if (!emu::is_device_memory(p, bytes))
    return failure(CUDNN_STATUS_BAD_PARAM, function, name, " (", bytes,
                   " bytes) is not inside one allocation of device memory");
  return CUDNN_STATUS_SUCCESS;
}

namespace {

cudnnStatus_t check_scalars(const char* function, const void* alpha, const void* beta) {
  if (alpha == nullptr || beta == nullptr)
    return failure(CUDNN_STATUS_BAD_PARAM, function, "alpha and beta must not be null");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t set_layout(const char* function, Layout* d, cudnnTensorFormat_t format,
                         cudnnDataType_t type, int n, int c, int h, int w) {
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
    return failure(CUDNN_STATUS_NOT_SUPPORTED, function, "format ", static_cast<int>(format),
                   " is neither NCHW nor NHWC");
  if (!supported_type(type))
    return failure(CUDNN_STATUS_NOT_SUPPORTED, function, "data type ", static_cast<int>(type),
                   " is not float, bfloat16 or half");
  if (n < 1 || c < 1 || h < 1 || w < 1)
    return failure(CUDNN_STATUS_BAD_PARAM, function, "dimensions ", n, "x", c, "x", h, "x", w,
                   " must all be >= 1");
  *d = Layout{true, n, c, h, w, type, format};
  return CUDNN_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Convolution problems and algorithms.

cudnnStatus_t describe(const char* function, cudnnTensorDescriptor_t x_desc,
                       cudnnFilterDescriptor_t w_desc, cudnnConvolutionDescriptor_t conv_desc,
                       cudnnTensorDescriptor_t y_desc, ConvProblem* p) {
  FAKE_CUDNN_TRY(
      check_layout(function, "the input descriptor", x_desc, x_desc ? &x_desc->layout : nullptr));
  FAKE_CUDNN_TRY(
      check_layout(function, "the filter descriptor", w_desc, w_desc ? &w_desc->layout : nullptr));
  FAKE_CUDNN_TRY(
      check_layout(function, "the output descriptor", y_desc, y_desc ? &y_desc->layout : nullptr));
  if (conv_desc == nullptr || !conv_desc->convolution.set)
    return failure(CUDNN_STATUS_BAD_PARAM, function, "the convolution descriptor is not set");
  const Layout &x = x_desc->layout, &w = w_desc->layout, &y = y_desc->layout;
  const Convolution& conv = conv_desc->convolution;
  if (x.type != w.type || x.type != y.type)
    return failure(CUDNN_STATUS_BAD_PARAM, function, "input, filter and output types differ (",
                   static_cast<int>(x.type), ", ", static_cast<int>(w.type), ", ",
                   static_cast<int>(y.type), ")");
  if (x.format != w.format || x.format != y.format)
    return failure(CUDNN_STATUS_NOT_SUPPORTED, function, "input, filter and output formats differ");
  if (w.h != w.w || conv.pad_h != conv.pad_w || conv.stride_h != conv.stride_w)
    return failure(CUDNN_STATUS_NOT_SUPPORTED, function,
                   "only square filters with equal padding and stride in both dimensions");
  if (x.c != w.c)
    return failure(CUDNN_STATUS_BAD_PARAM, function, "the input has ", x.c,
                   " channels, the filter ", w.c);
  if (x.h + 2 * conv.pad_h < w.h || x.w + 2 * conv.pad_w < w.w)
    return failure(CUDNN_STATUS_BAD_PARAM, function, "the ", w.h, "x", w.w,
                   " filter does not fit the padded ", x.h, "x", x.w, " input");
  const rddp::ConvShape s = conv_shape_of(x, w, conv.stride_h, conv.pad_h);
  if (y.n != x.n || y.c != w.n || y.h != s.out_h() || y.w != s.out_w())
    return failure(CUDNN_STATUS_BAD_PARAM, function, "the output is ", y.n, "x", y.c, "x", y.h, "x",
                   y.w, " but the convolution gives ", x.n, "x", w.n, "x", s.out_h(), "x",
                   s.out_w());
  p->x = x;
  p->w = w;
  p->y = y;
  p->math = conv.math;
  p->shape = s;
  return CUDNN_STATUS_SUCCESS;
}

// One entry of a direction's algorithm list. A "fast" candidate stands for a tensor-core kernel:
// CUDNN_TENSOR_OP_MATH for 16-bit data, CUDNN_DEFAULT_MATH (TF32 allowed) for float, which strict
// float32 refuses; the others use CUDNN_FMA_MATH. The same algorithm may appear once per math
// type with a different workspace, as in real cuDNN's lists, so the workspace a call needs
// depends on the math type of its convolution descriptor.
struct Candidate {
  int algorithm;
  bool fast_math;
  cudnnDeterminism_t determinism;
  bool needs_workspace;
  float relative_time;  // of the fabricated timings; the list is in increasing order
};

// Algorithm 0 of both backward directions (and filter algorithm 3) is non-deterministic in real
// cuDNN, as its header says. Strict float32 with deterministic algorithms, the engine tests'
// setting, admits only the FMA entries marked deterministic: each of those needs workspace, so
// that the engine's workspace plan is exercised there too.
const std::vector<Candidate>& candidates(Direction direction) {
  static const std::vector<Candidate> forward = {
      {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, true, CUDNN_DETERMINISTIC, true, 1.0f},
      {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, false, CUDNN_DETERMINISTIC, true, 1.3f},
      {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, false, CUDNN_DETERMINISTIC, false, 1.6f},
  };
  static const std::vector<Candidate> backward_data = {
      {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, true, CUDNN_DETERMINISTIC, true, 1.0f},
      {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, false, CUDNN_NON_DETERMINISTIC, false, 1.3f},
      {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, false, CUDNN_DETERMINISTIC, true, 2.1f},
  };
  static const std::vector<Candidate> backward_filter = {
      {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, true, CUDNN_NON_DETERMINISTIC, true, 0.8f},
      {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, true, CUDNN_DETERMINISTIC, true, 1.0f},
      {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, false, CUDNN_NON_DETERMINISTIC, false, 1.5f},
      {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, false, CUDNN_DETERMINISTIC, true, 2.4f},
  };
  switch (direction) {
    case Direction::forward: return forward;
    case Direction::backward_data: return backward_data;
    case Direction::backward_filter: break;
  }
  return backward_filter;
}

cudnnMathType_t math_of(const Candidate& c, cudnnDataType_t type) {
  if (!c.fast_math) return CUDNN_FMA_MATH;
  return type == CUDNN_DATA_FLOAT ? CUDNN_DEFAULT_MATH : CUDNN_TENSOR_OP_MATH;
}

// What a workspace-hungry candidate asks for: the larger of the input and output tensors,
// enough to hold a transposed copy of either, for a fast one; half that for an FMA one, so that
// an algorithm listed under both math types needs a different workspace under each. Rounded up
// to 256 bytes.
size_t workspace_bytes(const Candidate& c, const ConvProblem& p) {
  if (!c.needs_workspace) return 0;
  const size_t larger = std::max(byte_size(p.x), byte_size(p.y));
  const size_t bytes = c.fast_math ? larger : larger / 2;
  return (bytes + 255) / 256 * 256;
}

// The candidate a call of `algorithm` runs under the descriptor's math type: the entry of that
// math type, else the algorithm's first; null for an algorithm the list does not offer.
const Candidate* find_candidate(Direction direction, int algorithm, cudnnMathType_t math) {
  const Candidate* any = nullptr;
  for (const Candidate& c : candidates(direction)) {
    if (c.algorithm != algorithm) continue;
    if (c.fast_math == (math != CUDNN_FMA_MATH)) return &c;
    if (any == nullptr) any = &c;
  }
  return any;
}

const char* name(Direction direction) {
  switch (direction) {
    case Direction::forward: return "forward";
    case Direction::backward_data: return "backward-data";
    case Direction::backward_filter: break;
  }
  return "backward-filter";
}

cudnnStatus_t needed_workspace(const char* function, Direction direction, int algorithm,
                               const ConvProblem& p, size_t* bytes) {
  const Candidate* c = find_candidate(direction, algorithm, p.math);
  if (c == nullptr)
    return failure(CUDNN_STATUS_NOT_SUPPORTED, function, name(direction), " algorithm ", algorithm,
                   " is not offered");
  *bytes = workspace_bytes(*c, p);
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

// Runs one direction. `a` and `b` are the inputs and `out` the output in the argument order of
// the cuDNN call: forward (x, w) -> y, backward data (dy, w) -> dx, backward filter (x, dy) -> dw.
void convolve(Direction direction, const ConvProblem& p, const void* a, const void* b, void* out,
              float alpha, float beta) {
  switch (direction) {
    case Direction::forward: {
      const std::vector<float> x = load_nchw(p.x, a), w = load_nchw(p.w, b);
      std::vector<float> y(static_cast<size_t>(p.y.count()));
      rddp::cpu::conv2d_forward<float>(p.shape, x.data(), w.data(), y.data());
      store_nchw(p.y, y.data(), alpha, beta, out);
      break;
    }
    case Direction::backward_data: {
      const std::vector<float> dy = load_nchw(p.y, a), w = load_nchw(p.w, b);
      std::vector<float> dx(static_cast<size_t>(p.x.count()));
      rddp::cpu::conv2d_backward_data<float>(p.shape, dy.data(), w.data(), dx.data());
      store_nchw(p.x, dx.data(), alpha, beta, out);
      break;
    }
    case Direction::backward_filter: {
      const std::vector<float> x = load_nchw(p.x, a), dy = load_nchw(p.y, b);
      std::vector<float> dw(static_cast<size_t>(p.w.count()));
      rddp::cpu::conv2d_backward_filter<float>(p.shape, x.data(), dy.data(), dw.data());
      store_nchw(p.w, dw.data(), alpha, beta, out);
      break;
    }
  }
}

namespace {

// The call's three data arguments, in its argument order, with their names and sizes.
struct Operand {
  const char* name;
  size_t bytes;
};
struct Operands {
  Operand a, b, out;
};
Operands operands(Direction direction, const ConvProblem& p) {
  switch (direction) {
    case Direction::forward:
      return {{"x", byte_size(p.x)}, {"w", byte_size(p.w)}, {"y", byte_size(p.y)}};
    case Direction::backward_data:
      return {{"dy", byte_size(p.y)}, {"w", byte_size(p.w)}, {"dx", byte_size(p.x)}};
    case Direction::backward_filter: break;
  }
  return {{"x", byte_size(p.x)}, {"dy", byte_size(p.y)}, {"dw", byte_size(p.w)}};
}

bool overlap(const void* p, size_t p_bytes, const void* q, size_t q_bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(q);
  return p_bytes > 0 && q_bytes > 0 && a < b + q_bytes && b < a + p_bytes;
}

}  // namespace

// Device memory for every operand, and no two of them sharing bytes where cuDNN would read one
// while writing the other: the output over an input, or the workspace (`scratch_bytes` of it,
// what the call overwrites) over any tensor. The computation here works on copies and would not
// notice; the GPU's kernels would read what they had just written.
cudnnStatus_t check_operands(const char* function, Direction direction, const ConvProblem& p,
                             const void* a, const void* b, const void* out, const void* workspace,
                             size_t workspace_size, size_t scratch_bytes) {
  const Operands o = operands(direction, p);
  FAKE_CUDNN_TRY(check_device(function, o.a.name, a, o.a.bytes));
  FAKE_CUDNN_TRY(check_device(function, o.b.name, b, o.b.bytes));
  FAKE_CUDNN_TRY(check_device(function, o.out.name, out, o.out.bytes));
  if (workspace != nullptr && workspace_size > 0)
    FAKE_CUDNN_TRY(check_device(function, "the workspace", workspace, workspace_size));
  for (const auto& [input, operand] : {std::pair{a, o.a}, std::pair{b, o.b}})
    if (overlap(out, o.out.bytes, input, operand.bytes))
      return failure(CUDNN_STATUS_BAD_PARAM, function, o.out.name, " overlaps ", operand.name);
  if (workspace != nullptr)
    for (const auto& [tensor, operand] :
         {std::pair{a, o.a}, std::pair{b, o.b}, std::pair<const void*, Operand>{out, o.out}})
      if (overlap(workspace, scratch_bytes, tensor, operand.bytes))
        return failure(CUDNN_STATUS_BAD_PARAM, function, "the workspace (", scratch_bytes,
                       " bytes used) overlaps ", operand.name);
  return CUDNN_STATUS_SUCCESS;
}

namespace {

const char* math_name(cudnnMathType_t math) {
  switch (math) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tensor-op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor-op-allow-conversion";
    case CUDNN_FMA_MATH: return "fma";
  }
  return "unknown";
}

// What the call log keeps of a convolution run: the algorithm as the candidate list describes
// it under the descriptor's math type, and the input's layout.
void log_convolution(const char* function, Direction direction, int algorithm,
                     const ConvProblem& p) {
  const Candidate* c = find_candidate(direction, algorithm, p.math);
  emu::log_call(std::string(function) + ": algorithm " + std::to_string(algorithm) + ", " +
                (c != nullptr && c->determinism == CUDNN_DETERMINISTIC ? "deterministic"
                                                                        : "non-deterministic") +
                ", " + math_name(p.math) + " math, " +
                (p.x.format == CUDNN_TENSOR_NHWC ? "nhwc" : "nchw"));
}

cudnnStatus_t run(const char* function, Direction direction, cudnnHandle_t handle,
                  const void* alpha, cudnnTensorDescriptor_t x_desc, cudnnFilterDescriptor_t w_desc,
                  cudnnConvolutionDescriptor_t conv_desc, cudnnTensorDescriptor_t y_desc,
                  int algorithm, void* workspace, size_t workspace_size, const void* beta,
                  const void* a, const void* b, void* out) {
  FAKE_CUDNN_TRY(check_handle(function, handle));
  ConvProblem p;
  FAKE_CUDNN_TRY(describe(function, x_desc, w_desc, conv_desc, y_desc, &p));
  FAKE_CUDNN_TRY(check_scalars(function, alpha, beta));
  size_t needed = 0;
  FAKE_CUDNN_TRY(needed_workspace(function, direction, algorithm, p, &needed));
  if (needed > workspace_size || (needed > 0 && workspace == nullptr))
    return failure(CUDNN_STATUS_BAD_PARAM, function, name(direction), " algorithm ", algorithm,
                   " needs ", needed, " bytes of workspace, given ",
                   workspace == nullptr ? 0 : workspace_size);
  FAKE_CUDNN_TRY(
      check_operands(function, direction, p, a, b, out, workspace, workspace_size, needed));
  if (emu::logging_calls()) log_convolution(function, direction, algorithm, p);
  const float alpha_value = scalar(alpha), beta_value = scalar(beta);
  emu::enqueue(handle->stream, [=] {
    poison(workspace, needed);
    convolve(direction, p, a, b, out, alpha_value, beta_value);
  });
  return CUDNN_STATUS_SUCCESS;
}

// Fabricated milliseconds: the direction's multiply-adds at a nominal 1 TFLOP/s, scaled by the
// candidate's place in the list.
float fabricated_time(const Candidate& c, const ConvProblem& p) {
  const rddp::ConvShape& s = p.shape;
  const double flops =
      2.0 * s.batch * s.out_channels * s.in_channels * s.kernel * s.kernel * s.out_h() * s.out_w();
  return static_cast<float>(flops / 1e9 * c.relative_time);
}

template <typename Perf>
Perf perf_entry(const Candidate& c, const ConvProblem& p, cudnnStatus_t status, float time) {
  Perf perf;
  std::memset(&perf, 0, sizeof perf);
  perf.algo = static_cast<decltype(perf.algo)>(c.algorithm);
  perf.status = status;
  perf.time = time;
  perf.memory = workspace_bytes(c, p);
  perf.determinism = c.determinism;
  perf.mathType = math_of(c, p.x.type);
  return perf;
}

cudnnStatus_t check_request(const char* function, int requested, const int* returned,
                            const void* perf) {
  if (requested < 1 || returned == nullptr || perf == nullptr)
    return failure(CUDNN_STATUS_BAD_PARAM, function,
                   "requestedAlgoCount must be >= 1 and the results non-null");
  return CUDNN_STATUS_SUCCESS;
}

// cuDNN's heuristic list: every candidate, in the list's order, nothing run or timed.
template <typename Perf>
cudnnStatus_t heuristic(const char* function, Direction direction, cudnnHandle_t handle,
                        cudnnTensorDescriptor_t x_desc, cudnnFilterDescriptor_t w_desc,
                        cudnnConvolutionDescriptor_t conv_desc, cudnnTensorDescriptor_t y_desc,
                        int requested, int* returned, Perf* perf) {
  FAKE_CUDNN_TRY(check_handle(function, handle));
  ConvProblem p;
  FAKE_CUDNN_TRY(describe(function, x_desc, w_desc, conv_desc, y_desc, &p));
  FAKE_CUDNN_TRY(check_request(function, requested, returned, perf));
  const std::vector<Candidate>& list = candidates(direction);
  const int count = std::min(requested, static_cast<int>(list.size()));
  for (int i = 0; i < count; ++i)
    perf[i] = perf_entry<Perf>(list[static_cast<size_t>(i)], p, CUDNN_STATUS_SUCCESS, -1.0f);
  *returned = count;
  return CUDNN_STATUS_SUCCESS;
}

// A timed search: each candidate whose workspace fits runs for real on the given buffers (the
// output keeps the last one's result); the others are reported as unable to run, after the
// ones that ran, as cuDNN sorts failures last. The whole given workspace is scratch to a search.
template <typename Perf>
cudnnStatus_t search(const char* function, Direction direction, cudnnHandle_t handle,
                     cudnnTensorDescriptor_t x_desc, cudnnFilterDescriptor_t w_desc,
                     cudnnConvolutionDescriptor_t conv_desc, cudnnTensorDescriptor_t y_desc,
                     const void* a, const void* b, void* out, int requested, int* returned,
                     Perf* perf, void* workspace, size_t workspace_size) {
  FAKE_CUDNN_TRY(check_handle(function, handle));
  ConvProblem p;
  FAKE_CUDNN_TRY(describe(function, x_desc, w_desc, conv_desc, y_desc, &p));
  FAKE_CUDNN_TRY(check_request(function, requested, returned, perf));
  const size_t available = workspace == nullptr ? 0 : workspace_size;
  FAKE_CUDNN_TRY(
      check_operands(function, direction, p, a, b, out, workspace, workspace_size, available));
  std::vector<Perf> ran, refused;
  for (const Candidate& c : candidates(direction)) {
    if (workspace_bytes(c, p) > available) {
      // The value of the deprecated CUDNN_STATUS_ALLOC_FAILED, which a search reports for a
      // candidate whose workspace it was not given.
      refused.push_back(
          perf_entry<Perf>(c, p, CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, -1.0f));
      continue;
    }
    ran.push_back(perf_entry<Perf>(c, p, CUDNN_STATUS_SUCCESS, fabricated_time(c, p)));
    emu::enqueue(handle->stream, [=] {
      poison(workspace, available);
      convolve(direction, p, a, b, out, 1.0f, 0.0f);
    });
  }
  ran.insert(ran.end(), refused.begin(), refused.end());
  const int count = std::min(requested, static_cast<int>(ran.size()));
  std::copy_n(ran.begin(), count, perf);
  *returned = count;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t workspace_size(const char* function, Direction direction, cudnnHandle_t handle,
                             cudnnTensorDescriptor_t x_desc, cudnnFilterDescriptor_t w_desc,
                             cudnnConvolutionDescriptor_t conv_desc, cudnnTensorDescriptor_t y_desc,
                             int algorithm, size_t* bytes) {
  FAKE_CUDNN_TRY(check_handle(function, handle));
  ConvProblem p;
  FAKE_CUDNN_TRY(describe(function, x_desc, w_desc, conv_desc, y_desc, &p));
  if (bytes == nullptr) return failure(CUDNN_STATUS_BAD_PARAM, function, "sizeInBytes is null");
  return needed_workspace(function, direction, algorithm, p, bytes);
}

cudnnStatus_t max_count(const char* function, cudnnHandle_t handle, int* count, int value) {
  FAKE_CUDNN_TRY(check_handle(function, handle));
  if (count == nullptr) return failure(CUDNN_STATUS_BAD_PARAM, function, "count is null");
  *count = value;
  return CUDNN_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// BatchNorm.

bool spatial(cudnnBatchNormMode_t mode) { return mode == CUDNN_BATCHNORM_SPATIAL; }

// The activations (x, y, dy, dx share dimensions and type; each may have its own format) and
// the 1xCx1x1 float parameter descriptor.
cudnnStatus_t check_batchnorm(const char* function, cudnnBatchNormMode_t mode,
                              std::initializer_list<cudnnTensorDescriptor_t> data,
                              cudnnTensorDescriptor_t params, double epsilon) {
  if (!spatial(mode))
    return failure(CUDNN_STATUS_NOT_SUPPORTED, function, "mode ", static_cast<int>(mode),
                   " is not SPATIAL");
  const Layout* first = nullptr;
  for (cudnnTensorDescriptor_t d : data) {
    FAKE_CUDNN_TRY(check_layout(function, "a data descriptor", d, d ? &d->layout : nullptr));
    const Layout& l = d->layout;
    if (first == nullptr) {
      first = &l;
      continue;
    }
    if (l.n != first->n || l.c != first->c || l.h != first->h || l.w != first->w ||
        l.type != first->type)
      return failure(CUDNN_STATUS_BAD_PARAM, function,
                     "the data descriptors differ in dimensions or type");
  }
  FAKE_CUDNN_TRY(check_layout(function, "the parameter descriptor", params,
                              params ? &params->layout : nullptr));
  const Layout& q = params->layout;
  if (q.n != 1 || q.c != first->c || q.h != 1 || q.w != 1 || q.type != CUDNN_DATA_FLOAT)
    return failure(CUDNN_STATUS_BAD_PARAM, function, "the parameter descriptor must be 1x",
                   first->c, "x1x1 float");
  if (!(epsilon >= CUDNN_BN_MIN_EPSILON))
    return failure(CUDNN_STATUS_BAD_PARAM, function, "epsilon ", epsilon, " is below ",
                   CUDNN_BN_MIN_EPSILON);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t check_parameters(const char* function, int channels,
                               std::initializer_list<std::pair<const char*, const void*>> list) {
  for (const auto& [name, p] : list)
    FAKE_CUDNN_TRY(check_device(function, name, p, static_cast<size_t>(channels) * sizeof(float)));
  return CUDNN_STATUS_SUCCESS;
}

struct ChannelStatistics {
  double mean = 0.0, biased = 0.0, unbiased = 0.0;
};

// Two passes over one channel of dense NCHW data: the mean, then squared deviations from it,
// which do not cancel the way sum(x^2) - n * mean^2 does. Sums in double.
ChannelStatistics statistics(const Layout& d, const float* x, int c) {
  const int64_t plane = d.plane(), count = static_cast<int64_t>(d.n) * plane;
  double sum = 0.0;
  for (int n = 0; n < d.n; ++n) {
    const float* x_nc = x + (static_cast<int64_t>(n) * d.c + c) * plane;
    for (int64_t i = 0; i < plane; ++i) sum += x_nc[i];
  }
  ChannelStatistics s;
  s.mean = sum / static_cast<double>(count);
  double squares = 0.0;
  for (int n = 0; n < d.n; ++n) {
    const float* x_nc = x + (static_cast<int64_t>(n) * d.c + c) * plane;
    for (int64_t i = 0; i < plane; ++i) {
      const double deviation = x_nc[i] - s.mean;
      squares += deviation * deviation;
    }
  }
  s.biased = squares / static_cast<double>(count);
  s.unbiased = count > 1 ? squares / static_cast<double>(count - 1) : 0.0;
  return s;
}

// y = x * scale + shift over one channel, in float as the CPU twin evaluates it.
void affine_channel(const Layout& d, const float* x, int c, double scale, double shift, float* y) {
  const int64_t plane = d.plane();
  const float scale_f = static_cast<float>(scale), shift_f = static_cast<float>(shift);
  for (int n = 0; n < d.n; ++n) {
    const int64_t offset = (static_cast<int64_t>(n) * d.c + c) * plane;
    for (int64_t i = 0; i < plane; ++i) y[offset + i] = x[offset + i] * scale_f + shift_f;
  }
}

struct TrainingForward {
  Layout x, y;
  const void* x_data;
  void* y_data;
  const float *scale, *bias;
  float *running_mean, *running_var, *save_mean, *save_invstd;
  double factor, epsilon;
  float alpha, beta;

  void operator()() const {
    const std::vector<float> xs = load_nchw(x, x_data);
    std::vector<float> ys(xs.size());
#pragma omp parallel for schedule(static) if (x.count() >= kParallelElements)
    for (int c = 0; c < x.c; ++c) {
      const ChannelStatistics s = statistics(x, xs.data(), c);
      const double invstd = 1.0 / std::sqrt(s.biased + epsilon);
      if (running_mean != nullptr) {
        running_mean[c] = static_cast<float>((1.0 - factor) * running_mean[c] + factor * s.mean);
        running_var[c] = static_cast<float>((1.0 - factor) * running_var[c] + factor * s.unbiased);
      }
      if (save_mean != nullptr) {
        save_mean[c] = static_cast<float>(s.mean);
        save_invstd[c] = static_cast<float>(invstd);
      }
      const double gain = invstd * scale[c];
      affine_channel(x, xs.data(), c, gain, bias[c] - s.mean * gain, ys.data());
    }
    store_nchw(y, ys.data(), alpha, beta, y_data);
  }
};

struct InferenceForward {
  Layout x, y;
  const void* x_data;
  void* y_data;
  const float *scale, *bias, *mean, *variance;
  double epsilon;
  float alpha, beta;

  void operator()() const {
    const std::vector<float> xs = load_nchw(x, x_data);
    std::vector<float> ys(xs.size());
#pragma omp parallel for schedule(static) if (x.count() >= kParallelElements)
    for (int c = 0; c < x.c; ++c) {
      const double invstd = 1.0 / std::sqrt(static_cast<double>(variance[c]) + epsilon);
      const double gain = invstd * scale[c];
      affine_channel(x, xs.data(), c, gain, bias[c] - mean[c] * gain, ys.data());
    }
    store_nchw(y, ys.data(), alpha, beta, y_data);
  }
};

struct Backward {
  Layout x, dy, dx;
  const void *x_data, *dy_data;
  void* dx_data;
  const float *scale, *saved_mean, *saved_invstd;
  float *dscale, *dbias;
  double epsilon;
  float alpha_data, beta_data, alpha_param, beta_param;

  void operator()() const {
    const std::vector<float> xs = load_nchw(x, x_data);
    const std::vector<float> dys = load_nchw(dy, dy_data);
    std::vector<float> dxs(xs.size());
    const int64_t plane = x.plane(), count = static_cast<int64_t>(x.n) * plane;
#pragma omp parallel for schedule(static) if (x.count() >= kParallelElements)
    for (int c = 0; c < x.c; ++c) {
      double mean = 0.0, invstd = 0.0;
      if (saved_mean != nullptr) {
        mean = saved_mean[c];
        invstd = saved_invstd[c];
      } else {
        const ChannelStatistics s = statistics(x, xs.data(), c);
        mean = s.mean;
        invstd = 1.0 / std::sqrt(s.biased + epsilon);
      }
      double sum_dy = 0.0, sum_dy_xhat = 0.0;
      for (int n = 0; n < x.n; ++n) {
        const int64_t offset = (static_cast<int64_t>(n) * x.c + c) * plane;
        for (int64_t i = 0; i < plane; ++i) {
          sum_dy += dys[offset + i];
          sum_dy_xhat += dys[offset + i] * ((xs[offset + i] - mean) * invstd);
        }
      }
      dbias[c] =
          blend(alpha_param, static_cast<float>(sum_dy), beta_param, [&] { return dbias[c]; });
      dscale[c] = blend(alpha_param, static_cast<float>(sum_dy_xhat), beta_param,
                        [&] { return dscale[c]; });
      // dx = gamma * invstd / n * (n * dy - sum(dy) - xhat * sum(dy * xhat)).
      const double n_inv = 1.0 / static_cast<double>(count);
      const double gain = scale[c] * invstd;
      const double xhat_coef = gain * sum_dy_xhat * n_inv, shift = gain * sum_dy * n_inv;
      for (int n = 0; n < x.n; ++n) {
        const int64_t offset = (static_cast<int64_t>(n) * x.c + c) * plane;
        for (int64_t i = 0; i < plane; ++i) {
          const double xhat = (xs[offset + i] - mean) * invstd;
          dxs[offset + i] = static_cast<float>(dys[offset + i] * gain - xhat * xhat_coef - shift);
        }
      }
    }
    store_nchw(dx, dxs.data(), alpha_data, beta_data, dx_data);
  }
};

// The training forward and backward; `function` names the caller in errors.
cudnnStatus_t training_forward(
    const char* function, cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void* alpha,
    const void* beta,
    const cudnnTensorDescriptor_t xDesc, const void* x, const cudnnTensorDescriptor_t yDesc,
    void* y, const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc, const void* bnScale,
    const void* bnBias, double exponentialAverageFactor, void* resultRunningMean,
    void* resultRunningVariance, double epsilon, void* resultSaveMean,
    void* resultSaveInvVariance) {
  FAKE_CUDNN_TRY(check_handle(function, handle));
  FAKE_CUDNN_TRY(check_batchnorm(function, mode, {xDesc, yDesc}, bnScaleBiasMeanVarDesc, epsilon));
  FAKE_CUDNN_TRY(check_scalars(function, alpha, beta));
  const Layout &xl = xDesc->layout, &yl = yDesc->layout;
  if (static_cast<int64_t>(xl.n) * xl.plane() < 2)
    return failure(CUDNN_STATUS_BAD_PARAM, function,
                   "a channel of one value has no variance to normalise by");
  if ((resultRunningMean == nullptr) != (resultRunningVariance == nullptr))
    return failure(CUDNN_STATUS_BAD_PARAM, function,
                   "the running mean and variance must be both given or both null");
  if ((resultSaveMean == nullptr) != (resultSaveInvVariance == nullptr))
    return failure(CUDNN_STATUS_BAD_PARAM, function,
                   "the saved mean and inverse variance must be both given or both null");
  FAKE_CUDNN_TRY(check_device(function, "x", x, byte_size(xl)));
  FAKE_CUDNN_TRY(check_device(function, "y", y, byte_size(yl)));
  FAKE_CUDNN_TRY(check_parameters(function, xl.c, {{"bnScale", bnScale}, {"bnBias", bnBias}}));
  if (resultRunningMean != nullptr)
    FAKE_CUDNN_TRY(check_parameters(function, xl.c,
                                    {{"resultRunningMean", resultRunningMean},
                                     {"resultRunningVariance", resultRunningVariance}}));
  if (resultSaveMean != nullptr)
    FAKE_CUDNN_TRY(check_parameters(
        function, xl.c,
        {{"resultSaveMean", resultSaveMean}, {"resultSaveInvVariance", resultSaveInvVariance}}));
  const TrainingForward work{xl,
                             yl,
                             x,
                             y,
                             static_cast<const float*>(bnScale),
                             static_cast<const float*>(bnBias),
                             static_cast<float*>(resultRunningMean),
                             static_cast<float*>(resultRunningVariance),
                             static_cast<float*>(resultSaveMean),
                             static_cast<float*>(resultSaveInvVariance),
                             exponentialAverageFactor,
                             epsilon,
                             scalar(alpha),
                             scalar(beta)};
  emu::enqueue(handle->stream, work);
  return CUDNN_STATUS_SUCCESS;
}


cudnnStatus_t training_backward(
    const char* function, cudnnHandle_t handle, cudnnBatchNormMode_t mode,
    const void* alphaDataDiff,
    const void* betaDataDiff, const void* alphaParamDiff, const void* betaParamDiff,
    const cudnnTensorDescriptor_t xDesc, const void* x, const cudnnTensorDescriptor_t dyDesc,
    const void* dy, const cudnnTensorDescriptor_t dxDesc, void* dx,
    const cudnnTensorDescriptor_t dBnScaleBiasDesc, const void* bnScale, void* dBnScaleResult,
    void* dBnBiasResult, double epsilon, const void* savedMean, const void* savedInvVariance) {
  FAKE_CUDNN_TRY(check_handle(function, handle));
  FAKE_CUDNN_TRY(
      check_batchnorm(function, mode, {xDesc, dyDesc, dxDesc}, dBnScaleBiasDesc, epsilon));
  FAKE_CUDNN_TRY(check_scalars(function, alphaDataDiff, betaDataDiff));
  FAKE_CUDNN_TRY(check_scalars(function, alphaParamDiff, betaParamDiff));
  if ((savedMean == nullptr) != (savedInvVariance == nullptr))
    return failure(CUDNN_STATUS_BAD_PARAM, function,
                   "the saved mean and inverse variance must be both given or both null");
  const Layout &xl = xDesc->layout, &dyl = dyDesc->layout, &dxl = dxDesc->layout;
  FAKE_CUDNN_TRY(check_device(function, "x", x, byte_size(xl)));
  FAKE_CUDNN_TRY(check_device(function, "dy", dy, byte_size(dyl)));
  FAKE_CUDNN_TRY(check_device(function, "dx", dx, byte_size(dxl)));
  FAKE_CUDNN_TRY(check_parameters(function, xl.c,
                                  {{"bnScale", bnScale},
                                   {"dBnScaleResult", dBnScaleResult},
                                   {"dBnBiasResult", dBnBiasResult}}));
  if (savedMean != nullptr)
    FAKE_CUDNN_TRY(check_parameters(
        function, xl.c, {{"savedMean", savedMean}, {"savedInvVariance", savedInvVariance}}));
  const Backward work{xl,
                      dyl,
                      dxl,
                      x,
                      dy,
                      dx,
                      static_cast<const float*>(bnScale),
                      static_cast<const float*>(savedMean),
                      static_cast<const float*>(savedInvVariance),
                      static_cast<float*>(dBnScaleResult),
                      static_cast<float*>(dBnBiasResult),
                      epsilon,
                      scalar(alphaDataDiff),
                      scalar(betaDataDiff),
                      scalar(alphaParamDiff),
                      scalar(betaParamDiff)};
  emu::enqueue(handle->stream, work);
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace
}  // namespace fake_cudnn

using namespace fake_cudnn;

extern "C" {

// ---------------------------------------------------------------------------------------------
// Library, handles, errors.

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

const char* cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
    case CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE: return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
    case CUDNN_STATUS_NOT_SUPPORTED_LAYOUT: return "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT";
    case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED:
      return "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED:
      return "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED";
    default: break;
  }
  // cuDNN 9 refines each category into sub-codes; the others are named by their category.
  switch (CUDNN_STATUS_CATEGORY(status)) {
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    default: return "CUDNN_STATUS_UNKNOWN";
  }
}

void cudnnGetLastErrorString(char* message, size_t max_size) {
  if (message == nullptr || max_size == 0) return;
  const size_t length = std::min(last_error.size(), max_size - 1);
  std::memcpy(message, last_error.data(), length);
  message[length] = '\0';
}

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  if (handle == nullptr) return failure(CUDNN_STATUS_BAD_PARAM, "cudnnCreate", "handle is null");
  *handle = new cudnnContext;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
  FAKE_CUDNN_TRY(check_handle("cudnnSetStream", handle));
  handle->stream = streamId;
  return CUDNN_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Descriptors.

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* tensorDesc) {
  return create_descriptor("cudnnCreateTensorDescriptor", tensorDesc);
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
  delete tensorDesc;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc,
                                         cudnnTensorFormat_t format, cudnnDataType_t dataType,
                                         int n, int c, int h, int w) {
  const char* function = "cudnnSetTensor4dDescriptor";
  if (tensorDesc == nullptr) return failure(CUDNN_STATUS_BAD_PARAM, function, "tensorDesc is null");
  return set_layout(function, &tensorDesc->layout, format, dataType, n, c, h, w);
}

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* filterDesc) {
  return create_descriptor("cudnnCreateFilterDescriptor", filterDesc);
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc) {
  delete filterDesc;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t filterDesc,
                                         cudnnDataType_t dataType, cudnnTensorFormat_t format,
                                         int k, int c, int h, int w) {
  const char* function = "cudnnSetFilter4dDescriptor";
  if (filterDesc == nullptr) return failure(CUDNN_STATUS_BAD_PARAM, function, "filterDesc is null");
  return set_layout(function, &filterDesc->layout, format, dataType, k, c, h, w);
}

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* convDesc) {
  return create_descriptor("cudnnCreateConvolutionDescriptor", convDesc);
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc) {
  delete convDesc;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t convDesc, int pad_h,
                                              int pad_w, int u, int v, int dilation_h,
                                              int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType) {
  const char* function = "cudnnSetConvolution2dDescriptor";
  if (convDesc == nullptr) return failure(CUDNN_STATUS_BAD_PARAM, function, "convDesc is null");
  if (pad_h < 0 || pad_w < 0 || u < 1 || v < 1 || dilation_h < 1 || dilation_w < 1)
    return failure(CUDNN_STATUS_BAD_PARAM, function, "padding ", pad_h, "x", pad_w, ", stride ", u,
                   "x", v, ", dilation ", dilation_h, "x", dilation_w, " are invalid");
  if (dilation_h != 1 || dilation_w != 1)
    return failure(CUDNN_STATUS_NOT_SUPPORTED, function, "only dilation 1 is modelled");
  if (mode != CUDNN_CROSS_CORRELATION)
    return failure(CUDNN_STATUS_NOT_SUPPORTED, function, "only cross-correlation is modelled");
  if (computeType != CUDNN_DATA_FLOAT)
    return failure(CUDNN_STATUS_NOT_SUPPORTED, function, "only float compute is modelled");
  Convolution& conv = convDesc->convolution;
  const cudnnMathType_t math = conv.math;  // kept, as cuDNN keeps it
  conv = Convolution{true, pad_h, pad_w, u, v, math};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc,
                                          cudnnMathType_t mathType) {
  const char* function = "cudnnSetConvolutionMathType";
  if (convDesc == nullptr) return failure(CUDNN_STATUS_BAD_PARAM, function, "convDesc is null");
  if (mathType != CUDNN_DEFAULT_MATH && mathType != CUDNN_TENSOR_OP_MATH &&
      mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && mathType != CUDNN_FMA_MATH)
    return failure(CUDNN_STATUS_BAD_PARAM, function, "math type ", static_cast<int>(mathType),
                   " is unknown");
  convDesc->convolution.math = mathType;
  return CUDNN_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Convolution algorithms.

cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t handle, int* count) {
  return max_count("cudnnGetConvolutionForwardAlgorithmMaxCount", handle, count,
                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t handle, int* count) {
  return max_count("cudnnGetConvolutionBackwardDataAlgorithmMaxCount", handle, count,
                   CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t handle, int* count) {
  return max_count("cudnnGetConvolutionBackwardFilterAlgorithmMaxCount", handle, count,
                   CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnFilterDescriptor_t filterDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t destDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t* perfResults) {
  return heuristic("cudnnGetConvolutionForwardAlgorithm_v7", Direction::forward, handle, srcDesc,
                   filterDesc, convDesc, destDesc, requestedAlgoCount, returnedAlgoCount,
                   perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t gradDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t* perfResults) {
  return heuristic("cudnnGetConvolutionBackwardDataAlgorithm_v7", Direction::backward_data, handle,
                   gradDesc, filterDesc, convDesc, diffDesc, requestedAlgoCount, returnedAlgoCount,
                   perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t gradDesc, const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t* perfResults) {
  return heuristic("cudnnGetConvolutionBackwardFilterAlgorithm_v7", Direction::backward_filter,
                   handle, srcDesc, gradDesc, convDesc, diffDesc, requestedAlgoCount,
                   returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void* x,
    const cudnnFilterDescriptor_t wDesc, const void* w, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t yDesc, void* y, const int requestedAlgoCount,
    int* returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t* perfResults, void* workSpace,
    size_t workSpaceSizeInBytes) {
  return search("cudnnFindConvolutionForwardAlgorithmEx", Direction::forward, handle, xDesc, wDesc,
                convDesc, yDesc, x, w, y, requestedAlgoCount, returnedAlgoCount, perfResults,
                workSpace, workSpaceSizeInBytes);
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const void* w,
    const cudnnTensorDescriptor_t dyDesc, const void* dy,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc, void* dx,
    const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t* perfResults, void* workSpace, size_t workSpaceSizeInBytes) {
  return search("cudnnFindConvolutionBackwardDataAlgorithmEx", Direction::backward_data, handle,
                dxDesc, wDesc, convDesc, dyDesc, dy, w, dx, requestedAlgoCount, returnedAlgoCount,
                perfResults, workSpace, workSpaceSizeInBytes);
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void* x,
    const cudnnTensorDescriptor_t dyDesc, const void* y,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t dwDesc, void* dw,
    const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t* perfResults, void* workSpace,
    size_t workSpaceSizeInBytes) {
  return search("cudnnFindConvolutionBackwardFilterAlgorithmEx", Direction::backward_filter, handle,
                xDesc, dwDesc, convDesc, dyDesc, x, y, dw, requestedAlgoCount, returnedAlgoCount,
                perfResults, workSpace, workSpaceSizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnFilterDescriptor_t wDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc,
    cudnnConvolutionFwdAlgo_t algo, size_t* sizeInBytes) {
  return workspace_size("cudnnGetConvolutionForwardWorkspaceSize", Direction::forward, handle,
                        xDesc, wDesc, convDesc, yDesc, algo, sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc,
    cudnnConvolutionBwdDataAlgo_t algo, size_t* sizeInBytes) {
  return workspace_size("cudnnGetConvolutionBackwardDataWorkspaceSize", Direction::backward_data,
                        handle, dxDesc, wDesc, convDesc, dyDesc, algo, sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc,
    cudnnConvolutionBwdFilterAlgo_t algo, size_t* sizeInBytes) {
  return workspace_size("cudnnGetConvolutionBackwardFilterWorkspaceSize",
                        Direction::backward_filter, handle, xDesc, gradDesc, convDesc, dyDesc, algo,
                        sizeInBytes);
}

// ---------------------------------------------------------------------------------------------
// Convolutions.

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha,
                                      const cudnnTensorDescriptor_t xDesc, const void* x,
                                      const cudnnFilterDescriptor_t wDesc, const void* w,
                                      const cudnnConvolutionDescriptor_t convDesc,
                                      cudnnConvolutionFwdAlgo_t algo, void* workSpace,
                                      size_t workSpaceSizeInBytes, const void* beta,
                                      const cudnnTensorDescriptor_t yDesc, void* y) {
  return run("cudnnConvolutionForward", Direction::forward, handle, alpha, xDesc, wDesc, convDesc,
             yDesc, algo, workSpace, workSpaceSizeInBytes, beta, x, w, y);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void* w,
                                           const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void* workSpace,
                                           size_t workSpaceSizeInBytes, const void* beta,
                                           const cudnnTensorDescriptor_t dxDesc, void* dx) {
  return run("cudnnConvolutionBackwardData", Direction::backward_data, handle, alpha, dxDesc, wDesc,
             convDesc, dyDesc, algo, workSpace, workSpaceSizeInBytes, beta, dy, w, dx);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void* alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void* x,
                                             const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void* workSpace,
                                             size_t workSpaceSizeInBytes, const void* beta,
                                             const cudnnFilterDescriptor_t dwDesc, void* dw) {
  return run("cudnnConvolutionBackwardFilter", Direction::backward_filter, handle, alpha, xDesc,
             dwDesc, convDesc, dyDesc, algo, workSpace, workSpaceSizeInBytes, beta, x, dy, dw);
}

// ---------------------------------------------------------------------------------------------
// BatchNorm.

cudnnStatus_t cudnnDeriveBNTensorDescriptor(cudnnTensorDescriptor_t derivedBnDesc,
                                            const cudnnTensorDescriptor_t xDesc,
                                            cudnnBatchNormMode_t mode) {
  const char* function = "cudnnDeriveBNTensorDescriptor";
  if (derivedBnDesc == nullptr)
    return failure(CUDNN_STATUS_BAD_PARAM, function, "derivedBnDesc is null");
  FAKE_CUDNN_TRY(check_layout(function, "xDesc", xDesc, xDesc ? &xDesc->layout : nullptr));
  if (!spatial(mode))
    return failure(CUDNN_STATUS_NOT_SUPPORTED, function, "mode ", static_cast<int>(mode),
                   " is not SPATIAL");
  // Parameters are float for every supported data type: "(typeOf(x) == double) ? double : float".
  derivedBnDesc->layout =
      Layout{true, 1, xDesc->layout.c, 1, 1, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBatchNormalizationForwardTraining(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void* alpha, const void* beta,
    const cudnnTensorDescriptor_t xDesc, const void* x, const cudnnTensorDescriptor_t yDesc,
    void* y, const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc, const void* bnScale,
    const void* bnBias, double exponentialAverageFactor, void* resultRunningMean,
    void* resultRunningVariance, double epsilon, void* resultSaveMean,
    void* resultSaveInvVariance) {
  return training_forward("cudnnBatchNormalizationForwardTraining", handle, mode, alpha,
                          beta, xDesc, x, yDesc, y, bnScaleBiasMeanVarDesc, bnScale, bnBias,
                          exponentialAverageFactor, resultRunningMean, resultRunningVariance,
                          epsilon, resultSaveMean, resultSaveInvVariance);
}

cudnnStatus_t cudnnBatchNormalizationForwardInference(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void* alpha, const void* beta,
    const cudnnTensorDescriptor_t xDesc, const void* x, const cudnnTensorDescriptor_t yDesc,
    void* y, const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc, const void* bnScale,
    const void* bnBias, const void* estimatedMean, const void* estimatedVariance, double epsilon) {
  const char* function = "cudnnBatchNormalizationForwardInference";
  FAKE_CUDNN_TRY(check_handle(function, handle));
  FAKE_CUDNN_TRY(check_batchnorm(function, mode, {xDesc, yDesc}, bnScaleBiasMeanVarDesc, epsilon));
  FAKE_CUDNN_TRY(check_scalars(function, alpha, beta));
  const Layout &xl = xDesc->layout, &yl = yDesc->layout;
  FAKE_CUDNN_TRY(check_device(function, "x", x, byte_size(xl)));
  FAKE_CUDNN_TRY(check_device(function, "y", y, byte_size(yl)));
  FAKE_CUDNN_TRY(check_parameters(function, xl.c,
                                  {{"bnScale", bnScale},
                                   {"bnBias", bnBias},
                                   {"estimatedMean", estimatedMean},
                                   {"estimatedVariance", estimatedVariance}}));
  const InferenceForward work{xl,
                              yl,
                              x,
                              y,
                              static_cast<const float*>(bnScale),
                              static_cast<const float*>(bnBias),
                              static_cast<const float*>(estimatedMean),
                              static_cast<const float*>(estimatedVariance),
                              epsilon,
                              scalar(alpha),
                              scalar(beta)};
  emu::enqueue(handle->stream, work);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBatchNormalizationBackward(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void* alphaDataDiff,
    const void* betaDataDiff, const void* alphaParamDiff, const void* betaParamDiff,
    const cudnnTensorDescriptor_t xDesc, const void* x, const cudnnTensorDescriptor_t dyDesc,
    const void* dy, const cudnnTensorDescriptor_t dxDesc, void* dx,
    const cudnnTensorDescriptor_t dBnScaleBiasDesc, const void* bnScale, void* dBnScaleResult,
    void* dBnBiasResult, double epsilon, const void* savedMean, const void* savedInvVariance) {
  return training_backward("cudnnBatchNormalizationBackward", handle, mode,
                           alphaDataDiff, betaDataDiff, alphaParamDiff, betaParamDiff, xDesc, x,
                           dyDesc, dy, dxDesc, dx, dBnScaleBiasDesc, bnScale, dBnScaleResult,
                           dBnBiasResult, epsilon, savedMean, savedInvVariance);
}

}  // extern "C"
