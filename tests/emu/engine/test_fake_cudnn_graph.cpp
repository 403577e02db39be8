// The host stand-in for cuDNN's graph API (fake_cudnn_graph.cpp): every engine configuration its
// heuristics list gives, in every direction, in float, bfloat16 and half, NCHW and NHWC, with
// alpha and beta, the bits of the legacy calls (fake_cudnn.cpp, which test_fake_cudnn.cpp holds
// to the CPU twin) and uses its plan's workspace as scratch; the engine lists the engine's
// selection relies on (the table in fake_cudnn_graph.cpp's head comment); the descriptors' life
// cycle and the refusals, with their status codes; execution captured into a CUDA graph and
// replayed; and the descriptors the fake fills belonging to the caller. Buffers come from the
// emulated cudaMalloc, so that the fake's device-memory checks accept them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "resnet_ddp/cpu/layers.h"
#include "fake_cudnn_testing.h"
#include "stream_work.h"

namespace {

using namespace fake_cudnn_testing;


bool last_error_has(const std::string& part) {
  const std::string text = last_error();
  if (text.find(part) != std::string::npos) return true;
  MESSAGE("the last error, \"", text, "\", does not name \"", part, "\"");
  return false;
}

// ---------------------------------------------------------------------------------------------
// Backend descriptors, owned.

class Backend {
 public:
  explicit Backend(cudnnBackendDescriptorType_t type) {
    REQUIRE(cudnnBackendCreateDescriptor(type, &descriptor_) == CUDNN_STATUS_SUCCESS);
  }
  ~Backend() {
    if (descriptor_ != nullptr)
      CHECK(cudnnBackendDestroyDescriptor(descriptor_) == CUDNN_STATUS_SUCCESS);
  }
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  cudnnBackendDescriptor_t get() const { return descriptor_; }
  cudnnStatus_t set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                    int64_t count, const void* values) const {
    return cudnnBackendSetAttribute(descriptor_, name, type, count, values);
  }
  cudnnStatus_t set_int64(cudnnBackendAttributeName_t name, int64_t value) const {
    return set(name, CUDNN_TYPE_INT64, 1, &value);
  }
  cudnnStatus_t set_int64s(cudnnBackendAttributeName_t name,
                           const std::vector<int64_t>& values) const {
    return set(name, CUDNN_TYPE_INT64, static_cast<int64_t>(values.size()), values.data());
  }
  cudnnStatus_t set_descriptor(cudnnBackendAttributeName_t name, const Backend& value) const {
    cudnnBackendDescriptor_t raw = value.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }
  cudnnStatus_t set_handle(cudnnBackendAttributeName_t name, cudnnHandle_t handle) const {
    return set(name, CUDNN_TYPE_HANDLE, 1, &handle);
  }
  cudnnStatus_t finalize() const { return cudnnBackendFinalize(descriptor_); }
  // Destroys it now, ahead of its owner: the descriptors made from it must not need it.
  void destroy() {
    REQUIRE(cudnnBackendDestroyDescriptor(descriptor_) == CUDNN_STATUS_SUCCESS);
    descriptor_ = nullptr;
  }

 private:
  cudnnBackendDescriptor_t descriptor_ = nullptr;
};

using BackendPtr = std::unique_ptr<Backend>;

int64_t get_int64(const Backend& d, cudnnBackendAttributeName_t name) {
  int64_t count = 0, value = -1;
  REQUIRE(cudnnBackendGetAttribute(d.get(), name, CUDNN_TYPE_INT64, 1, &count, &value) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(count == 1);
  return value;
}

// ---------------------------------------------------------------------------------------------
// Tensors, convolutions and operations as an engine describes them.

struct Dims {
  int64_t n, c, h, w;
  int64_t count() const { return n * c * h * w; }
};

size_t element_bytes(cudnnDataType_t type) { return type == CUDNN_DATA_FLOAT ? 4 : 2; }
size_t byte_size(const Dims& d, cudnnDataType_t type) {
  return static_cast<size_t>(d.count()) * element_bytes(type);
}

// Packed strides in the logical order (n, c, h, w).
std::vector<int64_t> strides_of(const Dims& d, cudnnTensorFormat_t format) {
  if (format == CUDNN_TENSOR_NHWC) return {d.h * d.w * d.c, 1, d.w * d.c, d.c};
  return {d.c * d.h * d.w, d.h * d.w, d.w, 1};
}

constexpr int64_t kUidX = 11, kUidW = 12, kUidY = 13;
constexpr int64_t kAlignment = 16;

// A tensor descriptor with every attribute set, not finalized.
BackendPtr unfinalized_tensor(const Dims& d, cudnnDataType_t type,
                              const std::vector<int64_t>& strides, int64_t uid,
                              int64_t alignment = kAlignment) {
  auto t = std::make_unique<Backend>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  REQUIRE(t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(t->set_int64s(CUDNN_ATTR_TENSOR_DIMENSIONS, {d.n, d.c, d.h, d.w}) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(t->set_int64s(CUDNN_ATTR_TENSOR_STRIDES, strides) == CUDNN_STATUS_SUCCESS);
  REQUIRE(t->set_int64(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid) == CUDNN_STATUS_SUCCESS);
  REQUIRE(t->set_int64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, alignment) == CUDNN_STATUS_SUCCESS);
  return t;
}

BackendPtr tensor(const Dims& d, cudnnDataType_t type, cudnnTensorFormat_t format, int64_t uid) {
  BackendPtr t = unfinalized_tensor(d, type, strides_of(d, format), uid);
  REQUIRE(t->finalize() == CUDNN_STATUS_SUCCESS);
  return t;
}

struct ConvSettings {
  std::vector<int64_t> pre{1, 1}, post{1, 1}, dilations{1, 1}, strides{1, 1};
  int64_t spatial_dims = 2;
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
};

ConvSettings conv_settings(int64_t pad, int64_t stride) {
  ConvSettings c;
  c.pre = c.post = {pad, pad};
  c.strides = {stride, stride};
  return c;
}

BackendPtr unfinalized_convolution(const ConvSettings& s) {
  auto c = std::make_unique<Backend>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  REQUIRE(c->set_int64(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, s.spatial_dims) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(c->set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &s.compute) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(c->set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &s.mode) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(c->set_int64s(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, s.pre) == CUDNN_STATUS_SUCCESS);
  REQUIRE(c->set_int64s(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, s.post) == CUDNN_STATUS_SUCCESS);
  REQUIRE(c->set_int64s(CUDNN_ATTR_CONVOLUTION_DILATIONS, s.dilations) == CUDNN_STATUS_SUCCESS);
  REQUIRE(c->set_int64s(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, s.strides) == CUDNN_STATUS_SUCCESS);
  return c;
}

BackendPtr convolution(int64_t pad, int64_t stride) {
  BackendPtr c = unfinalized_convolution(conv_settings(pad, stride));
  REQUIRE(c->finalize() == CUDNN_STATUS_SUCCESS);
  return c;
}


// A direction's operation type and attributes, by the role of their tensor: x the convolution's
// input (dx), w its filter (dw), y its output (dy).
struct OperationAttributes {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
};

OperationAttributes operation_attributes(Direction direction) {
  switch (direction) {
    case Direction::forward:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
    case Direction::backward_data:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
    case Direction::backward_filter: break;
  }
  return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
}

// The operation's attributes set (alpha and beta as float), not finalized.
BackendPtr unfinalized_operation(Direction direction, const Backend& x, const Backend& w,
                                 const Backend& y, const Backend& conv, float alpha, float beta) {
  const OperationAttributes a = operation_attributes(direction);
  auto op = std::make_unique<Backend>(a.type);
  REQUIRE(op->set_descriptor(a.x, x) == CUDNN_STATUS_SUCCESS);
  REQUIRE(op->set_descriptor(a.w, w) == CUDNN_STATUS_SUCCESS);
  REQUIRE(op->set_descriptor(a.y, y) == CUDNN_STATUS_SUCCESS);
  REQUIRE(op->set_descriptor(a.conv, conv) == CUDNN_STATUS_SUCCESS);
  REQUIRE(op->set(a.alpha, CUDNN_TYPE_FLOAT, 1, &alpha) == CUDNN_STATUS_SUCCESS);
  REQUIRE(op->set(a.beta, CUDNN_TYPE_FLOAT, 1, &beta) == CUDNN_STATUS_SUCCESS);
  return op;
}

BackendPtr operation_graph(cudnnHandle_t handle, const Backend& operation) {
  auto graph = std::make_unique<Backend>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  REQUIRE(graph->set_descriptor(CUDNN_ATTR_OPERATIONGRAPH_OPS, operation) == CUDNN_STATUS_SUCCESS);
  REQUIRE(graph->set_handle(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, handle) == CUDNN_STATUS_SUCCESS);
  REQUIRE(graph->finalize() == CUDNN_STATUS_SUCCESS);
  return graph;
}

BackendPtr heuristics(const Backend& graph, cudnnBackendHeurMode_t mode) {
  auto h = std::make_unique<Backend>(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  REQUIRE(h->set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph) == CUDNN_STATUS_SUCCESS);
  REQUIRE(h->set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(h->finalize() == CUDNN_STATUS_SUCCESS);
  return h;
}

int64_t result_count(const Backend& heuristics) {
  int64_t count = -1;
  REQUIRE(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                   nullptr) == CUDNN_STATUS_SUCCESS);
  return count;
}

// The heuristics' configurations, as an engine fetches them: the count, then that many.
std::vector<BackendPtr> configs(const Backend& graph, cudnnBackendHeurMode_t mode) {
  BackendPtr h = heuristics(graph, mode);
  const int64_t count = result_count(*h);
  std::vector<BackendPtr> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.push_back(std::make_unique<Backend>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(configs.back()->get());
  }
  int64_t returned = -1;
  REQUIRE(cudnnBackendGetAttribute(h->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned,
                                   raw.data()) == CUDNN_STATUS_SUCCESS);
  CHECK(returned == count);
  return configs;
}

struct EngineFacts {
  int64_t index = -1;
  std::vector<cudnnBackendNumericalNote_t> notes;
  std::vector<cudnnBackendBehaviorNote_t> behaviour;
};

EngineFacts engine_facts(const Backend& config) {
  Backend engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t count = -1;
  REQUIRE(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                                   &raw) == CUDNN_STATUS_SUCCESS);
  CHECK(count == 1);
  EngineFacts facts;
  facts.index = get_int64(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX);
  facts.notes.resize(CUDNN_NUMERICAL_NOTE_TYPE_COUNT);
  REQUIRE(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                   CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT,
                                   &count, facts.notes.data()) == CUDNN_STATUS_SUCCESS);
  REQUIRE(count >= 0);
  REQUIRE(count <= CUDNN_NUMERICAL_NOTE_TYPE_COUNT);
  facts.notes.resize(static_cast<size_t>(count));
  facts.behaviour.resize(CUDNN_BEHAVIOR_NOTE_TYPE_COUNT);
  REQUIRE(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                                   CUDNN_TYPE_BEHAVIOR_NOTE, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT,
                                   &count, facts.behaviour.data()) == CUDNN_STATUS_SUCCESS);
  REQUIRE(count >= 0);
  REQUIRE(count <= CUDNN_BEHAVIOR_NOTE_TYPE_COUNT);
  facts.behaviour.resize(static_cast<size_t>(count));
  return facts;
}

