// The host stand-in for cuDNN (fake_cudnn.cpp) against the CPU twins (src/cpu/conv2d.cpp,
// src/cpu/batchnorm.cpp): every direction of the convolution and every BatchNorm call in float,
// bfloat16 and half, NCHW and NHWC, with alpha and beta; the algorithm lists the engine's
// selection sorts through; the workspace destroyed as real cuDNN's scratch would be; and the
// refusals the engine's checks rely on. Buffers come from the emulated cudaMalloc, so that the
// fake's device-memory checks accept them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "resnet_ddp/cpu/layers.h"
#include "resnet_ddp/cuda/cudnn_batchnorm.h"
#include "resnet_ddp/error.h"
#include "fake_cudnn_testing.h"
#include "stream_work.h"

namespace {

using rddp::cpu::BatchNormShape;
using namespace fake_cudnn_testing;

// ---------------------------------------------------------------------------------------------
// Host-side tensors: dense NCHW float, encoded to and decoded from a type and a format.

struct Dims {
  int n, c, h, w;
  int64_t count() const { return static_cast<int64_t>(n) * c * h * w; }
};

size_t element_bytes(cudnnDataType_t type) { return type == CUDNN_DATA_FLOAT ? 4 : 2; }

int64_t storage_index(const Dims& d, cudnnTensorFormat_t format, int n, int c, int h, int w) {
  if (format == CUDNN_TENSOR_NHWC) return ((static_cast<int64_t>(n) * d.h + h) * d.w + w) * d.c + c;
  return ((static_cast<int64_t>(n) * d.c + c) * d.h + h) * d.w + w;
}

// Calls f(nchw_index, storage_index) for every element.
template <typename F>
void for_each_element(const Dims& d, cudnnTensorFormat_t format, F&& f) {
  int64_t i = 0;
  for (int n = 0; n < d.n; ++n)
    for (int c = 0; c < d.c; ++c)
      for (int h = 0; h < d.h; ++h)
        for (int w = 0; w < d.w; ++w) f(i++, storage_index(d, format, n, c, h, w));
}

float decode_one(const unsigned char* p, cudnnDataType_t type) {
  if (type == CUDNN_DATA_BFLOAT16) {
    __nv_bfloat16 v;
    std::memcpy(&v, p, sizeof v);
    return __bfloat162float(v);
  }
  if (type == CUDNN_DATA_HALF) {
    __half v;
    std::memcpy(&v, p, sizeof v);
    return __half2float(v);
  }
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void encode_one(float value, cudnnDataType_t type, unsigned char* p) {
  if (type == CUDNN_DATA_BFLOAT16) {
    const __nv_bfloat16 v = __float2bfloat16(value);
    std::memcpy(p, &v, sizeof v);
  } else if (type == CUDNN_DATA_HALF) {
    const __half v = __float2half(value);
    std::memcpy(p, &v, sizeof v);
  } else {
    std::memcpy(p, &value, sizeof value);
  }
}

// The value `type` stores for v.
float rounded(float v, cudnnDataType_t type) {
  unsigned char bytes[4];
  encode_one(v, type, bytes);
  return decode_one(bytes, type);
}

std::vector<unsigned char> encode(const std::vector<float>& nchw, const Dims& d,
                                  cudnnDataType_t type, cudnnTensorFormat_t format) {
  const size_t size = element_bytes(type);
  std::vector<unsigned char> bytes(static_cast<size_t>(d.count()) * size);
  for_each_element(d, format, [&](int64_t i, int64_t at) {
    encode_one(nchw[static_cast<size_t>(i)], type, &bytes[static_cast<size_t>(at) * size]);
  });
  return bytes;
}

std::vector<float> decode(const std::vector<unsigned char>& bytes, const Dims& d,
                          cudnnDataType_t type, cudnnTensorFormat_t format) {
  const size_t size = element_bytes(type);
  std::vector<float> nchw(static_cast<size_t>(d.count()));
  for_each_element(d, format, [&](int64_t i, int64_t at) {
    nchw[static_cast<size_t>(i)] = decode_one(&bytes[static_cast<size_t>(at) * size], type);
  });
  return nchw;
}

// Uniform values in [low, high), already representable in `type`.
std::vector<float> random_values(size_t count, cudnnDataType_t type, std::mt19937& rng,
                                 float low = -1.0f, float high = 1.0f) {
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> v(count);
  for (float& x : v) x = rounded(uniform(rng), type);
  return v;
}

// How far the fake may be from the CPU twin: the same float maths, rounded to `type` once.
double tolerance(cudnnDataType_t type, double expected) {
  const double unit = type == CUDNN_DATA_BFLOAT16 ? 1.0 / 128
                      : type == CUDNN_DATA_HALF   ? 1.0 / 1024
                                                  : 1e-5;
  return unit * (std::fabs(expected) + 1e-3);
}

// `floor` widens the bound where the result cancels terms much larger than itself.
void check_close(const std::vector<float>& got, const std::vector<float>& expected,
                 cudnnDataType_t type, const std::string& what, double floor = 0.0) {
  REQUIRE(got.size() == expected.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - expected[i]) <= tolerance(type, expected[i]) + floor) && bad++ < 3)
      FAIL_CHECK(what << ": element " << i << " is " << got[i] << ", expected " << expected[i]);
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << got.size() << " elements differ");
}

// ---------------------------------------------------------------------------------------------
// cuDNN objects, owned.

// Values on the device in a cuDNN type and memory format, written and read as float in the
// logical order (NCHW, or KCRS for filters).
struct DeviceValues {
  DeviceValues(const Dims& dims, cudnnDataType_t type, cudnnTensorFormat_t format)
      : d(dims),
        type(type),
        format(format),
        memory(static_cast<size_t>(dims.count()) * element_bytes(type)) {}

  void upload(const std::vector<float>& logical) {
    memory.upload(encode(logical, d, type, format));
  }
  std::vector<float> values() const { return decode(memory.download(), d, type, format); }
  void* get() const { return memory.get(); }