cudnnStatus_t make_plan(cudnnHandle_t handle, const Backend& config, BackendPtr* plan) {
  *plan = std::make_unique<Backend>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  REQUIRE((*plan)->set_handle(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, handle) == CUDNN_STATUS_SUCCESS);
  REQUIRE((*plan)->set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config) ==
          CUDNN_STATUS_SUCCESS);
  return (*plan)->finalize();
}

BackendPtr variant_pack(const std::vector<int64_t>& uids, const std::vector<void*>& pointers,
                        void* workspace) {
  auto pack = std::make_unique<Backend>(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  REQUIRE(pack->set_int64s(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids) == CUDNN_STATUS_SUCCESS);
  REQUIRE(pack->set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                    static_cast<int64_t>(pointers.size()),
                    pointers.data()) == CUDNN_STATUS_SUCCESS);
  REQUIRE(pack->set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace) ==
          CUDNN_STATUS_SUCCESS);
  REQUIRE(pack->finalize() == CUDNN_STATUS_SUCCESS);
  return pack;
}

cudnnStatus_t execute(cudnnHandle_t handle, const Backend& plan, const std::vector<int64_t>& uids,
                      const std::vector<void*>& pointers, void* workspace) {
  BackendPtr pack = variant_pack(uids, pointers, workspace);
  return cudnnBackendExecute(handle, plan.get(), pack->get());
}

// ---------------------------------------------------------------------------------------------
// One convolution problem: x, w and y on the device in a type and format, with random host
// contents for each (inputs) and for each as an output's old value (beta != 0).

float rounded_to(float v, cudnnDataType_t type) {
  if (type == CUDNN_DATA_BFLOAT16) return __bfloat162float(__float2bfloat16(v));
  if (type == CUDNN_DATA_HALF) return __half2float(__float2half(v));
  return v;
}

// Random values in [-1, 1) as `type` stores them; any order of random values is random, so
// they are written in storage order.
std::vector<unsigned char> random_bytes(int64_t count, cudnnDataType_t type, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const size_t size = element_bytes(type);
  std::vector<unsigned char> bytes(static_cast<size_t>(count) * size);
  for (int64_t i = 0; i < count; ++i) {
    const float v = rounded_to(uniform(rng), type);
    unsigned char* at = &bytes[static_cast<size_t>(i) * size];
    if (type == CUDNN_DATA_BFLOAT16) {
      const __nv_bfloat16 b = __float2bfloat16(v);
      std::memcpy(at, &b, size);
    } else if (type == CUDNN_DATA_HALF) {
      const __half h = __float2half(v);
      std::memcpy(at, &h, size);
    } else {
      std::memcpy(at, &v, size);
    }
  }
  return bytes;
}




struct Problem {
  Problem(const ConvShape& shape, cudnnDataType_t type, cudnnTensorFormat_t format,
          std::mt19937& rng)
      : s(shape),
        type(type),
        format(format),
        x_dims{s.batch, s.in_channels, s.in_h, s.in_w},
        w_dims{s.out_channels, s.in_channels, s.kernel, s.kernel},
        y_dims{s.batch, s.out_channels, s.out_h(), s.out_w()},
        x(byte_size(x_dims, type)),
        w(byte_size(w_dims, type)),
        y(byte_size(y_dims, type)),
        host_x(random_bytes(x_dims.count(), type, rng)),
        host_w(random_bytes(w_dims.count(), type, rng)),
        host_y(random_bytes(y_dims.count(), type, rng)),
        old_x(random_bytes(x_dims.count(), type, rng)),
        old_w(random_bytes(w_dims.count(), type, rng)),
        old_y(random_bytes(y_dims.count(), type, rng)) {}

  ConvShape s;
  cudnnDataType_t type;
  cudnnTensorFormat_t format;
  Dims x_dims, w_dims, y_dims;
  DeviceBytes x, w, y;  // also dx, dw, dy
  std::vector<unsigned char> host_x, host_w, host_y, old_x, old_w, old_y;

  std::vector<void*> pointers() const { return {x.get(), w.get(), y.get()}; }

  DeviceBytes& output(Direction d) {
    return d == Direction::forward ? y : d == Direction::backward_data ? x : w;
  }
  const std::vector<unsigned char>& old_output(Direction d) const {
    return d == Direction::forward ? old_y : d == Direction::backward_data ? old_x : old_w;
  }
  // Inputs in place, and the output holding its old value, or NaN where beta 0 must not read it.
  void prepare(Direction d, float beta) {
    x.upload(host_x);
    w.upload(host_w);
    y.upload(host_y);
    if (beta == 0.0f)
      output(d).fill(0xff);
    else
      output(d).upload(old_output(d));
  }
};

// The problem's operation graph, built as an engine builds it.
struct Graph {
  BackendPtr x, w, y, conv, operation, graph;
};

Graph make_graph(cudnnHandle_t handle, const Problem& p, Direction direction, float alpha,
                 float beta) {
  Graph g;
  g.x = tensor(p.x_dims, p.type, p.format, kUidX);
  g.w = tensor(p.w_dims, p.type, p.format, kUidW);
  g.y = tensor(p.y_dims, p.type, p.format, kUidY);
  g.conv = convolution(p.s.pad, p.s.stride);
  g.operation = unfinalized_operation(direction, *g.x, *g.w, *g.y, *g.conv, alpha, beta);
  REQUIRE(g.operation->finalize() == CUDNN_STATUS_SUCCESS);
  g.graph = operation_graph(handle, *g.operation);
  return g;
}

// The legacy calls' descriptors of the problem.
struct LegacyDescriptors {
  explicit LegacyDescriptors(const Problem& p) {
    REQUIRE(cudnnCreateTensorDescriptor(&x) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnCreateTensorDescriptor(&y) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnCreateFilterDescriptor(&w) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnCreateConvolutionDescriptor(&conv) == CUDNN_STATUS_SUCCESS);
    const auto i = [](int64_t v) { return static_cast<int>(v); };
    REQUIRE(cudnnSetTensor4dDescriptor(x, p.format, p.type, i(p.x_dims.n), i(p.x_dims.c),
                                       i(p.x_dims.h), i(p.x_dims.w)) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetTensor4dDescriptor(y, p.format, p.type, i(p.y_dims.n), i(p.y_dims.c),
                                       i(p.y_dims.h), i(p.y_dims.w)) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetFilter4dDescriptor(w, p.type, p.format, i(p.w_dims.n), i(p.w_dims.c),
                                       i(p.w_dims.h), i(p.w_dims.w)) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetConvolution2dDescriptor(conv, p.s.pad, p.s.pad, p.s.stride, p.s.stride, 1, 1,
                                            CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT) == CUDNN_STATUS_SUCCESS);
    REQUIRE(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH) == CUDNN_STATUS_SUCCESS);
  }
  ~LegacyDescriptors() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
  }
  LegacyDescriptors(const LegacyDescriptors&) = delete;
  LegacyDescriptors& operator=(const LegacyDescriptors&) = delete;

  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
};

// The output bytes of the legacy call of `direction`, through an FMA algorithm that needs no
// workspace, from the problem prepared for beta.
std::vector<unsigned char> legacy_result(cudnnHandle_t h, Problem& p, Direction direction,
                                         float alpha, float beta) {
  const LegacyDescriptors d(p);
  p.prepare(direction, beta);
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  switch (direction) {
    case Direction::forward:
      status = cudnnConvolutionForward(h, &alpha, d.x, p.x.get(), d.w, p.w.get(), d.conv,
                                       CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &beta,
                                       d.y, p.y.get());
      break;
    case Direction::backward_data:
      status = cudnnConvolutionBackwardData(h, &alpha, d.w, p.w.get(), d.y, p.y.get(), d.conv,
                                            CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, nullptr, 0, &beta,
                                            d.x, p.x.get());
      break;
    case Direction::backward_filter:
      status = cudnnConvolutionBackwardFilter(h, &alpha, d.x, p.x.get(), d.y, p.y.get(), d.conv,
                                              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, nullptr, 0,
                                              &beta, d.w, p.w.get());
      break;
  }
  REQUIRE(status == CUDNN_STATUS_SUCCESS);
  return p.output(direction).download();
}

// Whether an element still holds the 0xff bytes (NaN) an output is filled with where beta is 0:
// a result nobody wrote.
bool has_unwritten(const std::vector<unsigned char>& bytes, cudnnDataType_t type) {
  const size_t size = element_bytes(type);
  for (size_t at = 0; at + size <= bytes.size(); at += size)
    if (std::all_of(bytes.begin() + static_cast<long>(at),
                    bytes.begin() + static_cast<long>(at + size),
                    [](unsigned char b) { return b == 0xff; }))
      return true;
  return false;
}

// ---------------------------------------------------------------------------------------------
// The engine list of fake_cudnn_graph.cpp's head comment.

enum class Workspace { none, four_kib, larger, half_larger, over_one_gib };

struct ExpectedEngine {
  int64_t index;
  std::vector<cudnnBackendNumericalNote_t> notes;
  bool builds_plan;
  Workspace workspace;
};

const std::vector<ExpectedEngine> kModeA = {
    {7, {}, true, Workspace::none},
    {1,
     {CUDNN_NUMERICAL_NOTE_TENSOR_CORE, CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS},
     true,
     Workspace::four_kib},
    {2, {}, false, Workspace::none},
    {3, {CUDNN_NUMERICAL_NOTE_TENSOR_CORE}, true, Workspace::larger},
    {4, {CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC}, true, Workspace::over_one_gib},
    {5, {CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION}, true, Workspace::none},
    {0, {}, true, Workspace::half_larger},
};
const std::vector<ExpectedEngine> kFallback = {{6, {}, true, Workspace::none}};

size_t round_up_to_256(size_t bytes) { return (bytes + 255) / 256 * 256; }

size_t expected_workspace(Workspace w, const Problem& p) {
  const size_t larger = std::max(p.x.bytes(), p.y.bytes());
  switch (w) {
    case Workspace::none: return 0;
    case Workspace::four_kib: return 4096;
    case Workspace::larger: return round_up_to_256(larger);
    case Workspace::half_larger: return round_up_to_256(larger / 2);
    case Workspace::over_one_gib: break;
  }
  return round_up_to_256((size_t{1} << 30) + 4 * larger);
}

constexpr size_t kOneGiB = size_t{1} << 30;

}  // namespace

// ---------------------------------------------------------------------------------------------