  Dims d;
  cudnnDataType_t type;
  cudnnTensorFormat_t format;
  DeviceBytes memory;
};

// A device tensor with its descriptor.
struct Tensor : DeviceValues {
  Tensor(const Dims& dims, cudnnDataType_t type, cudnnTensorFormat_t format)
      : DeviceValues(dims, type, format) {
    REQUIRE(cudnnCreateTensorDescriptor(&desc) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetTensor4dDescriptor(desc, format, type, d.n, d.c, d.h, d.w) ==
            CUDNN_STATUS_SUCCESS);
  }
  ~Tensor() { cudnnDestroyTensorDescriptor(desc); }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  cudnnTensorDescriptor_t desc = nullptr;
};

struct Filter : DeviceValues {
  Filter(const Dims& dims, cudnnDataType_t type, cudnnTensorFormat_t format)
      : DeviceValues(dims, type, format) {
    REQUIRE(cudnnCreateFilterDescriptor(&desc) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetFilter4dDescriptor(desc, type, format, d.n, d.c, d.h, d.w) ==
            CUDNN_STATUS_SUCCESS);
  }
  ~Filter() { cudnnDestroyFilterDescriptor(desc); }
  Filter(const Filter&) = delete;
  Filter& operator=(const Filter&) = delete;

  cudnnFilterDescriptor_t desc = nullptr;
};

struct Convolution {
  Convolution(int stride, int pad, cudnnMathType_t math = CUDNN_FMA_MATH) {
    REQUIRE(cudnnCreateConvolutionDescriptor(&desc) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetConvolution2dDescriptor(desc, pad, pad, stride, stride, 1, 1,
                                            CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT) == CUDNN_STATUS_SUCCESS);
    set_math(math);
  }
  ~Convolution() { cudnnDestroyConvolutionDescriptor(desc); }
  Convolution(const Convolution&) = delete;
  Convolution& operator=(const Convolution&) = delete;
  void set_math(cudnnMathType_t math) {
    REQUIRE(cudnnSetConvolutionMathType(desc, math) == CUDNN_STATUS_SUCCESS);
  }
  cudnnConvolutionDescriptor_t desc = nullptr;
};





// ---------------------------------------------------------------------------------------------
// One convolution problem on the device, with host copies of its inputs.


struct ConvProblem {
  ConvProblem(const ConvShape& shape, cudnnDataType_t type, cudnnTensorFormat_t format,
              std::mt19937& rng)
      : s(shape),
        x({s.batch, s.in_channels, s.in_h, s.in_w}, type, format),
        w({s.out_channels, s.in_channels, s.kernel, s.kernel}, type, format),
        y({s.batch, s.out_channels, s.out_h(), s.out_w()}, type, format),
        conv(s.stride, s.pad),
        host_x(random_values(static_cast<size_t>(x.d.count()), type, rng)),
        host_w(random_values(static_cast<size_t>(w.d.count()), type, rng)),
        host_dy(random_values(static_cast<size_t>(y.d.count()), type, rng)) {}

  ConvShape s;
  Tensor x;  // also dx
  Filter w;  // also dw
  Tensor y;  // also dy
  Convolution conv;
  std::vector<float> host_x, host_w, host_dy;
};


// One entry of an algorithm list, whatever the direction.
struct Algorithm {
  int algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t math;
};

template <typename Perf>
std::vector<Algorithm> as_algorithms(const std::vector<Perf>& perf, int returned) {
  std::vector<Algorithm> out;
  for (int i = 0; i < returned; ++i) {
    const Perf& p = perf[static_cast<size_t>(i)];
    out.push_back(
        {static_cast<int>(p.algo), p.status, p.time, p.memory, p.determinism, p.mathType});
  }
  return out;
}

std::vector<Algorithm> heuristic_list(cudnnHandle_t h, ConvProblem& p, Direction direction) {
  int count = 0, returned = 0;
  switch (direction) {
    case Direction::forward: {
      REQUIRE(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &count) == CUDNN_STATUS_SUCCESS);
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(count));
      REQUIRE(cudnnGetConvolutionForwardAlgorithm_v7(h, p.x.desc, p.w.desc, p.conv.desc, p.y.desc,
                                                     count, &returned,
                                                     perf.data()) == CUDNN_STATUS_SUCCESS);
      return as_algorithms(perf, returned);
    }
    case Direction::backward_data: {
      REQUIRE(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &count) == CUDNN_STATUS_SUCCESS);
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<size_t>(count));
      REQUIRE(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w.desc, p.y.desc, p.conv.desc,
                                                          p.x.desc, count, &returned,
                                                          perf.data()) == CUDNN_STATUS_SUCCESS);
      return as_algorithms(perf, returned);
    }
    case Direction::backward_filter: break;
  }
  REQUIRE(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &count) == CUDNN_STATUS_SUCCESS);
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<size_t>(count));
  REQUIRE(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x.desc, p.y.desc, p.conv.desc,
                                                        p.w.desc, count, &returned,
                                                        perf.data()) == CUDNN_STATUS_SUCCESS);
  return as_algorithms(perf, returned);
}

std::vector<Algorithm> timed_list(cudnnHandle_t h, ConvProblem& p, Direction direction,
                                  const DeviceBytes& workspace) {
  int count = 0, returned = 0;
  switch (direction) {
    case Direction::forward: {
      REQUIRE(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &count) == CUDNN_STATUS_SUCCESS);
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(count));
      REQUIRE(cudnnFindConvolutionForwardAlgorithmEx(h, p.x.desc, p.x.get(), p.w.desc, p.w.get(),
                                                     p.conv.desc, p.y.desc, p.y.get(), count,
                                                     &returned, perf.data(), workspace.get(),
                                                     workspace.bytes()) == CUDNN_STATUS_SUCCESS);
      return as_algorithms(perf, returned);
    }
    case Direction::backward_data: {
      REQUIRE(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &count) == CUDNN_STATUS_SUCCESS);
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<size_t>(count));
      REQUIRE(cudnnFindConvolutionBackwardDataAlgorithmEx(
                  h, p.w.desc, p.w.get(), p.y.desc, p.y.get(), p.conv.desc, p.x.desc, p.x.get(),
                  count, &returned, perf.data(), workspace.get(),
                  workspace.bytes()) == CUDNN_STATUS_SUCCESS);
      return as_algorithms(perf, returned);
    }
    case Direction::backward_filter: break;
  }
  REQUIRE(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &count) == CUDNN_STATUS_SUCCESS);
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<size_t>(count));
  REQUIRE(cudnnFindConvolutionBackwardFilterAlgorithmEx(
              h, p.x.desc, p.x.get(), p.y.desc, p.y.get(), p.conv.desc, p.w.desc, p.w.get(), count,
              &returned, perf.data(), workspace.get(), workspace.bytes()) == CUDNN_STATUS_SUCCESS);
  return as_algorithms(perf, returned);
}