TEST_CASE("fake cuDNN graph API: every engine gives the legacy calls' bits, with alpha and beta") {
  Handle handle;
  std::mt19937 rng(23);
  for (const ConvShape& s : kConvShapes)
    for (cudnnDataType_t type : kTypes)
      for (cudnnTensorFormat_t format : kFormats) {
        Problem p(s, type, format, rng);
        for (Direction direction : kDirections)
          for (const auto& [alpha, beta] :
               {std::pair{1.0f, 0.0f}, std::pair{1.0f, 1.0f}, std::pair{0.5f, -0.75f}}) {
            CAPTURE(direction_name(direction));
            CAPTURE(type_name(type));
            CAPTURE(format_name(format));
            CAPTURE(alpha);
            CAPTURE(beta);
            const std::vector<unsigned char> expected =
                legacy_result(handle.handle, p, direction, alpha, beta);
            REQUIRE_FALSE(has_unwritten(expected, type));
            const Graph g = make_graph(handle.handle, p, direction, alpha, beta);
            int ran = 0;
            for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK})
              for (const BackendPtr& config : configs(*g.graph, mode)) {
                const EngineFacts facts = engine_facts(*config);
                CAPTURE(facts.index);
                BackendPtr plan;
                const cudnnStatus_t status = make_plan(handle.handle, *config, &plan);
                if (status != CUDNN_STATUS_SUCCESS) {
                  CHECK(status == CUDNN_STATUS_NOT_SUPPORTED);
                  CHECK(facts.index == 2);
                  continue;
                }
                const auto needed =
                    static_cast<size_t>(get_int64(*plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE));
                // Never allocated: over any workspace limit of the engine's.
                if (needed > kOneGiB) {
                  CHECK(facts.index == 4);
                  continue;
                }
                // The plan's workspace and 256 bytes more that no execution may touch.
                DeviceBytes workspace(needed + 256);
                workspace.fill(0x11);
                p.prepare(direction, beta);
                REQUIRE(execute(handle.handle, *plan, {kUidX, kUidW, kUidY}, p.pointers(),
                                workspace.get()) == CUDNN_STATUS_SUCCESS);
                CHECK(p.output(direction).download() == expected);
                const std::vector<unsigned char> scratch = workspace.download();
                CHECK(std::count(scratch.begin(), scratch.begin() + static_cast<long>(needed),
                                 0xff) == static_cast<long>(needed));
                CHECK(std::count(scratch.begin() + static_cast<long>(needed), scratch.end(),
                                 0x11) == 256);
                ++ran;
              }
            CHECK(ran == 6);  // all but the refused plan and the one over 1 GiB
          }
      }
}

TEST_CASE("fake cuDNN graph API: the engine configurations, their notes, plans and workspaces") {
  Handle handle;
  std::mt19937 rng(29);
  for (cudnnDataType_t type : {CUDNN_DATA_FLOAT, CUDNN_DATA_BFLOAT16})
    for (Direction direction : kDirections) {
      CAPTURE(type_name(type));
      CAPTURE(direction_name(direction));
      Problem p(kConvShapes[1], type, CUDNN_TENSOR_NHWC, rng);
      const Graph g = make_graph(handle.handle, p, direction, 1.0f, 0.0f);
      for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
        const std::vector<ExpectedEngine>& expected =
            mode == CUDNN_HEUR_MODE_A ? kModeA : kFallback;
        CHECK(result_count(*heuristics(*g.graph, mode)) == static_cast<int64_t>(expected.size()));
        const std::vector<BackendPtr> list = configs(*g.graph, mode);
        REQUIRE(list.size() == expected.size());
        for (size_t i = 0; i < list.size(); ++i) {
          CAPTURE(i);
          const EngineFacts facts = engine_facts(*list[i]);
          CHECK(facts.index == expected[i].index);
          CHECK(facts.notes == expected[i].notes);
          // Only the first is compiled at run time: the selection must pass it over.
          using Behaviour = std::vector<cudnnBackendBehaviorNote_t>;
          CHECK(facts.behaviour == (facts.index == 7
                                        ? Behaviour{CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION}
                                        : Behaviour{}));
          BackendPtr plan;
          const cudnnStatus_t status = make_plan(handle.handle, *list[i], &plan);
          if (!expected[i].builds_plan) {
            CHECK(status == CUDNN_STATUS_NOT_SUPPORTED);
            CHECK(last_error_has("engine 2"));
            continue;
          }
          REQUIRE(status == CUDNN_STATUS_SUCCESS);
          CHECK(get_int64(*plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE) ==
                static_cast<int64_t>(expected_workspace(expected[i].workspace, p)));
        }
      }
    }
}

TEST_CASE("fake cuDNN graph API: fewer results than there are, and fewer notes") {
  Handle handle;
  std::mt19937 rng(31);
  Problem p(kConvShapes[0], CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, rng);
  const Graph g = make_graph(handle.handle, p, Direction::forward, 1.0f, 0.0f);
  const BackendPtr h = heuristics(*g.graph, CUDNN_HEUR_MODE_A);
  Backend first(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR), second(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR),
      unasked(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  cudnnBackendDescriptor_t raw[] = {first.get(), second.get(), unasked.get()};
  int64_t count = 0;
  REQUIRE(cudnnBackendGetAttribute(h->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 2, &count,
                                   raw) == CUDNN_STATUS_SUCCESS);
  CHECK(count == 7);  // how many there are, of which two were written
  CHECK(engine_facts(first).index == 7);
  CHECK(engine_facts(second).index == 1);
  Backend engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t engine_raw = engine.get();
  CHECK(cudnnBackendGetAttribute(unasked.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                                 &engine_raw) == CUDNN_STATUS_NOT_INITIALIZED);

  // The second engine has two notes; asking for one writes one and says two.
  REQUIRE(cudnnBackendGetAttribute(second.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                                   &engine_raw) == CUDNN_STATUS_SUCCESS);
  cudnnBackendNumericalNote_t notes[2] = {CUDNN_NUMERICAL_NOTE_TYPE_COUNT,
                                          CUDNN_NUMERICAL_NOTE_TYPE_COUNT};
  REQUIRE(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                   CUDNN_TYPE_NUMERICAL_NOTE, 1, &count,
                                   notes) == CUDNN_STATUS_SUCCESS);
  CHECK(count == 2);
  CHECK(notes[0] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE);
  CHECK(notes[1] == CUDNN_NUMERICAL_NOTE_TYPE_COUNT);
}