cudnnStatus_t workspace_size(cudnnHandle_t h, ConvProblem& p, Direction direction, int algo,
                             size_t* bytes) {
  switch (direction) {
    case Direction::forward:
      return cudnnGetConvolutionForwardWorkspaceSize(h, p.x.desc, p.w.desc, p.conv.desc, p.y.desc,
                                                     static_cast<cudnnConvolutionFwdAlgo_t>(algo),
                                                     bytes);
    case Direction::backward_data:
      return cudnnGetConvolutionBackwardDataWorkspaceSize(
          h, p.w.desc, p.y.desc, p.conv.desc, p.x.desc,
          static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), bytes);
    case Direction::backward_filter: break;
  }
  return cudnnGetConvolutionBackwardFilterWorkspaceSize(
      h, p.x.desc, p.y.desc, p.conv.desc, p.w.desc,
      static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), bytes);
}

// Uploads the direction's inputs and runs it with `algo`.
cudnnStatus_t convolve(cudnnHandle_t h, ConvProblem& p, Direction direction, int algo,
                       void* workspace, size_t workspace_bytes, float alpha, float beta) {
  switch (direction) {
    case Direction::forward:
      p.x.upload(p.host_x);
      p.w.upload(p.host_w);
      return cudnnConvolutionForward(h, &alpha, p.x.desc, p.x.get(), p.w.desc, p.w.get(),
                                     p.conv.desc, static_cast<cudnnConvolutionFwdAlgo_t>(algo),
                                     workspace, workspace_bytes, &beta, p.y.desc, p.y.get());
    case Direction::backward_data:
      p.y.upload(p.host_dy);
      p.w.upload(p.host_w);
      return cudnnConvolutionBackwardData(h, &alpha, p.w.desc, p.w.get(), p.y.desc, p.y.get(),
                                          p.conv.desc,
                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(algo),
                                          workspace, workspace_bytes, &beta, p.x.desc, p.x.get());
    case Direction::backward_filter: break;
  }
  p.x.upload(p.host_x);
  p.y.upload(p.host_dy);
  return cudnnConvolutionBackwardFilter(h, &alpha, p.x.desc, p.x.get(), p.y.desc, p.y.get(),
                                        p.conv.desc,
                                        static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo),
                                        workspace, workspace_bytes, &beta, p.w.desc, p.w.get());
}

// The CPU twin's result of the direction, in float, NCHW (KCRS for the filter gradient).
std::vector<float> reference(const ConvProblem& p, Direction direction) {
  switch (direction) {
    case Direction::forward: {
      std::vector<float> y(static_cast<size_t>(p.y.d.count()));
      rddp::cpu::conv2d_forward<float>(p.s, p.host_x.data(), p.host_w.data(), y.data());
      return y;
    }
    case Direction::backward_data: {
      std::vector<float> dx(static_cast<size_t>(p.x.d.count()));
      rddp::cpu::conv2d_backward_data<float>(p.s, p.host_dy.data(), p.host_w.data(), dx.data());
      return dx;
    }
    case Direction::backward_filter: break;
  }
  std::vector<float> dw(static_cast<size_t>(p.w.d.count()));
  rddp::cpu::conv2d_backward_filter<float>(p.s, p.host_x.data(), p.host_dy.data(), dw.data());
  return dw;
}

// The direction's output buffer: its device bytes, and its values decoded to NCHW.
DeviceBytes& output_memory(ConvProblem& p, Direction direction) {
  return direction == Direction::forward         ? p.y.memory
         : direction == Direction::backward_data ? p.x.memory
                                                 : p.w.memory;
}
std::vector<float> output_values(const ConvProblem& p, Direction direction) {
  return direction == Direction::forward         ? p.y.values()
         : direction == Direction::backward_data ? p.x.values()
                                                 : p.w.values();
}
void upload_output(ConvProblem& p, Direction direction, const std::vector<float>& nchw) {
  if (direction == Direction::forward)
    p.y.upload(nchw);
  else if (direction == Direction::backward_data)
    p.x.upload(nchw);
  else
    p.w.upload(nchw);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

TEST_CASE("fake cuDNN: every convolution algorithm matches the CPU twin, with alpha and beta") {
  Handle handle;
  std::mt19937 rng(7);
  for (const ConvShape& s : kConvShapes)
    for (cudnnDataType_t type : kTypes)
      for (cudnnTensorFormat_t format : kFormats)
        for (Direction direction : kDirections) {
          ConvProblem p(s, type, format, rng);
          const std::vector<float> result = reference(p, direction);
          for (const Algorithm& a : heuristic_list(handle.handle, p, direction))
            for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -0.75f}}) {
              const std::string what = std::string(direction_name(direction)) + " " +
                                       type_name(type) + " " + format_name(format) + " algo " +
                                       std::to_string(a.algo) + " math " + std::to_string(a.math) +
                                       " alpha " + std::to_string(alpha) + " beta " +
                                       std::to_string(beta);
              CAPTURE(what);
              // beta 0 must not read the output: NaN there would show.
              std::vector<float> old;
              if (beta == 0.0f) {
                output_memory(p, direction).fill(0xff);
              } else {
                old = random_values(result.size(), type, rng);
                upload_output(p, direction, old);
              }
              std::vector<float> expected(result.size());
              for (size_t i = 0; i < result.size(); ++i)
                expected[i] = rounded(
                    beta == 0.0f ? alpha * result[i] : alpha * result[i] + beta * old[i], type);
              // The workspace the candidate asks for under its own math type, and 256 bytes
              // more that no call may touch.
              p.conv.set_math(a.math);
              size_t needed = 0;
              REQUIRE(workspace_size(handle.handle, p, direction, a.algo, &needed) ==
                      CUDNN_STATUS_SUCCESS);
              CHECK(needed == a.memory);
              DeviceBytes workspace(needed + 256);
              workspace.fill(0x11);
              REQUIRE(convolve(handle.handle, p, direction, a.algo, workspace.get(),
                               workspace.bytes(), alpha, beta) == CUDNN_STATUS_SUCCESS);
              check_close(output_values(p, direction), expected, type, what);
              const std::vector<unsigned char> scratch = workspace.download();
              size_t poisoned = 0, untouched = 0;
              for (size_t i = 0; i < needed; ++i) poisoned += scratch[i] == 0xff;
              for (size_t i = needed; i < scratch.size(); ++i) untouched += scratch[i] == 0x11;
              CHECK(poisoned == needed);
              CHECK(untouched == 256);
            }
        }
}