TEST_CASE("fake cuDNN graph API: the descriptor life cycle and its refusals") {
  cudnnBackendDescriptor_t raw = nullptr;
  CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &raw) ==
        CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(raw == nullptr);
  CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, nullptr) ==
        CUDNN_STATUS_BAD_PARAM);

  const Dims dims{2, 3, 4, 5};
  const std::vector<int64_t> strides = strides_of(dims, CUDNN_TENSOR_NCHW);
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;

  SUBCASE("a finalized descriptor takes no attribute, an unfinalized one gives none") {
    BackendPtr t = unfinalized_tensor(dims, type, strides, kUidX);
    Backend plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    int64_t count = 0, value = 0;
    CHECK(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                   CUDNN_TYPE_INT64, 1, &count,
                                   &value) == CUDNN_STATUS_NOT_INITIALIZED);
    REQUIRE(t->finalize() == CUDNN_STATUS_SUCCESS);
    CHECK(t->set_int64(CUDNN_ATTR_TENSOR_UNIQUE_ID, 5) == CUDNN_STATUS_NOT_INITIALIZED);
    CHECK(last_error_has("already finalized"));
    CHECK(t->finalize() == CUDNN_STATUS_BAD_PARAM);
  }
  SUBCASE("wrong attribute types, element counts and values") {
    Backend t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const double as_double = 2.0;
    CHECK(t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_DOUBLE, 1, &as_double) ==
          CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("CUDNN_TYPE_INT64"));
    const cudnnDataType_t two_types[] = {type, type};
    CHECK(t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 2, two_types) ==
          CUDNN_STATUS_BAD_PARAM);
    CHECK(t.set_int64s(CUDNN_ATTR_TENSOR_DIMENSIONS, std::vector<int64_t>(9, 1)) ==
          CUDNN_STATUS_BAD_PARAM);
    CHECK(t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 0, nullptr) ==
          CUDNN_STATUS_BAD_PARAM);
    CHECK(t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, nullptr) ==
          CUDNN_STATUS_BAD_PARAM);
    CHECK(t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, -1, strides.data()) ==
          CUDNN_STATUS_BAD_PARAM);
    const int not_a_type = 99;
    CHECK(t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &not_a_type) ==
          CUDNN_STATUS_BAD_PARAM);
    Backend conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    const int not_a_mode = 7;
    CHECK(conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &not_a_mode) ==
          CUDNN_STATUS_BAD_PARAM);
    Backend h(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    const int not_a_heuristic = CUDNN_HEUR_MODES_COUNT;
    CHECK(h.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &not_a_heuristic) ==
          CUDNN_STATUS_BAD_PARAM);
  }
  SUBCASE("attributes of another descriptor type, computed ones, and ones not modelled") {
    Backend t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    CHECK(t.set_int64(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, 2) == CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("not an attribute of this descriptor type"));
    const bool yes = true;
    CHECK(t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes) ==
          CUDNN_STATUS_NOT_SUPPORTED);
    Backend plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    CHECK(plan.set_int64(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, 0) == CUDNN_STATUS_BAD_PARAM);
    BackendPtr finalized = tensor(dims, type, CUDNN_TENSOR_NCHW, kUidX);
    int64_t count = 0, value = 0;
    CHECK(cudnnBackendGetAttribute(finalized->get(), CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64,
                                   1, &count, &value) == CUDNN_STATUS_NOT_SUPPORTED);
    CHECK(cudnnBackendGetAttribute(finalized->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                   CUDNN_TYPE_INT64, 1, &count, &value) == CUDNN_STATUS_BAD_PARAM);
  }
  SUBCASE("a required attribute missing at finalize, then set") {
    Backend t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    REQUIRE(t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type) ==
            CUDNN_STATUS_SUCCESS);
    REQUIRE(t.set_int64s(CUDNN_ATTR_TENSOR_DIMENSIONS, {dims.n, dims.c, dims.h, dims.w}) ==
            CUDNN_STATUS_SUCCESS);
    REQUIRE(t.set_int64s(CUDNN_ATTR_TENSOR_STRIDES, strides) == CUDNN_STATUS_SUCCESS);
    REQUIRE(t.set_int64(CUDNN_ATTR_TENSOR_UNIQUE_ID, kUidX) == CUDNN_STATUS_SUCCESS);
    CHECK(t.finalize() == CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT"));
    REQUIRE(t.set_int64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, kAlignment) == CUDNN_STATUS_SUCCESS);
    CHECK(t.finalize() == CUDNN_STATUS_SUCCESS);

    auto conv = std::make_unique<Backend>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    REQUIRE(conv->set_int64(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, 2) == CUDNN_STATUS_SUCCESS);
    CHECK(conv->finalize() == CUDNN_STATUS_BAD_PARAM);

    Backend config(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR), engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    CHECK(config.finalize() == CUDNN_STATUS_BAD_PARAM);
    CHECK(engine.finalize() == CUDNN_STATUS_BAD_PARAM);
    CHECK(engine.set_int64(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, 0) == CUDNN_STATUS_NOT_SUPPORTED);
    Backend graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    CHECK(graph.finalize() == CUDNN_STATUS_BAD_PARAM);
    Backend h(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    CHECK(h.finalize() == CUDNN_STATUS_BAD_PARAM);
    Backend plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    CHECK(plan.finalize() == CUDNN_STATUS_BAD_PARAM);
    Backend pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    CHECK(pack.set_int64s(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, {kUidX}) == CUDNN_STATUS_SUCCESS);
    CHECK(pack.finalize() == CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS"));
  }
  SUBCASE("descriptors given as values: live, finalized and of the right type") {
    BackendPtr x = tensor(dims, type, CUDNN_TENSOR_NCHW, kUidX);
    BackendPtr unfinalized = unfinalized_tensor(dims, type, strides, kUidY);
    BackendPtr conv = convolution(1, 1);
    Backend op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    CHECK(op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, *unfinalized) ==
          CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("not finalized"));
    CHECK(op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, *conv) ==
          CUDNN_STATUS_BAD_PARAM);
    CHECK(op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, *x) ==
          CUDNN_STATUS_BAD_PARAM);
    cudnnBackendDescriptor_t null_descriptor = nullptr;
    CHECK(op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                 &null_descriptor) == CUDNN_STATUS_BAD_PARAM);
    const int64_t as_int = 1;
    CHECK(op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_INT64, 1, &as_int) ==
          CUDNN_STATUS_BAD_PARAM);
    const double as_double = 1.0;  // cuDNN takes double scales too
    CHECK(op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_DOUBLE, 1,
                 &as_double) == CUDNN_STATUS_SUCCESS);
    cudnnBackendDescriptor_t destroyed = x->get();
    x->destroy();
    CHECK(op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                 &destroyed) == CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("not a live descriptor"));
    // Destroyed twice: refused, and said on stderr, since a destroy is seldom checked.
    CHECK(cudnnBackendDestroyDescriptor(destroyed) == CUDNN_STATUS_BAD_PARAM);
    CHECK(cudnnBackendFinalize(destroyed) == CUDNN_STATUS_BAD_PARAM);
  }
}

TEST_CASE("fake cuDNN graph API: tensors and convolutions it refuses") {
  const Dims dims{2, 3, 4, 5};
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  const auto finalize_tensor = [&](const Dims& d, cudnnDataType_t t,
                                   const std::vector<int64_t>& strides, int64_t alignment) {
    return unfinalized_tensor(d, t, strides, kUidX, alignment)->finalize();
  };
  const std::vector<int64_t> nchw = strides_of(dims, CUDNN_TENSOR_NCHW);
  CHECK(finalize_tensor(dims, type, nchw, kAlignment) == CUDNN_STATUS_SUCCESS);
  CHECK(finalize_tensor(dims, type, strides_of(dims, CUDNN_TENSOR_NHWC), kAlignment) ==
        CUDNN_STATUS_SUCCESS);
  CHECK(finalize_tensor(dims, CUDNN_DATA_BFLOAT16, nchw, kAlignment) == CUDNN_STATUS_SUCCESS);
  // Padded rows: valid in cuDNN, not modelled.
  CHECK(finalize_tensor(dims, type, {3 * 4 * 6, 4 * 6, 6, 1}, kAlignment) ==
        CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(last_error_has("packed NCHW or NHWC"));
  CHECK(finalize_tensor(dims, CUDNN_DATA_DOUBLE, nchw, kAlignment) == CUDNN_STATUS_NOT_SUPPORTED);
  CHECK(finalize_tensor(Dims{0, 3, 4, 5}, type, nchw, kAlignment) == CUDNN_STATUS_BAD_PARAM);
  CHECK(finalize_tensor(dims, type, nchw, 3) == CUDNN_STATUS_BAD_PARAM);
  CHECK(finalize_tensor(dims, type, nchw, 0) == CUDNN_STATUS_BAD_PARAM);
  {
    BackendPtr t = unfinalized_tensor(dims, type, nchw, kUidX);
    REQUIRE(t->set_int64s(CUDNN_ATTR_TENSOR_STRIDES, {60, 20, 5}) == CUDNN_STATUS_SUCCESS);
    CHECK(t->finalize() == CUDNN_STATUS_BAD_PARAM);  // 4 dimensions, 3 strides
    REQUIRE(t->set_int64s(CUDNN_ATTR_TENSOR_DIMENSIONS, {2, 3, 4, 5, 1}) == CUDNN_STATUS_SUCCESS);
    REQUIRE(t->set_int64s(CUDNN_ATTR_TENSOR_STRIDES, {60, 20, 5, 1, 1}) == CUDNN_STATUS_SUCCESS);
    CHECK(t->finalize() == CUDNN_STATUS_NOT_SUPPORTED);  // 5-d
  }

  const auto finalize_convolution = [](const ConvSettings& s) {
    return unfinalized_convolution(s)->finalize();
  };
  CHECK(finalize_convolution(conv_settings(1, 1)) == CUDNN_STATUS_SUCCESS);
  ConvSettings s = conv_settings(1, 1);
  s.dilations = {2, 2};
  CHECK(finalize_convolution(s) == CUDNN_STATUS_NOT_SUPPORTED);
  s = conv_settings(1, 1);
  s.mode = CUDNN_CONVOLUTION;
  CHECK(finalize_convolution(s) == CUDNN_STATUS_NOT_SUPPORTED);
  s = conv_settings(1, 1);
  s.compute = CUDNN_DATA_HALF;
  CHECK(finalize_convolution(s) == CUDNN_STATUS_NOT_SUPPORTED);
  s = conv_settings(1, 1);
  s.post = {0, 0};  // asymmetric padding
  CHECK(finalize_convolution(s) == CUDNN_STATUS_NOT_SUPPORTED);
  s = conv_settings(1, 1);
  s.pre = s.post = {1, 2};
  CHECK(finalize_convolution(s) == CUDNN_STATUS_NOT_SUPPORTED);
  s = conv_settings(1, 1);
  s.pre = s.post = {-1, -1};
  CHECK(finalize_convolution(s) == CUDNN_STATUS_BAD_PARAM);
  s = conv_settings(1, 1);
  s.strides = {0, 0};
  CHECK(finalize_convolution(s) == CUDNN_STATUS_BAD_PARAM);
  s = conv_settings(1, 1);
  s.dilations = {1, 1, 1};  // three dilations for two spatial dimensions
  CHECK(finalize_convolution(s) == CUDNN_STATUS_BAD_PARAM);
  s = conv_settings(1, 1);
  s.spatial_dims = 3;
  s.pre = s.post = {1, 1, 1};
  s.dilations = s.strides = {1, 1, 1};
  CHECK(finalize_convolution(s) == CUDNN_STATUS_NOT_SUPPORTED);
}

TEST_CASE("fake cuDNN graph API: operations, graphs, heuristics and plans it refuses") {
  Handle handle;
  std::mt19937 rng(37);
  Problem p(kConvShapes[0], CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, rng);
  const BackendPtr x = tensor(p.x_dims, p.type, p.format, kUidX);
  const BackendPtr w = tensor(p.w_dims, p.type, p.format, kUidW);
  const BackendPtr y = tensor(p.y_dims, p.type, p.format, kUidY);
  const BackendPtr conv = convolution(p.s.pad, p.s.stride);
  const auto finalize_op = [&](Direction d, const Backend& xt, const Backend& wt,
                               const Backend& yt) {
    return unfinalized_operation(d, xt, wt, yt, *conv, 1.0f, 0.0f)->finalize();
  };
  for (Direction d : kDirections) CHECK(finalize_op(d, *x, *w, *y) == CUDNN_STATUS_SUCCESS);

  SUBCASE("shapes the convolution does not give") {
    Dims wrong = p.y_dims;
    wrong.h += 1;
    const BackendPtr tall = tensor(wrong, p.type, p.format, kUidY);
    for (Direction d : kDirections) {
      CAPTURE(direction_name(d));
      CHECK(finalize_op(d, *x, *w, *tall) == CUDNN_STATUS_BAD_PARAM);
      CHECK(last_error_has("gives"));
    }
    const BackendPtr five_channels = tensor(Dims{4, 5, 3, 3}, p.type, p.format, kUidW);
    CHECK(finalize_op(Direction::forward, *x, *five_channels, *y) == CUDNN_STATUS_BAD_PARAM);
    const BackendPtr x4 = tensor(Dims{2, 4, 7, 7}, p.type, p.format, kUidX);
    const BackendPtr w2 = tensor(Dims{4, 2, 3, 3}, p.type, p.format, kUidW);
    CHECK(finalize_op(Direction::forward, *x4, *w2, *y) == CUDNN_STATUS_NOT_SUPPORTED);  // groups
    const BackendPtr wide = tensor(Dims{4, 3, 11, 11}, p.type, p.format, kUidW);
    CHECK(finalize_op(Direction::forward, *x, *wide, *y) == CUDNN_STATUS_BAD_PARAM);
    const BackendPtr oblong = tensor(Dims{4, 3, 3, 1}, p.type, p.format, kUidW);
    CHECK(finalize_op(Direction::forward, *x, *oblong, *y) == CUDNN_STATUS_NOT_SUPPORTED);
  }
  SUBCASE("types and layouts that differ") {
    const BackendPtr half_w = tensor(p.w_dims, CUDNN_DATA_HALF, p.format, kUidW);
    CHECK(finalize_op(Direction::forward, *x, *half_w, *y) == CUDNN_STATUS_NOT_SUPPORTED);
    const BackendPtr nhwc_y = tensor(p.y_dims, p.type, CUDNN_TENSOR_NHWC, kUidY);
    CHECK(finalize_op(Direction::forward, *x, *w, *nhwc_y) == CUDNN_STATUS_NOT_SUPPORTED);
  }
  SUBCASE("a required attribute of the operation missing") {
    const OperationAttributes a = operation_attributes(Direction::backward_filter);
    Backend op(a.type);
    REQUIRE(op.set_descriptor(a.x, *x) == CUDNN_STATUS_SUCCESS);
    REQUIRE(op.set_descriptor(a.w, *w) == CUDNN_STATUS_SUCCESS);
    REQUIRE(op.set_descriptor(a.y, *y) == CUDNN_STATUS_SUCCESS);
    REQUIRE(op.set_descriptor(a.conv, *conv) == CUDNN_STATUS_SUCCESS);
    const float one = 1.0f;
    REQUIRE(op.set(a.alpha, CUDNN_TYPE_FLOAT, 1, &one) == CUDNN_STATUS_SUCCESS);
    CHECK(op.finalize() == CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA"));
    // The forward's attributes are not the backward's.
    CHECK(op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, *x) ==
          CUDNN_STATUS_BAD_PARAM);
  }
  SUBCASE("the same uid twice in a graph, two operations, no handle") {
    const BackendPtr y_as_x = tensor(p.y_dims, p.type, p.format, kUidX);
    const BackendPtr op =
        unfinalized_operation(Direction::forward, *x, *w, *y_as_x, *conv, 1.0f, 0.0f);
    REQUIRE(op->finalize() == CUDNN_STATUS_SUCCESS);
    Backend graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    REQUIRE(graph.set_descriptor(CUDNN_ATTR_OPERATIONGRAPH_OPS, *op) == CUDNN_STATUS_SUCCESS);
    REQUIRE(graph.set_handle(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, handle.handle) ==
            CUDNN_STATUS_SUCCESS);
    CHECK(graph.finalize() == CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("uid 11"));

    const BackendPtr good =
        unfinalized_operation(Direction::forward, *x, *w, *y, *conv, 1.0f, 0.0f);
    REQUIRE(good->finalize() == CUDNN_STATUS_SUCCESS);
    Backend two(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    cudnnBackendDescriptor_t ops[] = {good->get(), good->get()};
    REQUIRE(two.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 2, ops) ==
            CUDNN_STATUS_SUCCESS);
    REQUIRE(two.set_handle(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, handle.handle) ==
            CUDNN_STATUS_SUCCESS);
    CHECK(two.finalize() == CUDNN_STATUS_NOT_SUPPORTED);

    Backend no_handle(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    CHECK(no_handle.set_handle(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, nullptr) ==
          CUDNN_STATUS_BAD_PARAM);
    CHECK(no_handle.set_descriptor(CUDNN_ATTR_OPERATIONGRAPH_OPS, *x) == CUDNN_STATUS_BAD_PARAM);
    REQUIRE(no_handle.set_descriptor(CUDNN_ATTR_OPERATIONGRAPH_OPS, *good) == CUDNN_STATUS_SUCCESS);
    CHECK(no_handle.finalize() == CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("CUDNN_ATTR_OPERATIONGRAPH_HANDLE"));
  }
  SUBCASE("heuristics modes, results and engines asked for wrongly") {
    const Graph g = make_graph(handle.handle, p, Direction::forward, 1.0f, 0.0f);
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_INSTANT}) {
      Backend h(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
      REQUIRE(h.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, *g.graph) ==
              CUDNN_STATUS_SUCCESS);
      REQUIRE(h.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode) ==
              CUDNN_STATUS_SUCCESS);
      CHECK(h.finalize() == CUDNN_STATUS_NOT_SUPPORTED);
    }
    Backend unfinalized_graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    Backend h(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    CHECK(h.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, unfinalized_graph) ==
          CUDNN_STATUS_BAD_PARAM);
    CHECK(h.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, *g.operation) ==
          CUDNN_STATUS_BAD_PARAM);

    const BackendPtr a = heuristics(*g.graph, CUDNN_HEUR_MODE_A);
    Backend engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR), config(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    cudnnBackendDescriptor_t not_configs[] = {config.get(), engine.get()};
    int64_t count = -1;
    CHECK(cudnnBackendGetAttribute(a->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 2, &count,
                                   not_configs) == CUDNN_STATUS_BAD_PARAM);
    CHECK(cudnnBackendFinalize(config.get()) == CUDNN_STATUS_BAD_PARAM);  // nothing was filled
    CHECK(cudnnBackendGetAttribute(a->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                                   nullptr) == CUDNN_STATUS_BAD_PARAM);
    CHECK(cudnnBackendGetAttribute(a->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, -1, &count,
                                   nullptr) == CUDNN_STATUS_BAD_PARAM);
    CHECK(cudnnBackendGetAttribute(a->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, nullptr,
                                   nullptr) == CUDNN_STATUS_BAD_PARAM);
    CHECK(cudnnBackendGetAttribute(a->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_INT64, 0,
                                   &count, nullptr) == CUDNN_STATUS_BAD_PARAM);

    const std::vector<BackendPtr> list = configs(*g.graph, CUDNN_HEUR_MODE_A);
    cudnnBackendDescriptor_t wrong = config.get();
    CHECK(cudnnBackendGetAttribute(list[0]->get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                                   &wrong) == CUDNN_STATUS_BAD_PARAM);
  }
  SUBCASE("plans: the refused engine, no handle, no configuration") {
    const Graph g = make_graph(handle.handle, p, Direction::backward_data, 1.0f, 1.0f);
    const std::vector<BackendPtr> list = configs(*g.graph, CUDNN_HEUR_MODE_A);
    BackendPtr refused;
    CHECK(make_plan(handle.handle, *list[2], &refused) == CUDNN_STATUS_NOT_SUPPORTED);
    int64_t count = 0, bytes = 0;
    CHECK(cudnnBackendGetAttribute(refused->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                   CUDNN_TYPE_INT64, 1, &count,
                                   &bytes) == CUDNN_STATUS_NOT_INITIALIZED);
    Backend plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    CHECK(plan.set_handle(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, nullptr) == CUDNN_STATUS_BAD_PARAM);
    REQUIRE(plan.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *list[0]) ==
            CUDNN_STATUS_SUCCESS);
    CHECK(plan.finalize() == CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("CUDNN_ATTR_EXECUTION_PLAN_HANDLE"));
    Backend unfilled(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    Backend other(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    CHECK(other.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, unfilled) ==
          CUDNN_STATUS_BAD_PARAM);
  }
}