TEST_CASE("fake cuDNN: the algorithm lists, their workspaces and math types") {
  Handle handle;
  std::mt19937 rng(11);
  int count = 0;
  REQUIRE(cudnnGetConvolutionForwardAlgorithmMaxCount(handle.handle, &count) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(count == CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
  REQUIRE(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle.handle, &count) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(count == CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
  REQUIRE(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle.handle, &count) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(count == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);

  for (cudnnDataType_t type : kTypes) {
    CAPTURE(type_name(type));
    ConvProblem p(kConvShapes[0], type, CUDNN_TENSOR_NCHW, rng);
    const cudnnMathType_t fast =
        type == CUDNN_DATA_FLOAT ? CUDNN_DEFAULT_MATH : CUDNN_TENSOR_OP_MATH;
    const size_t larger = std::max(p.x.memory.bytes(), p.y.memory.bytes());
    const size_t scratch = (larger + 255) / 256 * 256;
    const size_t fma_scratch = (larger / 2 + 255) / 256 * 256;
    struct Expected {
      int algo;
      cudnnMathType_t math;
      cudnnDeterminism_t determinism;
      size_t memory;
    };
    const std::vector<Expected> forward = {
        {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, fast, CUDNN_DETERMINISTIC, scratch},
        {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_FMA_MATH, CUDNN_DETERMINISTIC,
         fma_scratch},
        {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_FMA_MATH, CUDNN_DETERMINISTIC, 0}};
    const std::vector<Expected> backward_data = {
        {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, fast, CUDNN_DETERMINISTIC, scratch},
        {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, CUDNN_FMA_MATH, CUDNN_NON_DETERMINISTIC, 0},
        {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_FMA_MATH, CUDNN_DETERMINISTIC, fma_scratch}};
    const std::vector<Expected> backward_filter = {
        {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, fast, CUDNN_NON_DETERMINISTIC, scratch},
        {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, fast, CUDNN_DETERMINISTIC, scratch},
        {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, CUDNN_FMA_MATH, CUDNN_NON_DETERMINISTIC, 0},
        {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_FMA_MATH, CUDNN_DETERMINISTIC,
         fma_scratch}};
    for (Direction direction : kDirections) {
      CAPTURE(direction_name(direction));
      const std::vector<Expected>& expected = direction == Direction::forward ? forward
                                              : direction == Direction::backward_data
                                                  ? backward_data
                                                  : backward_filter;
      const std::vector<Algorithm> list = heuristic_list(handle.handle, p, direction);
      REQUIRE(list.size() == expected.size());
      for (size_t i = 0; i < list.size(); ++i) {
        CAPTURE(i);
        CHECK(list[i].algo == expected[i].algo);
        CHECK(list[i].status == CUDNN_STATUS_SUCCESS);
        CHECK(list[i].math == expected[i].math);
        CHECK(list[i].determinism == expected[i].determinism);
        CHECK(list[i].memory == expected[i].memory);
        // The engine asks for the workspace under the candidate's own math type.
        p.conv.set_math(list[i].math);
        size_t bytes = 1;
        CHECK(workspace_size(handle.handle, p, direction, list[i].algo, &bytes) ==
              CUDNN_STATUS_SUCCESS);
        CHECK(bytes == expected[i].memory);
      }
      // A heuristic query may ask for fewer.
      if (direction == Direction::forward) {
        cudnnConvolutionFwdAlgoPerf_t one[1];
        int returned = 0;
        CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle.handle, p.x.desc, p.w.desc, p.conv.desc,
                                                     p.y.desc, 1, &returned,
                                                     one) == CUDNN_STATUS_SUCCESS);
        CHECK(returned == 1);
        CHECK(one[0].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
      }
      // An algorithm the list does not offer has no workspace size.
      size_t bytes = 0;
      CHECK(workspace_size(handle.handle, p, direction, 2 /* FFT in every direction */, &bytes) ==
            CUDNN_STATUS_NOT_SUPPORTED);
      CHECK(last_error().find("not offered") != std::string::npos);
    }
  }
}

TEST_CASE("fake cuDNN: a timed search runs what fits and lists the rest last") {
  Handle handle;
  std::mt19937 rng(13);
  for (cudnnDataType_t type : {CUDNN_DATA_FLOAT, CUDNN_DATA_BFLOAT16})
    for (cudnnTensorFormat_t format : kFormats)
      for (Direction direction : kDirections)
        for (bool enough : {false, true}) {
          CAPTURE(type_name(type));
          CAPTURE(format_name(format));
          CAPTURE(direction_name(direction));
          CAPTURE(enough);
          ConvProblem p(kConvShapes[1], type, format, rng);
          p.x.upload(p.host_x);
          p.w.upload(p.host_w);
          p.y.upload(p.host_dy);
          output_memory(p, direction).fill(0xff);
          const std::vector<Algorithm> heuristic = heuristic_list(handle.handle, p, direction);
          size_t largest = 0;
          for (const Algorithm& a : heuristic) largest = std::max(largest, a.memory);
          DeviceBytes workspace(enough ? largest + 100 : 0);
          workspace.fill(0x11);
          const std::vector<Algorithm> timed = timed_list(handle.handle, p, direction, workspace);
          REQUIRE(timed.size() == heuristic.size());
          size_t ran = 0;
          for (size_t i = 0; i < timed.size(); ++i) {
            const Algorithm& a = timed[i];
            CAPTURE(a.algo);
            const bool fits = a.memory <= workspace.bytes();
            CHECK((a.status == CUDNN_STATUS_SUCCESS) == fits);
            if (fits) {
              CHECK(i == ran);  // successes first, fastest first
              if (ran > 0) CHECK(a.time > timed[ran - 1].time);
              CHECK(a.time > 0.0f);
              ++ran;
            }
          }
          const auto without_workspace =
              static_cast<size_t>(std::count_if(heuristic.begin(), heuristic.end(),
                                                [](const Algorithm& a) { return a.memory == 0; }));
          CHECK(ran == (enough ? timed.size() : without_workspace));
          // The search computed the direction's result into its output buffer...
          const std::vector<float> result = reference(p, direction);
          std::vector<float> expected(result.size());
          for (size_t i = 0; i < result.size(); ++i) expected[i] = rounded(result[i], type);
          check_close(output_values(p, direction), expected, type, "search output");
          // ...and used the whole workspace it was given as scratch.
          size_t poisoned = 0;
          for (unsigned char b : workspace.download()) poisoned += b == 0xff;
          CHECK(poisoned == workspace.bytes());
        }
}

TEST_CASE("fake cuDNN: workspaces that are too small, and refused descriptors") {
  Handle handle;
  std::mt19937 rng(17);
  ConvProblem p(kConvShapes[0], CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, rng);
  p.conv.set_math(CUDNN_DEFAULT_MATH);
  const int algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  size_t needed = 0;
  REQUIRE(workspace_size(handle.handle, p, Direction::forward, algo, &needed) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(needed > 0);
  DeviceBytes workspace(needed);
  CHECK(convolve(handle.handle, p, Direction::forward, algo, workspace.get(), needed - 1, 1.0f,
                 0.0f) == CUDNN_STATUS_BAD_PARAM);
  CHECK(last_error().find("workspace") != std::string::npos);
  CHECK(convolve(handle.handle, p, Direction::forward, algo, nullptr, needed, 1.0f, 0.0f) ==
        CUDNN_STATUS_BAD_PARAM);
  // An algorithm without workspace runs with none.
  CHECK(convolve(handle.handle, p, Direction::forward, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                 nullptr, 0, 1.0f, 0.0f) == CUDNN_STATUS_SUCCESS);
  CHECK(convolve(handle.handle, p, Direction::forward, CUDNN_CONVOLUTION_FWD_ALGO_FFT, nullptr, 0,
                 1.0f, 0.0f) == CUDNN_STATUS_NOT_SUPPORTED);

  // An output whose dimensions are not the convolution's.
  Tensor wrong({p.s.batch, p.s.out_channels, p.s.out_h() + 1, p.s.out_w()}, CUDNN_DATA_FLOAT,
               CUDNN_TENSOR_NCHW);
  const float one = 1.0f, zero = 0.0f;
  CHECK(cudnnConvolutionForward(handle.handle, &one, p.x.desc, p.x.get(), p.w.desc, p.w.get(),
                                p.conv.desc, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0,
                                &zero, wrong.desc, wrong.get()) == CUDNN_STATUS_BAD_PARAM);
  CHECK(last_error().find("the convolution gives") != std::string::npos);
  size_t bytes = 0;
  CHECK(cudnnGetConvolutionForwardWorkspaceSize(
            handle.handle, p.x.desc, p.w.desc, p.conv.desc, wrong.desc,
            CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, &bytes) == CUDNN_STATUS_BAD_PARAM);
  // A filter of another type.
  Filter half_w(p.w.d, CUDNN_DATA_HALF, CUDNN_TENSOR_NCHW);
  CHECK(cudnnConvolutionForward(handle.handle, &one, p.x.desc, p.x.get(), half_w.desc, half_w.get(),
                                p.conv.desc, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0,
                                &zero, p.y.desc, p.y.get()) == CUDNN_STATUS_BAD_PARAM);

  cudnnConvolutionDescriptor_t conv = nullptr;
  REQUIRE(cudnnCreateConvolutionDescriptor(&conv) == CUDNN_STATUS_SUCCESS);
  CHECK(cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 2, 2, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT) == CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1, CUDNN_CONVOLUTION,
                                        CUDNN_DATA_FLOAT) == CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(cudnnSetConvolution2dDescriptor(conv, -1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT) == CUDNN_STATUS_BAD_PARAM);
  CHECK(cudnnSetConvolutionMathType(conv, static_cast<cudnnMathType_t>(7)) ==
        CUDNN_STATUS_BAD_PARAM);
  cudnnDestroyConvolutionDescriptor(conv);

  cudnnTensorDescriptor_t tensor = nullptr;
  REQUIRE(cudnnCreateTensorDescriptor(&tensor) == CUDNN_STATUS_SUCCESS);
  CHECK(cudnnSetTensor4dDescriptor(tensor, CUDNN_TENSOR_NCHW, CUDNN_DATA_DOUBLE, 1, 2, 3, 4) ==
        CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(cudnnSetTensor4dDescriptor(tensor, CUDNN_TENSOR_NCHW_VECT_C, CUDNN_DATA_FLOAT, 1, 2, 3,
                                   4) == CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(cudnnSetTensor4dDescriptor(tensor, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 0, 2, 3, 4) ==
        CUDNN_STATUS_BAD_PARAM);
  // A descriptor that was never set is refused where it is used.
  CHECK(cudnnConvolutionForward(handle.handle, &one, tensor, p.x.get(), p.w.desc, p.w.get(),
                                p.conv.desc, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0,
                                &zero, p.y.desc, p.y.get()) == CUDNN_STATUS_BAD_PARAM);
  cudnnDestroyTensorDescriptor(tensor);

  // Memory outside the emulated cudaMalloc.
  std::vector<float> host(static_cast<size_t>(p.x.d.count()));
  REQUIRE_FALSE(emu::is_device_memory(host.data(), host.size() * sizeof(float)));
  CHECK(cudnnConvolutionForward(handle.handle, &one, p.x.desc, host.data(), p.w.desc, p.w.get(),
                                p.conv.desc, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0,
                                &zero, p.y.desc, p.y.get()) == CUDNN_STATUS_BAD_PARAM);
}

TEST_CASE("fake cuDNN: an output or a workspace over another operand is refused") {
  Handle handle;
  std::mt19937 rng(19);
  ConvProblem p(kConvShapes[0], CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, rng);
  p.conv.set_math(CUDNN_DEFAULT_MATH);
  const int algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  size_t needed = 0;
  REQUIRE(workspace_size(handle.handle, p, Direction::forward, algo, &needed) ==
          CUDNN_STATUS_SUCCESS);
  const size_t x_bytes = static_cast<size_t>(p.x.d.count()) * sizeof(float);
  // One buffer holding x, with y or the workspace starting at its last element.
  DeviceBytes shared(x_bytes + std::max(needed, static_cast<size_t>(p.y.d.count()) * sizeof(float)));
  auto* base = static_cast<unsigned char*>(shared.get());
  void* last_of_x = base + x_bytes - sizeof(float);
  const float one = 1.0f, zero = 0.0f;
  CHECK(cudnnConvolutionForward(handle.handle, &one, p.x.desc, base, p.w.desc, p.w.get(),
                                p.conv.desc, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0,
                                &zero, p.y.desc, last_of_x) == CUDNN_STATUS_BAD_PARAM);
  CHECK(last_error().find("y overlaps x") != std::string::npos);
  CHECK(cudnnConvolutionForward(handle.handle, &one, p.x.desc, base, p.w.desc, p.w.get(),
                                p.conv.desc, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                last_of_x, needed, &zero, p.y.desc,
                                p.y.get()) == CUDNN_STATUS_BAD_PARAM);
  CHECK(last_error().find("workspace") != std::string::npos);
  // Side by side is fine.
  CHECK(cudnnConvolutionForward(handle.handle, &one, p.x.desc, base, p.w.desc, p.w.get(),
                                p.conv.desc, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                base + x_bytes, needed, &zero, p.y.desc,
                                p.y.get()) == CUDNN_STATUS_SUCCESS);
}

TEST_CASE("fake cuDNN: version, status names and the last error") {
  CHECK(cudnnGetVersion() == CUDNN_VERSION);
  CHECK(std::string(cudnnGetErrorString(CUDNN_STATUS_SUCCESS)) == "CUDNN_STATUS_SUCCESS");
  CHECK(std::string(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM)) == "CUDNN_STATUS_BAD_PARAM");
  CHECK(std::string(cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED)) ==
        "CUDNN_STATUS_NOT_SUPPORTED");
  CHECK(std::string(cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED_PADDING)) ==
        "CUDNN_STATUS_NOT_SUPPORTED");
  CHECK(cudnnSetStream(nullptr, nullptr) == CUDNN_STATUS_BAD_PARAM);
  CHECK(last_error() == "cudnnSetStream: handle is null");
  char small[8];
  cudnnGetLastErrorString(small, sizeof small);
  CHECK(std::string(small) == "cudnnSe");
  Handle handle;
  CHECK(cudnnSetStream(handle.handle, nullptr) == CUDNN_STATUS_SUCCESS);
}

// ---------------------------------------------------------------------------------------------
// BatchNorm.

namespace {

const BatchNormShape kBatchNormShapes[] = {
    {2, 3, 4, 5},
    {4, 8, 3, 3},
    {1, 2, 1, 3},  // three values a channel: unbiased and biased variance far apart
};

struct BatchNormProblem {
  BatchNormProblem(const BatchNormShape& shape, cudnnDataType_t type, cudnnTensorFormat_t format,
                   std::mt19937& rng)
      : s(shape),
        dims{s.batch, s.channels, s.height, s.width},
        x(dims, type, format),
        y(dims, type, format),
        dy(dims, type, format),
        host_x(random_values(static_cast<size_t>(dims.count()), type, rng, -2.0f, 3.0f)),
        host_dy(random_values(static_cast<size_t>(dims.count()), type, rng)),
        gamma(random_values(channels(), CUDNN_DATA_FLOAT, rng, 0.5f, 1.5f)),
        beta(random_values(channels(), CUDNN_DATA_FLOAT, rng)),
        running_mean(random_values(channels(), CUDNN_DATA_FLOAT, rng)),
        running_var(random_values(channels(), CUDNN_DATA_FLOAT, rng, 0.5f, 2.0f)) {
    REQUIRE(cudnnCreateTensorDescriptor(&params) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnDeriveBNTensorDescriptor(params, x.desc, CUDNN_BATCHNORM_SPATIAL) ==
            CUDNN_STATUS_SUCCESS);
    x.upload(host_x);
    dy.upload(host_dy);
  }
  ~BatchNormProblem() { cudnnDestroyTensorDescriptor(params); }
  BatchNormProblem(const BatchNormProblem&) = delete;
  BatchNormProblem& operator=(const BatchNormProblem&) = delete;

  size_t channels() const { return static_cast<size_t>(s.channels); }

  BatchNormShape s;
  Dims dims;
  Tensor x, y, dy;
  std::vector<float> host_x, host_dy, gamma, beta, running_mean, running_var;
  cudnnTensorDescriptor_t params = nullptr;
};

// `count` floats in device memory.
struct Floats {
  explicit Floats(size_t count) : memory(count * sizeof(float)) { memory.fill(0xff); }
  explicit Floats(const std::vector<float>& values) : memory(values.size() * sizeof(float)) {
    set(values);
  }
  void set(const std::vector<float>& values) {
    std::vector<unsigned char> bytes(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    memory.upload(bytes);
  }
  std::vector<float> values() const {
    const std::vector<unsigned char> bytes = memory.download();
    std::vector<float> out(bytes.size() / sizeof(float));
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
  float* get() const { return static_cast<float*>(memory.get()); }
  DeviceBytes memory;
};

constexpr float kMomentum = 0.1f, kEpsilon = 1e-5f;

// "bf16 nhwc 2x3x4x5": a BatchNorm case's name in failure messages.
std::string case_name(const BatchNormShape& s, cudnnDataType_t type, cudnnTensorFormat_t format) {
  return std::string(type_name(type)) + " " + format_name(format) + " " + std::to_string(s.batch) +
         "x" + std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" +
         std::to_string(s.width);
}

// The CPU twin's training forward and backward on the problem's (rounded) values.
struct TwinResults {
  std::vector<float> y, running_mean, running_var, save_mean, save_invstd, dx, dgamma, dbeta,
      eval_y;
};
TwinResults twin(const BatchNormProblem& p) {
  TwinResults r;
  const size_t count = p.host_x.size(), c = p.channels();
  r.y.resize(count);
  r.running_mean = p.running_mean;
  r.running_var = p.running_var;
  r.save_mean.resize(c);
  r.save_invstd.resize(c);
  rddp::cpu::batchnorm_forward_train<float>(p.s, p.host_x.data(), p.gamma.data(), p.beta.data(),
                                            kMomentum, kEpsilon, r.running_mean.data(),
                                            r.running_var.data(), r.y.data(), r.save_mean.data(),
                                            r.save_invstd.data());
  r.dx.resize(count);
  r.dgamma.resize(c);
  r.dbeta.resize(c);
  rddp::cpu::batchnorm_backward<float>(p.s, p.host_x.data(), p.host_dy.data(), p.gamma.data(),
                                       r.save_mean.data(), r.save_invstd.data(), r.dx.data(),
                                       r.dgamma.data(), r.dbeta.data());
  r.eval_y.resize(count);
  rddp::cpu::batchnorm_forward_eval<float>(p.s, p.host_x.data(), p.gamma.data(), p.beta.data(),
                                           p.running_mean.data(), p.running_var.data(), kEpsilon,
                                           r.eval_y.data());
  return r;
}

std::vector<float> blended(const std::vector<float>& result, float alpha, float beta,
                           const std::vector<float>& old, cudnnDataType_t type) {
  std::vector<float> out(result.size());
  for (size_t i = 0; i < result.size(); ++i)
    out[i] = rounded(beta == 0.0f ? alpha * result[i] : alpha * result[i] + beta * old[i], type);
  return out;
}

}  // namespace

TEST_CASE("fake cuDNN: BatchNorm training, inference and backward match the CPU twin") {
  Handle handle;
  std::mt19937 rng(19);
  const cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL;
  for (const BatchNormShape& s : kBatchNormShapes)
    for (cudnnDataType_t type : kTypes)
      for (cudnnTensorFormat_t format : kFormats)
        for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, 0.25f}}) {
          const std::string what = case_name(s, type, format) + " alpha " +
                                   std::to_string(alpha) + " beta " + std::to_string(beta);
          CAPTURE(what);
          BatchNormProblem p(s, type, format, rng);
          const TwinResults r = twin(p);
          const size_t count = p.host_x.size(), channels = p.channels();
          const Floats gamma(p.gamma), bias(p.beta);

          // Training forward: y blended with alpha and beta, running statistics moved,
          // batch statistics saved.
          const std::vector<float> old_y = random_values(count, type, rng);
          if (beta == 0.0f)
            p.y.memory.fill(0xff);
          else
            p.y.upload(old_y);
          Floats running_mean(p.running_mean), running_var(p.running_var);
          Floats save_mean(channels), save_invstd(channels);
          REQUIRE(cudnnBatchNormalizationForwardTraining(
                      handle.handle, mode, &alpha, &beta, p.x.desc, p.x.get(), p.y.desc,
                      p.y.get(), p.params, gamma.get(), bias.get(), kMomentum, running_mean.get(),
                      running_var.get(), kEpsilon, save_mean.get(),
                      save_invstd.get()) == CUDNN_STATUS_SUCCESS);
          check_close(p.y.values(), blended(r.y, alpha, beta, old_y, type), type,
                      what + ": training y");
          check_close(running_mean.values(), r.running_mean, CUDNN_DATA_FLOAT, "running mean");
          check_close(running_var.values(), r.running_var, CUDNN_DATA_FLOAT, "running var");
          check_close(save_mean.values(), r.save_mean, CUDNN_DATA_FLOAT, "saved mean");
          check_close(save_invstd.values(), r.save_invstd, CUDNN_DATA_FLOAT, "saved invstd");

          // The running and saved statistics are optional.
          REQUIRE(cudnnBatchNormalizationForwardTraining(
                      handle.handle, mode, &alpha, &beta, p.x.desc, p.x.get(), p.y.desc,
                      p.y.get(), p.params, gamma.get(), bias.get(), kMomentum, nullptr, nullptr,
                      kEpsilon, nullptr, nullptr) == CUDNN_STATUS_SUCCESS);

          // Inference, with the running statistics from before the update.
          if (beta == 0.0f)
            p.y.memory.fill(0xff);
          else
            p.y.upload(old_y);
          const Floats eval_mean(p.running_mean), eval_var(p.running_var);
          REQUIRE(cudnnBatchNormalizationForwardInference(
                      handle.handle, mode, &alpha, &beta, p.x.desc, p.x.get(), p.y.desc,
                      p.y.get(), p.params, gamma.get(), bias.get(), eval_mean.get(),
                      eval_var.get(), kEpsilon) == CUDNN_STATUS_SUCCESS);
          check_close(p.y.values(), blended(r.eval_y, alpha, beta, old_y, type), type,
                      what + ": inference y");

          // Backward, with the saved statistics and without them (recomputed), the data and
          // the parameter gradients blended each with their own alpha and beta.
          for (bool saved : {true, false}) {
            CAPTURE(saved);
            const float alpha_param = alpha * 2.0f, beta_param = beta * 4.0f;
            const std::vector<float> old_dx = random_values(count, type, rng);
            const std::vector<float> old_dgamma = random_values(channels, CUDNN_DATA_FLOAT, rng);
            const std::vector<float> old_dbeta = random_values(channels, CUDNN_DATA_FLOAT, rng);
            Tensor dx(p.dims, type, format);
            Floats dgamma(channels), dbeta(channels);
            if (beta != 0.0f) {
              dx.upload(old_dx);
              dgamma.set(old_dgamma);
              dbeta.set(old_dbeta);
            }
            REQUIRE(cudnnBatchNormalizationBackward(
                        handle.handle, mode, &alpha, &beta, &alpha_param, &beta_param, p.x.desc,
                        p.x.get(), p.dy.desc, p.dy.get(), dx.desc, dx.get(), p.params,
                        gamma.get(), dgamma.get(), dbeta.get(), kEpsilon,
                        saved ? save_mean.get() : nullptr,
                        saved ? save_invstd.get() : nullptr) == CUDNN_STATUS_SUCCESS);
            // Recomputed statistics are not the saved ones rounded to float, and dx cancels
            // terms of the size of dy * gamma * invstd: bound the difference by the largest.
            double largest = 0.0;
            for (float v : r.dx) largest = std::max(largest, std::fabs(static_cast<double>(v)));
            check_close(dx.values(), blended(r.dx, alpha, beta, old_dx, type), type,
                        what + ": dx", saved ? 0.0 : 1e-5 * largest);
            check_close(dgamma.values(),
                        blended(r.dgamma, alpha_param, beta_param, old_dgamma, CUDNN_DATA_FLOAT),
                        CUDNN_DATA_FLOAT, what + ": dgamma");
            check_close(dbeta.values(),
                        blended(r.dbeta, alpha_param, beta_param, old_dbeta, CUDNN_DATA_FLOAT),
                        CUDNN_DATA_FLOAT, what + ": dbeta");
          }
        }
}

TEST_CASE("fake cuDNN: BatchNorm refusals") {
  Handle handle;
  std::mt19937 rng(23);
  BatchNormProblem p(kBatchNormShapes[0], CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC, rng);
  const Floats gamma(p.gamma), bias(p.beta), mean(p.running_mean), var(p.running_var);
  const float one = 1.0f, zero = 0.0f;
  const auto inference = [&](cudnnBatchNormMode_t mode, cudnnTensorDescriptor_t params,
                             double epsilon) {
    return cudnnBatchNormalizationForwardInference(
        handle.handle, mode, &one, &zero, p.x.desc, p.x.get(), p.y.desc, p.y.get(), params,
        gamma.get(), bias.get(), mean.get(), var.get(), epsilon);
  };
  CHECK(inference(CUDNN_BATCHNORM_SPATIAL, p.params, kEpsilon) == CUDNN_STATUS_SUCCESS);
  CHECK(inference(CUDNN_BATCHNORM_SPATIAL, p.params, -1.0) == CUDNN_STATUS_BAD_PARAM);
  CHECK(last_error().find("epsilon") != std::string::npos);
  CHECK(inference(CUDNN_BATCHNORM_PER_ACTIVATION, p.params, kEpsilon) ==
        CUDNN_STATUS_NOT_SUPPORTED);
  // Parameters are 1xCx1x1 float, whatever the data's type and format.
  Tensor wrong_type({1, p.s.channels, 1, 1}, CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NCHW);
  CHECK(inference(CUDNN_BATCHNORM_SPATIAL, wrong_type.desc, kEpsilon) == CUDNN_STATUS_BAD_PARAM);
  Tensor wrong_size({1, p.s.channels + 1, 1, 1}, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  CHECK(inference(CUDNN_BATCHNORM_SPATIAL, wrong_size.desc, kEpsilon) == CUDNN_STATUS_BAD_PARAM);
  Tensor nchw_float({1, p.s.channels, 1, 1}, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  CHECK(inference(CUDNN_BATCHNORM_SPATIAL, nchw_float.desc, kEpsilon) == CUDNN_STATUS_SUCCESS);
  // Data descriptors that disagree.
  Tensor other({p.s.batch, p.s.channels, p.s.height + 1, p.s.width}, CUDNN_DATA_BFLOAT16,
               CUDNN_TENSOR_NHWC);
  CHECK(cudnnBatchNormalizationForwardInference(handle.handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero,
                                                p.x.desc, p.x.get(), other.desc, other.get(),
                                                p.params, gamma.get(), bias.get(), mean.get(),
                                                var.get(), kEpsilon) == CUDNN_STATUS_BAD_PARAM);
  // Training needs more than one value a channel.
  Tensor single({1, 2, 1, 1}, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  cudnnTensorDescriptor_t single_params = nullptr;
  REQUIRE(cudnnCreateTensorDescriptor(&single_params) == CUDNN_STATUS_SUCCESS);
  REQUIRE(cudnnDeriveBNTensorDescriptor(single_params, single.desc, CUDNN_BATCHNORM_SPATIAL) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(cudnnBatchNormalizationForwardTraining(
            handle.handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, single.desc, single.get(),
            single.desc, single.get(), single_params, gamma.get(), bias.get(), kMomentum, nullptr,
            nullptr, kEpsilon, nullptr, nullptr) == CUDNN_STATUS_BAD_PARAM);
  cudnnDestroyTensorDescriptor(single_params);
  // Half of a pair of optional statistics.
  CHECK(cudnnBatchNormalizationForwardTraining(
            handle.handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, p.x.desc, p.x.get(), p.y.desc,
            p.y.get(), p.params, gamma.get(), bias.get(), kMomentum, mean.get(), nullptr, kEpsilon,
            nullptr, nullptr) == CUDNN_STATUS_BAD_PARAM);
}