TEST_CASE("fake cuDNN graph API: execution refuses what real cuDNN would fault on") {
  Handle handle;
  std::mt19937 rng(41);
  Problem p(kConvShapes[0], CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, rng);
  p.prepare(Direction::forward, 0.0f);
  const Graph g = make_graph(handle.handle, p, Direction::forward, 1.0f, 0.0f);
  const std::vector<BackendPtr> list = configs(*g.graph, CUDNN_HEUR_MODE_A);
  BackendPtr plan;  // rank 3: a workspace the size of the larger tensor
  REQUIRE(make_plan(handle.handle, *list[3], &plan) == CUDNN_STATUS_SUCCESS);
  const auto needed =
      static_cast<size_t>(get_int64(*plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE));
  REQUIRE(needed > 0);
  DeviceBytes workspace(needed);
  const std::vector<int64_t> uids{kUidX, kUidW, kUidY};
  const auto run = [&](const std::vector<void*>& pointers, void* ws) {
    return execute(handle.handle, *plan, uids, pointers, ws);
  };
  CHECK(run(p.pointers(), workspace.get()) == CUDNN_STATUS_SUCCESS);

  SUBCASE("a tensor's uid missing; extra ones are ignored") {
    CHECK(execute(handle.handle, *plan, {kUidX, kUidY}, {p.x.get(), p.y.get()}, workspace.get()) ==
          CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("no pointer for w"));
    CHECK(execute(handle.handle, *plan, {kUidX, kUidW, kUidY, 99},
                  {p.x.get(), p.w.get(), p.y.get(), p.x.get()},
                  workspace.get()) == CUDNN_STATUS_SUCCESS);
  }
  SUBCASE("memory that is not the device's, too small, or less aligned than promised") {
    std::vector<float> host(static_cast<size_t>(p.x_dims.count()));
    CHECK(run({host.data(), p.w.get(), p.y.get()}, workspace.get()) == CUDNN_STATUS_BAD_PARAM);
    CHECK(run({nullptr, p.w.get(), p.y.get()}, workspace.get()) == CUDNN_STATUS_BAD_PARAM);
    // w's buffer, 16 bytes in: aligned, but its last 16 bytes lie past the allocation.
    CHECK(run({p.x.get(), p.w.bytes_at(16), p.y.get()}, workspace.get()) == CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("not inside one allocation"));
    // x 4 bytes into a buffer with room for it: device memory, but not 16-byte aligned.
    DeviceBytes roomy(p.x.bytes() + kAlignment);
    roomy.fill(0);
    CHECK(run({roomy.bytes_at(4), p.w.get(), p.y.get()}, workspace.get()) ==
          CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("aligned"));
    CHECK(run({roomy.bytes_at(kAlignment), p.w.get(), p.y.get()}, workspace.get()) ==
          CUDNN_STATUS_SUCCESS);
  }
  SUBCASE("no workspace, or too small a one") {
    CHECK(run(p.pointers(), nullptr) == CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("workspace"));
    DeviceBytes small(needed - 256);
    CHECK(run(p.pointers(), small.get()) == CUDNN_STATUS_BAD_PARAM);
    // A plan that needs none runs without.
    BackendPtr fallback;
    REQUIRE(make_plan(handle.handle, *configs(*g.graph, CUDNN_HEUR_MODE_FALLBACK)[0], &fallback) ==
            CUDNN_STATUS_SUCCESS);
    CHECK(execute(handle.handle, *fallback, uids, p.pointers(), nullptr) == CUDNN_STATUS_SUCCESS);
  }
  SUBCASE("an output or a workspace over another operand") {
    const size_t x_bytes = p.x.bytes();
    DeviceBytes shared(x_bytes + std::max(needed, p.y.bytes()));
    // The last aligned place inside x.
    void* last_of_x = shared.bytes_at((x_bytes / kAlignment - 1) * kAlignment);
    CHECK(run({shared.get(), p.w.get(), last_of_x}, workspace.get()) == CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("y overlaps x"));
    CHECK(run({shared.get(), p.w.get(), p.y.get()}, last_of_x) == CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("workspace"));
    CHECK(run({shared.get(), p.w.get(), p.y.get()}, shared.bytes_at(x_bytes)) ==
          CUDNN_STATUS_SUCCESS);  // side by side
  }
  SUBCASE("unfinalized or mistaken plans and packs, a null handle") {
    Backend pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    CHECK(cudnnBackendExecute(handle.handle, plan->get(), pack.get()) == CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("not finalized"));
    const BackendPtr good = variant_pack(uids, p.pointers(), workspace.get());
    CHECK(cudnnBackendExecute(handle.handle, good->get(), plan->get()) == CUDNN_STATUS_BAD_PARAM);
    CHECK(cudnnBackendExecute(nullptr, plan->get(), good->get()) == CUDNN_STATUS_BAD_PARAM);
    Backend unfinalized_plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    CHECK(cudnnBackendExecute(handle.handle, unfinalized_plan.get(), good->get()) ==
          CUDNN_STATUS_BAD_PARAM);
  }
  SUBCASE("packs whose uids and pointers do not pair") {
    Backend pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    const std::vector<void*> two = {p.x.get(), p.w.get()};
    REQUIRE(pack.set_int64s(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids) == CUDNN_STATUS_SUCCESS);
    REQUIRE(pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 2, two.data()) ==
            CUDNN_STATUS_SUCCESS);
    CHECK(pack.finalize() == CUDNN_STATUS_BAD_PARAM);
    REQUIRE(pack.set_int64s(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, {kUidX, kUidX}) ==
            CUDNN_STATUS_SUCCESS);
    CHECK(pack.finalize() == CUDNN_STATUS_BAD_PARAM);
    CHECK(last_error_has("twice"));
  }
}

TEST_CASE("fake cuDNN graph API: an execution captured into a CUDA graph replays on new data") {
  Handle handle;
  std::mt19937 rng(43);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  REQUIRE(cudnnSetStream(handle.handle, stream) == CUDNN_STATUS_SUCCESS);
  cudaStream_t got = nullptr;
  CHECK(cudnnGetStream(handle.handle, &got) == CUDNN_STATUS_SUCCESS);
  CHECK(got == stream);
  CHECK(cudnnGetStream(nullptr, &got) == CUDNN_STATUS_BAD_PARAM);

  Problem p(kConvShapes[3], CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC, rng);
  const Direction direction = Direction::backward_filter;
  // The result the replay must give: of the inputs loaded after the capture.
  const std::vector<unsigned char> first_x = p.host_x;
  p.host_x = random_bytes(p.x_dims.count(), p.type, rng);
  const std::vector<unsigned char> expected =
      legacy_result(handle.handle, p, direction, 1.0f, 1.0f);
  const std::vector<unsigned char> later_x = p.host_x;
  p.host_x = first_x;

  Graph g = make_graph(handle.handle, p, direction, 1.0f, 1.0f);
  std::vector<BackendPtr> list = configs(*g.graph, CUDNN_HEUR_MODE_A);
  BackendPtr plan;  // rank 6: a plain engine with workspace
  REQUIRE(make_plan(handle.handle, *list[6], &plan) == CUDNN_STATUS_SUCCESS);
  const auto needed =
      static_cast<size_t>(get_int64(*plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE));
  REQUIRE(needed > 0);
  DeviceBytes workspace(needed);
  workspace.fill(0x11);
  p.prepare(direction, 1.0f);
  BackendPtr pack = variant_pack({kUidX, kUidW, kUidY}, p.pointers(), workspace.get());

  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  REQUIRE(cudnnBackendExecute(handle.handle, plan->get(), pack->get()) == CUDNN_STATUS_SUCCESS);
  cudaGraph_t captured = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &captured) == cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, captured, 0) == cudaSuccess);
  // Recorded, not run; and the descriptors are not needed any more.
  CHECK(p.w.download() == p.old_w);
  CHECK(workspace.download() == std::vector<unsigned char>(needed, 0x11));
  pack.reset();
  plan.reset();
  list.clear();
  g = Graph{};

  p.x.upload(later_x);
  REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(p.w.download() == expected);
  CHECK(workspace.download() == std::vector<unsigned char>(needed, 0xff));

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(captured);
  cudnnSetStream(handle.handle, nullptr);
  cudaStreamDestroy(stream);
}

TEST_CASE(
    "fake cuDNN graph API: descriptors are copied where given, and the filled ones are "
    "the caller's") {
  Handle handle;
  std::mt19937 rng(47);
  Problem p(kConvShapes[2], CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, rng);
  const std::vector<unsigned char> expected =
      legacy_result(handle.handle, p, Direction::forward, 1.0f, 0.0f);

  // Each descriptor destroyed as soon as the next one is made from it.
  Graph g = make_graph(handle.handle, p, Direction::forward, 1.0f, 0.0f);
  g.x->destroy();
  g.w->destroy();
  g.y->destroy();
  g.conv->destroy();
  g.operation->destroy();
  BackendPtr h = heuristics(*g.graph, CUDNN_HEUR_MODE_A);
  g.graph->destroy();
  const int64_t count = result_count(*h);
  std::vector<BackendPtr> first, second;
  std::vector<cudnnBackendDescriptor_t> first_raw, second_raw;
  for (int64_t i = 0; i < count; ++i) {
    first.push_back(std::make_unique<Backend>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    second.push_back(std::make_unique<Backend>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    first_raw.push_back(first.back()->get());
    second_raw.push_back(second.back()->get());
  }
  int64_t returned = 0;
  for (auto* raw : {&first_raw, &second_raw})
    REQUIRE(cudnnBackendGetAttribute(h->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned,
                                     raw->data()) == CUDNN_STATUS_SUCCESS);
  h.reset();

  // An engine outlives its configuration, and each fetch gave configurations of their own.
  Backend engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t engine_raw = engine.get();
  REQUIRE(cudnnBackendGetAttribute(first[0]->get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &returned,
                                   &engine_raw) == CUDNN_STATUS_SUCCESS);
  first[0].reset();
  CHECK(get_int64(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX) == 7);
  CHECK(engine_facts(*second[0]).index == 7);

  // A plan outlives its configuration and runs.
  BackendPtr plan;
  REQUIRE(make_plan(handle.handle, *first.back(), &plan) == CUDNN_STATUS_SUCCESS);
  first.clear();
  second.clear();
  const auto needed =
      static_cast<size_t>(get_int64(*plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE));
  DeviceBytes workspace(needed);
  p.prepare(Direction::forward, 0.0f);
  REQUIRE(execute(handle.handle, *plan, {kUidX, kUidW, kUidY}, p.pointers(), workspace.get()) ==
          CUDNN_STATUS_SUCCESS);
  CHECK(p.y.download() == expected);
}
