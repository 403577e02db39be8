// A host-memory stand-in for the part of cuDNN's graph ("backend") API, cudnn_graph.h, that the
// CUDA engine's graph-API convolutions call (src/cuda/conv_graph.cpp): one convolution per
// operation graph, in any of its three directions, from tensor descriptors to execution. The
// legacy calls' stand-in (fake_cudnn.cpp) does the arithmetic, so that a convolution gives the
// same bits through either API.
//
// What it keeps of real cuDNN, because the engine relies on it:
// - the descriptor life cycle: created, attributes set, finalized, then read or used. Setting an
//   attribute of a finalized descriptor and reading one of an unfinalized descriptor are
//   CUDNN_STATUS_NOT_INITIALIZED, as cudnnBackendSetAttribute's and cudnnBackendGetAttribute's
//   references say; an attribute of another descriptor type or one cuDNN computes (set), a wrong
//   attribute type or element count, a value none of cuDNN's, a descriptor of the wrong type or
//   unfinalized given as a value, a required attribute missing at finalize, a second finalize,
//   and an unfinalized plan or variant pack given to cudnnBackendExecute are
//   CUDNN_STATUS_BAD_PARAM; so is any pointer that is not a live descriptor (never created, or
//   destroyed: a second destroy is also reported on stderr, since a destroy is seldom checked);
// - a descriptor given as an attribute's value is copied, so that it may be destroyed after; the
//   descriptors the fake fills (the heuristics' configurations, a configuration's engine) are
//   created by the caller, come back finalized, and are the caller's to destroy;
// - the checks of a convolution's shapes: x, w and y consistent with it, out = (in + pre + post -
//   k) / stride + 1, and one uid per tensor of a graph; at execution, every tensor's uid in the
//   variant pack (more are ignored), with device memory large enough and aligned to the tensor's
//   CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, and a workspace of the plan's size;
// - engine configurations with numerical notes and workspaces for the engine's selection to sort
//   through, one of which cuDNN lists but will not build a plan of (CUDNN_STATUS_NOT_SUPPORTED
//   from the plan's finalize), as real heuristics do (the list below);
// - execution as the legacy calls' (fake_cudnn.cpp): the same computation, y = alpha * result +
//   beta * y where beta 0 never reads y, the plan's workspace filled with 0xff first (scratch),
//   the same refusal of an output or a workspace over another operand, and the work enqueued on
//   the stream of the handle given to cudnnBackendExecute, with everything copied at the call,
//   so that CUDA-graph capture records it and a replay redoes it on the buffers' contents of the
//   moment. cudnnGetStream is here too;
// - on a test's request (fake_cudnn_graph_faults.h), refusals a GPU's cuDNN may have where this
//   stand-in has none: an operation graph refused at finalize, an engine whose notes cannot be
//   read, a plan whose execution fails.
//
// What it does not model (refused with CUDNN_STATUS_NOT_SUPPORTED, never computed wrongly):
// - descriptor types other than the eleven above, graphs of more than one operation, virtual or
//   by-value tensors, every operation but the three convolutions;
// - anything but 4-d float, bfloat16 or half tensors in packed NCHW or NHWC strides (filters KCRS
//   or KRSC), the same type and layout for x, w and y; 2-d cross-correlation in float compute
//   with square filters, equal pre- and post-padding, the same padding and stride in both
//   dimensions, dilation 1 and one group; one alpha and one beta (float or double);
// - heuristics modes other than CUDNN_HEUR_MODE_A and CUDNN_HEUR_MODE_FALLBACK, knobs, behaviour
//   notes other than one engine's CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION (compiling takes no
//   time here), engines or configurations built by hand, attributes read back other than those the
//   engine reads, serialisation, cudnnBackendPopulateCudaGraph;
// - real engines: every configuration computes the same result in float (as the legacy stand-in,
//   whatever its notes say), and its notes and workspace are labels for the selection;
// - cuDNN 9's refined statuses: a refusal is reported with its category, CUDNN_STATUS_BAD_PARAM or
//   CUDNN_STATUS_NOT_SUPPORTED (real cuDNN may return CUDNN_STATUS_BAD_PARAM_NULL_POINTER and the
//   like: compare with CUDNN_STATUS_CATEGORY).
//
// The engine configurations, the same whatever the direction, types and shapes, where `larger`
// is the byte size of the larger of x and y and every workspace is rounded up to 256 bytes:
//
//   CUDNN_HEUR_MODE_A, best first:
//   | rank | global index | numerical notes                  | workspace                       |
//   |------|--------------|----------------------------------|---------------------------------|
//   | 0    | 7            | none; behaviour RUNTIME_COMPILATION | 0                            |
//   | 1    | 1            | TENSOR_CORE, DOWN_CONVERT_INPUTS | 4 KiB                           |
//   | 2    | 2            | none                             | none: its plan is NOT_SUPPORTED |
//   | 3    | 3            | TENSOR_CORE                      | larger                          |
//   | 4    | 4            | NONDETERMINISTIC                 | 1 GiB + 4 * larger (over 1 GiB) |
//   | 5    | 5            | REDUCED_PRECISION_REDUCTION      | 0                               |
//   | 6    | 0            | none                             | larger / 2                      |
//
//   CUDNN_HEUR_MODE_FALLBACK: one configuration, global index 6, no notes, no workspace.
//
// So a selection that refuses engines compiled at run time, tensor cores, converted inputs,
// reduced-precision reductions and non-determinism (strict float32, deterministic) still meets
// the refused plan first (rank 2), and then has a plain engine that needs workspace (rank 6) and
// one that needs none (FALLBACK); one that admits non-determinism meets a workspace no limit of
// the engine's admits (rank 4).
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "call_log.h"
#include "fake_cudnn_graph_faults.h"
#include "fake_cudnn_internal.h"
#include "stream_work.h"

namespace fake_cudnn {
namespace {

// ---------------------------------------------------------------------------------------------
// The engines (the table in the head comment).

enum class WorkspaceRule { none, four_kib, larger, half_larger, over_one_gib };

struct EngineSpec {
  int64_t global_index;
  std::vector<cudnnBackendNumericalNote_t> notes;
  WorkspaceRule workspace;
  bool builds_plan;
  std::vector<cudnnBackendBehaviorNote_t> behaviour = {};
};

const std::vector<EngineSpec>& mode_a_engines() {
  static const std::vector<EngineSpec> engines = {
      {7, {}, WorkspaceRule::none, true, {CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION}},
      {1,
       {CUDNN_NUMERICAL_NOTE_TENSOR_CORE, CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS},
       WorkspaceRule::four_kib,
       true},
      {2, {}, WorkspaceRule::none, false},
      {3, {CUDNN_NUMERICAL_NOTE_TENSOR_CORE}, WorkspaceRule::larger, true},
      {4, {CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC}, WorkspaceRule::over_one_gib, true},
      {5, {CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION}, WorkspaceRule::none, true},
      {0, {}, WorkspaceRule::half_larger, true},
  };
  return engines;
}

const std::vector<EngineSpec>& fallback_engines() {
  static const std::vector<EngineSpec> engines = {{6, {}, WorkspaceRule::none, true}};
  return engines;
}

size_t round_up_to_256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The fault a test asked for (fake_cudnn_graph_faults.h), and the engine it applies to.
struct InjectedFault {
  FakeGraphFault fault = FakeGraphFault::none;
  int64_t engine = -1;
};

std::mutex& fault_mutex() {
  static std::mutex mutex;
  return mutex;
}

InjectedFault& injected_fault() {
  static InjectedFault fault;
  return fault;
}

// Whether `fault` is injected, for `engine` where it names one.
bool injected(FakeGraphFault fault, int64_t engine = -1) {
  const std::lock_guard<std::mutex> lock(fault_mutex());
  const InjectedFault& current = injected_fault();
  return current.fault == fault &&
         (fault == FakeGraphFault::graph_refused || current.engine == engine);
}

size_t workspace_bytes(const EngineSpec& engine, const ConvProblem& p) {
  const size_t larger = std::max(byte_size(p.x), byte_size(p.y));
  switch (engine.workspace) {
    case WorkspaceRule::none: return 0;
    case WorkspaceRule::four_kib: return 4096;
    case WorkspaceRule::larger: return round_up_to_256(larger);
    case WorkspaceRule::half_larger: return round_up_to_256(larger / 2);
    case WorkspaceRule::over_one_gib: break;
  }
  return round_up_to_256((size_t{1} << 30) + 4 * larger);
}

// ---------------------------------------------------------------------------------------------
// Names for the messages.

#define FAKE_CUDNN_NAME(value) \
  case value: return #value;

std::string descriptor_name(cudnnBackendDescriptorType_t type) {
  switch (type) {
    FAKE_CUDNN_NAME(CUDNN_BACKEND_TENSOR_DESCRIPTOR)
    FAKE_CUDNN_NAME(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR)
    FAKE_CUDNN_NAME(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR)
    FAKE_CUDNN_NAME(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR)
    FAKE_CUDNN_NAME(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR)
    FAKE_CUDNN_NAME(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
    FAKE_CUDNN_NAME(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)
    FAKE_CUDNN_NAME(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
    FAKE_CUDNN_NAME(CUDNN_BACKEND_ENGINE_DESCRIPTOR)
    FAKE_CUDNN_NAME(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
    FAKE_CUDNN_NAME(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
    default: break;
  }
  return "descriptor type " + std::to_string(static_cast<int>(type));
}

std::string attribute_name(cudnnBackendAttributeName_t name) {
  switch (name) {
    FAKE_CUDNN_NAME(CUDNN_ATTR_TENSOR_DATA_TYPE)
    FAKE_CUDNN_NAME(CUDNN_ATTR_TENSOR_DIMENSIONS)
    FAKE_CUDNN_NAME(CUDNN_ATTR_TENSOR_STRIDES)
    FAKE_CUDNN_NAME(CUDNN_ATTR_TENSOR_UNIQUE_ID)
    FAKE_CUDNN_NAME(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT)
    FAKE_CUDNN_NAME(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS)
    FAKE_CUDNN_NAME(CUDNN_ATTR_CONVOLUTION_COMP_TYPE)
    FAKE_CUDNN_NAME(CUDNN_ATTR_CONVOLUTION_CONV_MODE)
    FAKE_CUDNN_NAME(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS)
    FAKE_CUDNN_NAME(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS)
    FAKE_CUDNN_NAME(CUDNN_ATTR_CONVOLUTION_DILATIONS)
    FAKE_CUDNN_NAME(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATIONGRAPH_OPS)
    FAKE_CUDNN_NAME(CUDNN_ATTR_OPERATIONGRAPH_HANDLE)
    FAKE_CUDNN_NAME(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH)
    FAKE_CUDNN_NAME(CUDNN_ATTR_ENGINEHEUR_MODE)
    FAKE_CUDNN_NAME(CUDNN_ATTR_ENGINEHEUR_RESULTS)
    FAKE_CUDNN_NAME(CUDNN_ATTR_ENGINECFG_ENGINE)
    FAKE_CUDNN_NAME(CUDNN_ATTR_ENGINE_GLOBAL_INDEX)
    FAKE_CUDNN_NAME(CUDNN_ATTR_ENGINE_NUMERICAL_NOTE)
    FAKE_CUDNN_NAME(CUDNN_ATTR_EXECUTION_PLAN_HANDLE)
    FAKE_CUDNN_NAME(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG)
    FAKE_CUDNN_NAME(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)
    FAKE_CUDNN_NAME(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS)
    FAKE_CUDNN_NAME(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS)
    FAKE_CUDNN_NAME(CUDNN_ATTR_VARIANT_PACK_WORKSPACE)
    default: break;
  }
  return "attribute " + std::to_string(static_cast<int>(name));
}

std::string attribute_type_name(cudnnBackendAttributeType_t type) {
  switch (type) {
    FAKE_CUDNN_NAME(CUDNN_TYPE_HANDLE)
    FAKE_CUDNN_NAME(CUDNN_TYPE_DATA_TYPE)
    FAKE_CUDNN_NAME(CUDNN_TYPE_INT32)
    FAKE_CUDNN_NAME(CUDNN_TYPE_INT64)
    FAKE_CUDNN_NAME(CUDNN_TYPE_FLOAT)
    FAKE_CUDNN_NAME(CUDNN_TYPE_DOUBLE)
    FAKE_CUDNN_NAME(CUDNN_TYPE_VOID_PTR)
    FAKE_CUDNN_NAME(CUDNN_TYPE_CONVOLUTION_MODE)
    FAKE_CUDNN_NAME(CUDNN_TYPE_HEUR_MODE)
    FAKE_CUDNN_NAME(CUDNN_TYPE_NUMERICAL_NOTE)
    FAKE_CUDNN_NAME(CUDNN_TYPE_BEHAVIOR_NOTE)
    FAKE_CUDNN_NAME(CUDNN_TYPE_BACKEND_DESCRIPTOR)
    default: break;
  }
  return "attribute type " + std::to_string(static_cast<int>(type));
}

#undef FAKE_CUDNN_NAME

// The attribute names of each descriptor type, as cudnn_graph.h numbers them: an attribute
// outside its descriptor's range is CUDNN_STATUS_BAD_PARAM, one inside that the fake does not
// model CUDNN_STATUS_NOT_SUPPORTED.
struct AttributeRange {
  int first, last;
};

AttributeRange attribute_range(cudnnBackendDescriptorType_t type) {
  switch (type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: return {900, 913};
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR: return {100, 106};
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR: return {700, 705};
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR: return {706, 711};
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR: return {712, 717};
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: return {800, 804};
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: return {200, 204};
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: return {300, 304};
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR: return {1300, 1308};
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: return {400, 407};
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: return {1000, 1012};
    default: break;
  }
  return {-1, -1};
}

bool belongs(cudnnBackendDescriptorType_t type, cudnnBackendAttributeName_t name) {
  const AttributeRange range = attribute_range(type);
  return name >= range.first && name <= range.last;
}

// Attributes cuDNN computes, which a caller reads and never sets.
bool read_only(cudnnBackendAttributeName_t name) {
  return name == CUDNN_ATTR_ENGINEHEUR_RESULTS ||
         name == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE ||
         name == CUDNN_ATTR_ENGINE_NUMERICAL_NOTE || name == CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE ||
         name == CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT;
}

// ---------------------------------------------------------------------------------------------
// Descriptors: what each type holds while it is set, and what finalize makes of it (`value`).
// Values given as attributes are copies, so a descriptor never points at another.

struct TensorValue {
  Layout layout;
  int64_t uid = 0;
  int64_t alignment = 1;
};

struct TensorState {
  std::optional<cudnnDataType_t> type;
  std::optional<std::vector<int64_t>> dims, strides;
  std::optional<int64_t> uid, alignment;
  TensorValue value;
};

// After finalize: symmetric and the same in both dimensions (anything else is refused).
struct ConvValue {
  int pad = 0, stride = 1;
};

struct ConvState {
  std::optional<int64_t> spatial_dims;
  std::optional<cudnnDataType_t> compute;
  std::optional<cudnnConvolutionMode_t> mode;
  std::optional<std::vector<int64_t>> pre, post, dilations, strides;
  ConvValue value;
};

// x: the convolution's input (dx backward data), w: its filter (dw backward filter), y: its
// output (dy in both backward directions), as in ConvProblem.
struct OperationValue {
  Direction direction = Direction::forward;
  TensorValue x, w, y;
  float alpha = 1.0f, beta = 0.0f;
  ConvProblem problem;
};

struct OperationState {
  Direction direction = Direction::forward;
  std::optional<TensorValue> x, w, y;
  std::optional<ConvValue> conv;
  std::optional<float> alpha, beta;
  OperationValue value;
};

struct GraphValue {
  OperationValue operation;
  cudnnHandle_t handle = nullptr;
};

struct GraphState {
  std::optional<std::vector<OperationValue>> operations;
  std::optional<cudnnHandle_t> handle;
  GraphValue value;
};

struct EngineValue {
  const EngineSpec* spec = nullptr;
  GraphValue graph;
};

struct HeuristicState {
  std::optional<GraphValue> graph;
  std::optional<cudnnBackendHeurMode_t> mode;
  std::vector<EngineValue> results;
};

// Filled by cudnnBackendGetAttribute only: engines and configurations built by hand are not
// modelled.
struct EngineState {
  std::optional<EngineValue> value;
};
struct ConfigState {
  std::optional<EngineValue> value;
};

struct PlanState {
  std::optional<cudnnHandle_t> handle;
  std::optional<EngineValue> config;
  size_t workspace = 0;
};

struct PackState {
  std::optional<std::vector<int64_t>> uids;
  std::optional<std::vector<void*>> pointers;
  void* workspace = nullptr;
};

using State = std::variant<TensorState, ConvState, OperationState, GraphState, HeuristicState,
                           EngineState, ConfigState, PlanState, PackState>;

struct Descriptor {
  cudnnBackendDescriptorType_t type;
  bool finalized = false;
  State state;
};

State operation_state(Direction direction) {
  OperationState state;
  state.direction = direction;
  return state;
}

std::optional<State> initial_state(cudnnBackendDescriptorType_t type) {
  switch (type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: return State{TensorState{}};
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR: return State{ConvState{}};
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
      return operation_state(Direction::forward);
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
      return operation_state(Direction::backward_data);
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
      return operation_state(Direction::backward_filter);
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: return State{GraphState{}};
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: return State{HeuristicState{}};
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR: return State{EngineState{}};
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: return State{ConfigState{}};
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: return State{PlanState{}};
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: return State{PackState{}};
    default: break;
  }
  return std::nullopt;
}

// The live descriptors: a pointer that is not one of them (never created, or destroyed) is
// refused instead of being read.
std::mutex& registry_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::unordered_set<Descriptor*>& live_descriptors() {
  static std::unordered_set<Descriptor*> live;
  return live;
}

Descriptor* lookup(cudnnBackendDescriptor_t handle) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  const auto it = live_descriptors().find(static_cast<Descriptor*>(handle));
  return it == live_descriptors().end() ? nullptr : *it;
}

void fill(Descriptor& d, State state) {
  d.state = std::move(state);
  d.finalized = true;
}

// ---------------------------------------------------------------------------------------------
// Reading attribute values.

constexpr const char* kSet = "cudnnBackendSetAttribute";
constexpr const char* kGet = "cudnnBackendGetAttribute";
constexpr const char* kFinalize = "cudnnBackendFinalize";
constexpr const char* kExecute = "cudnnBackendExecute";

// The arguments of one cudnnBackendSetAttribute call.
struct SetCall {
  cudnnBackendDescriptorType_t descriptor;
  cudnnBackendAttributeName_t name;
  cudnnBackendAttributeType_t type;
  int64_t count;
  const void* elements;
};

// Element i of a caller's array, copied: the caller's array need not be aligned for T. Enums
// are read as int and checked before they become one.
template <typename T>
T element(const void* elements, int64_t i) {
  T value;
  std::memcpy(&value, static_cast<const unsigned char*>(elements) + i * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
std::vector<T> all_elements(const SetCall& call) {
  std::vector<T> values(static_cast<size_t>(call.count));
  for (int64_t i = 0; i < call.count; ++i)
    values[static_cast<size_t>(i)] = element<T>(call.elements, i);
  return values;
}

template <typename... Parts>
cudnnStatus_t refuse(cudnnStatus_t status, const SetCall& call, Parts&&... parts) {
  return failure(status, kSet, attribute_name(call.name), " of a ",
                 descriptor_name(call.descriptor), ": ", std::forward<Parts>(parts)...);
}

cudnnStatus_t expect(const SetCall& call, cudnnBackendAttributeType_t type, int64_t min_count,
                     int64_t max_count) {
  if (call.type != type)
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "takes ", attribute_type_name(type), ", not ",
                  attribute_type_name(call.type));
  if (call.count < min_count || call.count > max_count)
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "takes ", min_count,
                  min_count == max_count ? "" : " to " + std::to_string(max_count),
                  " element(s), not ", call.count);
  if (call.count > 0 && call.elements == nullptr)
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "arrayOfElements is null");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t not_modelled(const SetCall& call) {
  return refuse(CUDNN_STATUS_NOT_SUPPORTED, call, "setting it is not modelled");
}

cudnnStatus_t set_int64(const SetCall& call, std::optional<int64_t>* out) {
  FAKE_CUDNN_TRY(expect(call, CUDNN_TYPE_INT64, 1, 1));
  *out = element<int64_t>(call.elements, 0);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t set_int64s(const SetCall& call, std::optional<std::vector<int64_t>>* out) {
  FAKE_CUDNN_TRY(expect(call, CUDNN_TYPE_INT64, 1, CUDNN_DIM_MAX));
  *out = all_elements<int64_t>(call);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t set_data_type(const SetCall& call, std::optional<cudnnDataType_t>* out) {
  FAKE_CUDNN_TRY(expect(call, CUDNN_TYPE_DATA_TYPE, 1, 1));
  const int value = element<int>(call.elements, 0);
  if (value < CUDNN_DATA_FLOAT || value > CUDNN_DATA_COMPLEX_FP64)
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "data type ", value, " is none of cuDNN's");
  *out = static_cast<cudnnDataType_t>(value);
  return CUDNN_STATUS_SUCCESS;
}

// alpha or beta: cuDNN takes float or double.
cudnnStatus_t set_scale(const SetCall& call, std::optional<float>* out) {
  const bool is_double = call.type == CUDNN_TYPE_DOUBLE;
  FAKE_CUDNN_TRY(expect(call, is_double ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT, 1, 1));
  *out = is_double ? static_cast<float>(element<double>(call.elements, 0))
                   : element<float>(call.elements, 0);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t set_handle(const SetCall& call, std::optional<cudnnHandle_t>* out) {
  FAKE_CUDNN_TRY(expect(call, CUDNN_TYPE_HANDLE, 1, 1));
  const auto handle = element<cudnnHandle_t>(call.elements, 0);
  if (handle == nullptr) return refuse(CUDNN_STATUS_BAD_PARAM, call, "the handle is null");
  *out = handle;
  return CUDNN_STATUS_SUCCESS;
}

// Element i of a CUDNN_TYPE_BACKEND_DESCRIPTOR value: a live, finalized descriptor of one of
// `types`.
cudnnStatus_t referenced(const SetCall& call, int64_t i,
                         std::initializer_list<cudnnBackendDescriptorType_t> types,
                         const Descriptor** out) {
  const Descriptor* d = lookup(element<cudnnBackendDescriptor_t>(call.elements, i));
  if (d == nullptr)
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "element ", i,
                  " is not a live descriptor (null, destroyed or never created)");
  if (std::find(types.begin(), types.end(), d->type) == types.end())
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "element ", i, " is a ", descriptor_name(d->type),
                  ", which this attribute does not take");
  if (!d->finalized)
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "element ", i, ", a ", descriptor_name(d->type),
                  ", is not finalized");
  *out = d;
  return CUDNN_STATUS_SUCCESS;
}

// The one descriptor of a CUDNN_TYPE_BACKEND_DESCRIPTOR value of `type`; its finalized value.
template <typename StateOf>
cudnnStatus_t referenced_state(const SetCall& call, cudnnBackendDescriptorType_t type,
                               const StateOf** out) {
  FAKE_CUDNN_TRY(expect(call, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, 1));
  const Descriptor* d = nullptr;
  FAKE_CUDNN_TRY(referenced(call, 0, {type}, &d));
  *out = &std::get<StateOf>(d->state);
  return CUDNN_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Finalize: required attributes and their consistency.

template <typename... Parts>
cudnnStatus_t refuse_finalize(cudnnStatus_t status, cudnnBackendDescriptorType_t type,
                              Parts&&... parts) {
  return failure(status, kFinalize, descriptor_name(type), ": ", std::forward<Parts>(parts)...);
}

template <typename T>
cudnnStatus_t require(const std::optional<T>& value, cudnnBackendDescriptorType_t type,
                      cudnnBackendAttributeName_t name) {
  if (value.has_value()) return CUDNN_STATUS_SUCCESS;
  return refuse_finalize(CUDNN_STATUS_BAD_PARAM, type, attribute_name(name),
                         ", a required attribute, is not set");
}

// ---------------------------------------------------------------------------------------------
// CUDNN_BACKEND_TENSOR_DESCRIPTOR.

cudnnStatus_t set(TensorState& t, const SetCall& call) {
  switch (call.name) {
    case CUDNN_ATTR_TENSOR_DATA_TYPE: return set_data_type(call, &t.type);
    case CUDNN_ATTR_TENSOR_DIMENSIONS: return set_int64s(call, &t.dims);
    case CUDNN_ATTR_TENSOR_STRIDES: return set_int64s(call, &t.strides);
    case CUDNN_ATTR_TENSOR_UNIQUE_ID: return set_int64(call, &t.uid);
    case CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT: return set_int64(call, &t.alignment);
    default: break;
  }
  return not_modelled(call);
}

// The memory format of packed strides over (n, c, h, w); none for any other strides.
std::optional<cudnnTensorFormat_t> packed_format(const std::vector<int64_t>& d,
                                                 const std::vector<int64_t>& strides) {
  const int64_t c = d[1], h = d[2], w = d[3];
  if (strides == std::vector<int64_t>{c * h * w, h * w, w, 1}) return CUDNN_TENSOR_NCHW;
  if (strides == std::vector<int64_t>{h * w * c, 1, w * c, c}) return CUDNN_TENSOR_NHWC;
  return std::nullopt;
}

cudnnStatus_t check_tensor_values(const TensorState& t) {
  const auto type = CUDNN_BACKEND_TENSOR_DESCRIPTOR;
  const std::vector<int64_t>& dims = *t.dims;
  const std::vector<int64_t>& strides = *t.strides;
  if (dims.size() != strides.size())
    return refuse_finalize(CUDNN_STATUS_BAD_PARAM, type, dims.size(), " dimensions but ",
                           strides.size(), " strides");
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] < 1 || strides[i] < 1)
      return refuse_finalize(CUDNN_STATUS_BAD_PARAM, type, "dimension ", i, " is ", dims[i],
                             " with stride ", strides[i], "; both must be >= 1");
  const int64_t alignment = *t.alignment;
  if (alignment < 1 || (alignment & (alignment - 1)) != 0)
    return refuse_finalize(CUDNN_STATUS_BAD_PARAM, type, "byte alignment ", alignment,
                           " is not a power of two");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t check_tensor_modelled(const TensorState& t) {
  const auto type = CUDNN_BACKEND_TENSOR_DESCRIPTOR;
  if (!supported_type(*t.type))
    return refuse_finalize(CUDNN_STATUS_NOT_SUPPORTED, type, "data type ",
                           static_cast<int>(*t.type), " is not float, bfloat16 or half");
  if (t.dims->size() != 4)
    return refuse_finalize(CUDNN_STATUS_NOT_SUPPORTED, type, "only 4-d tensors are modelled, not ",
                           t.dims->size(), "-d");
  for (int64_t d : *t.dims)
    if (d > INT_MAX)
      return refuse_finalize(CUDNN_STATUS_NOT_SUPPORTED, type, "dimension ", d, " is too large");
  if (!packed_format(*t.dims, *t.strides))
    return refuse_finalize(CUDNN_STATUS_NOT_SUPPORTED, type,
                           "only packed NCHW or NHWC strides are modelled");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize(TensorState& t) {
  const auto type = CUDNN_BACKEND_TENSOR_DESCRIPTOR;
  FAKE_CUDNN_TRY(require(t.type, type, CUDNN_ATTR_TENSOR_DATA_TYPE));
  FAKE_CUDNN_TRY(require(t.dims, type, CUDNN_ATTR_TENSOR_DIMENSIONS));
  FAKE_CUDNN_TRY(require(t.strides, type, CUDNN_ATTR_TENSOR_STRIDES));
  FAKE_CUDNN_TRY(require(t.uid, type, CUDNN_ATTR_TENSOR_UNIQUE_ID));
  FAKE_CUDNN_TRY(require(t.alignment, type, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT));
  FAKE_CUDNN_TRY(check_tensor_values(t));
  FAKE_CUDNN_TRY(check_tensor_modelled(t));
  const std::vector<int64_t>& d = *t.dims;
  Layout layout;
  layout.set = true;
  layout.n = static_cast<int>(d[0]);
  layout.c = static_cast<int>(d[1]);
  layout.h = static_cast<int>(d[2]);
  layout.w = static_cast<int>(d[3]);
  layout.type = *t.type;
  layout.format = *packed_format(d, *t.strides);
  t.value = TensorValue{layout, *t.uid, *t.alignment};
  return CUDNN_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR.

cudnnStatus_t set_mode(const SetCall& call, std::optional<cudnnConvolutionMode_t>* out) {
  FAKE_CUDNN_TRY(expect(call, CUDNN_TYPE_CONVOLUTION_MODE, 1, 1));
  const int value = element<int>(call.elements, 0);
  if (value != CUDNN_CONVOLUTION && value != CUDNN_CROSS_CORRELATION)
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "mode ", value, " is none of cuDNN's");
  *out = static_cast<cudnnConvolutionMode_t>(value);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t set(ConvState& c, const SetCall& call) {
  switch (call.name) {
    case CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS: return set_int64(call, &c.spatial_dims);
    case CUDNN_ATTR_CONVOLUTION_COMP_TYPE: return set_data_type(call, &c.compute);
    case CUDNN_ATTR_CONVOLUTION_CONV_MODE: return set_mode(call, &c.mode);
    case CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS: return set_int64s(call, &c.pre);
    case CUDNN_ATTR_CONVOLUTION_POST_PADDINGS: return set_int64s(call, &c.post);
    case CUDNN_ATTR_CONVOLUTION_DILATIONS: return set_int64s(call, &c.dilations);
    case CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES: return set_int64s(call, &c.strides);
    default: break;
  }
  return not_modelled(call);
}

cudnnStatus_t require_convolution(const ConvState& c) {
  const auto type = CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR;
  FAKE_CUDNN_TRY(require(c.spatial_dims, type, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS));
  FAKE_CUDNN_TRY(require(c.compute, type, CUDNN_ATTR_CONVOLUTION_COMP_TYPE));
  FAKE_CUDNN_TRY(require(c.mode, type, CUDNN_ATTR_CONVOLUTION_CONV_MODE));
  FAKE_CUDNN_TRY(require(c.pre, type, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS));
  FAKE_CUDNN_TRY(require(c.post, type, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS));
  FAKE_CUDNN_TRY(require(c.dilations, type, CUDNN_ATTR_CONVOLUTION_DILATIONS));
  return require(c.strides, type, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES);
}

// Every array as long as the spatial dimensions, each value in cuDNN's range.
cudnnStatus_t check_convolution_values(const ConvState& c) {
  const auto type = CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR;
  const int64_t dims = *c.spatial_dims;
  if (dims < 1 || dims > CUDNN_DIM_MAX - 2)
    return refuse_finalize(CUDNN_STATUS_BAD_PARAM, type, "spatial dimensions ", dims,
                           " are out of range");
  struct Array {
    const char* name;
    const std::vector<int64_t>& values;
    int64_t least;
  };
  for (const Array& a : {Array{"pre-paddings", *c.pre, 0}, Array{"post-paddings", *c.post, 0},
                         Array{"dilations", *c.dilations, 1}, Array{"strides", *c.strides, 1}}) {
    if (static_cast<int64_t>(a.values.size()) != dims)
      return refuse_finalize(CUDNN_STATUS_BAD_PARAM, type, a.values.size(), " ", a.name, " for ",
                             dims, " spatial dimensions");
    for (int64_t v : a.values)
      if (v < a.least)
        return refuse_finalize(CUDNN_STATUS_BAD_PARAM, type, a.name, " must be >= ", a.least,
                               ", not ", v);
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t check_convolution_modelled(const ConvState& c) {
  const auto type = CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR;
  if (*c.spatial_dims != 2)
    return refuse_finalize(CUDNN_STATUS_NOT_SUPPORTED, type, "only 2-d convolutions are modelled");
  if (*c.compute != CUDNN_DATA_FLOAT)
    return refuse_finalize(CUDNN_STATUS_NOT_SUPPORTED, type, "only float compute is modelled");
  if (*c.mode != CUDNN_CROSS_CORRELATION)
    return refuse_finalize(CUDNN_STATUS_NOT_SUPPORTED, type, "only cross-correlation is modelled");
  const std::vector<int64_t>& pre = *c.pre;
  const std::vector<int64_t>& strides = *c.strides;
  if ((*c.dilations)[0] != 1 || (*c.dilations)[1] != 1)
    return refuse_finalize(CUDNN_STATUS_NOT_SUPPORTED, type, "only dilation 1 is modelled");
  if (pre != *c.post || pre[0] != pre[1] || strides[0] != strides[1])
    return refuse_finalize(CUDNN_STATUS_NOT_SUPPORTED, type,
                           "only equal pre- and post-padding, and the same padding and stride in "
                           "both dimensions, are modelled");
  if (pre[0] > INT_MAX || strides[0] > INT_MAX)
    return refuse_finalize(CUDNN_STATUS_NOT_SUPPORTED, type, "padding or stride too large");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize(ConvState& c) {
  FAKE_CUDNN_TRY(require_convolution(c));
  FAKE_CUDNN_TRY(check_convolution_values(c));
  FAKE_CUDNN_TRY(check_convolution_modelled(c));
  c.value = ConvValue{static_cast<int>((*c.pre)[0]), static_cast<int>((*c.strides)[0])};
  return CUDNN_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// The three convolution operations.

cudnnBackendDescriptorType_t operation_type(Direction direction) {
  switch (direction) {
    case Direction::forward: return CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR;
    case Direction::backward_data:
      return CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR;
    case Direction::backward_filter: break;
  }
  return CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
}

// A direction's attributes, by the role of their tensor in ConvProblem.
struct OperationAttributes {
  cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
};

OperationAttributes operation_attributes(Direction direction) {
  switch (direction) {
    case Direction::forward:
      return {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
    case Direction::backward_data:
      return {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
    case Direction::backward_filter: break;
  }
  return {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
}

// The tensors' names in messages, by the same roles.
struct OperandNames {
  const char *x, *w, *y;
};

OperandNames operand_names(Direction direction) {
  switch (direction) {
    case Direction::forward: return {"x", "w", "y"};
    case Direction::backward_data: return {"dx", "w", "dy"};
    case Direction::backward_filter: break;
  }
  return {"x", "dw", "dy"};
}

cudnnStatus_t set_tensor_value(const SetCall& call, std::optional<TensorValue>* out) {
  const TensorState* t = nullptr;
  FAKE_CUDNN_TRY(referenced_state(call, CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t));
  *out = t->value;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t set_convolution_value(const SetCall& call, std::optional<ConvValue>* out) {
  const ConvState* c = nullptr;
  FAKE_CUDNN_TRY(referenced_state(call, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &c));
  *out = c->value;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t set(OperationState& op, const SetCall& call) {
  const OperationAttributes a = operation_attributes(op.direction);
  if (call.name == a.x) return set_tensor_value(call, &op.x);
  if (call.name == a.w) return set_tensor_value(call, &op.w);
  if (call.name == a.y) return set_tensor_value(call, &op.y);
  if (call.name == a.conv) return set_convolution_value(call, &op.conv);
  if (call.name == a.alpha) return set_scale(call, &op.alpha);
  if (call.name == a.beta) return set_scale(call, &op.beta);
  return not_modelled(call);
}

cudnnStatus_t require_operation(const OperationState& op) {
  const OperationAttributes a = operation_attributes(op.direction);
  const cudnnBackendDescriptorType_t type = operation_type(op.direction);
  FAKE_CUDNN_TRY(require(op.x, type, a.x));
  FAKE_CUDNN_TRY(require(op.w, type, a.w));
  FAKE_CUDNN_TRY(require(op.y, type, a.y));
  FAKE_CUDNN_TRY(require(op.conv, type, a.conv));
  FAKE_CUDNN_TRY(require(op.alpha, type, a.alpha));
  return require(op.beta, type, a.beta);
}

// The tensors' types and layouts, and the filter against the input: what the computation can
// take (NOT_SUPPORTED) and what no convolution has (BAD_PARAM).
cudnnStatus_t check_operands_fit(const OperationState& op) {
  const OperandNames n = operand_names(op.direction);
  const cudnnBackendDescriptorType_t type = operation_type(op.direction);
  const Layout &x = op.x->layout, &w = op.w->layout, &y = op.y->layout;
  if (x.type != w.type || x.type != y.type)
    return refuse_finalize(CUDNN_STATUS_NOT_SUPPORTED, type, n.x, ", ", n.w, " and ", n.y,
                           " of different data types are not modelled");
  if (x.format != w.format || x.format != y.format)
    return refuse_finalize(CUDNN_STATUS_NOT_SUPPORTED, type, n.x, ", ", n.w, " and ", n.y,
                           " of different layouts are not modelled");
  if (x.c != w.c)
    return refuse_finalize(x.c % w.c == 0 ? CUDNN_STATUS_NOT_SUPPORTED : CUDNN_STATUS_BAD_PARAM,
                           type, n.x, " has ", x.c, " channels and ", n.w, " ", w.c,
                           x.c % w.c == 0 ? " (grouped convolutions are not modelled)" : "");
  if (w.h != w.w)
    return refuse_finalize(CUDNN_STATUS_NOT_SUPPORTED, type, "only square filters are modelled");
  const int pad = op.conv->pad;
  if (x.h + 2 * pad < w.h || x.w + 2 * pad < w.w)
    return refuse_finalize(CUDNN_STATUS_BAD_PARAM, type, "the ", w.h, "x", w.w, " filter ", n.w,
                           " does not fit the padded ", x.h, "x", x.w, " ", n.x);
  return CUDNN_STATUS_SUCCESS;
}

// y against what the convolution makes of x and w: out = (in + pre + post - k) / stride + 1.
cudnnStatus_t describe(const OperationState& op, ConvProblem* p) {
  FAKE_CUDNN_TRY(check_operands_fit(op));
  const OperandNames n = operand_names(op.direction);
  const Layout &x = op.x->layout, &w = op.w->layout, &y = op.y->layout;
  const rddp::ConvShape s = conv_shape_of(x, w, op.conv->stride, op.conv->pad);
  if (y.n != x.n || y.c != w.n || y.h != s.out_h() || y.w != s.out_w())
    return refuse_finalize(CUDNN_STATUS_BAD_PARAM, operation_type(op.direction), n.y, " is ", y.n,
                           "x", y.c, "x", y.h, "x", y.w, " but the convolution of ", n.x, " and ",
                           n.w, " gives ", x.n, "x", w.n, "x", s.out_h(), "x", s.out_w());
  p->x = x;
  p->w = w;
  p->y = y;
  p->math = CUDNN_DEFAULT_MATH;
  p->shape = s;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize(OperationState& op) {
  FAKE_CUDNN_TRY(require_operation(op));
  ConvProblem p;
  FAKE_CUDNN_TRY(describe(op, &p));
  op.value = OperationValue{op.direction, *op.x, *op.w, *op.y, *op.alpha, *op.beta, p};
  return CUDNN_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR.

cudnnStatus_t set_operations(const SetCall& call, GraphState& g) {
  FAKE_CUDNN_TRY(expect(call, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, INT32_MAX));
  std::vector<OperationValue> operations;
  for (int64_t i = 0; i < call.count; ++i) {
    const Descriptor* d = nullptr;
    FAKE_CUDNN_TRY(referenced(call, i,
                              {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                               CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                               CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR},
                              &d));
    operations.push_back(std::get<OperationState>(d->state).value);
  }
  g.operations = std::move(operations);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t set(GraphState& g, const SetCall& call) {
  switch (call.name) {
    case CUDNN_ATTR_OPERATIONGRAPH_OPS: return set_operations(call, g);
    case CUDNN_ATTR_OPERATIONGRAPH_HANDLE: return set_handle(call, &g.handle);
    default: break;
  }
  return not_modelled(call);
}

// One uid per tensor of the graph.
cudnnStatus_t check_unique_ids(const OperationValue& op) {
  const OperandNames n = operand_names(op.direction);
  const std::pair<const char*, int64_t> tensors[] = {
      {n.x, op.x.uid}, {n.w, op.w.uid}, {n.y, op.y.uid}};
  for (size_t i = 0; i < 3; ++i)
    for (size_t j = i + 1; j < 3; ++j)
      if (tensors[i].second == tensors[j].second)
        return refuse_finalize(CUDNN_STATUS_BAD_PARAM, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
                               "uid ", tensors[i].second, " is both ", tensors[i].first, "'s and ",
                               tensors[j].first, "'s");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize(GraphState& g) {
  const auto type = CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR;
  FAKE_CUDNN_TRY(require(g.operations, type, CUDNN_ATTR_OPERATIONGRAPH_OPS));
  FAKE_CUDNN_TRY(require(g.handle, type, CUDNN_ATTR_OPERATIONGRAPH_HANDLE));
  if (g.operations->size() != 1)
    return refuse_finalize(CUDNN_STATUS_NOT_SUPPORTED, type,
                           "only graphs of one operation are modelled, not ", g.operations->size());
  FAKE_CUDNN_TRY(check_unique_ids(g.operations->front()));
  if (injected(FakeGraphFault::graph_refused))
    return refuse_finalize(CUDNN_STATUS_NOT_SUPPORTED, type, "refused (an injected fault)");
  g.value = GraphValue{g.operations->front(), *g.handle};
  return CUDNN_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR.

cudnnStatus_t set_heuristic_mode(const SetCall& call, std::optional<cudnnBackendHeurMode_t>* out) {
  FAKE_CUDNN_TRY(expect(call, CUDNN_TYPE_HEUR_MODE, 1, 1));
  const int value = element<int>(call.elements, 0);
  if (value < 0 || value >= CUDNN_HEUR_MODES_COUNT)
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "mode ", value, " is none of cuDNN's");
  *out = static_cast<cudnnBackendHeurMode_t>(value);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t set(HeuristicState& h, const SetCall& call) {
  switch (call.name) {
    case CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: {
      const GraphState* g = nullptr;
      FAKE_CUDNN_TRY(referenced_state(call, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g));
      h.graph = g->value;
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_ATTR_ENGINEHEUR_MODE: return set_heuristic_mode(call, &h.mode);
    default: break;
  }
  return not_modelled(call);
}

cudnnStatus_t finalize(HeuristicState& h) {
  const auto type = CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR;
  FAKE_CUDNN_TRY(require(h.graph, type, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH));
  FAKE_CUDNN_TRY(require(h.mode, type, CUDNN_ATTR_ENGINEHEUR_MODE));
  if (*h.mode != CUDNN_HEUR_MODE_A && *h.mode != CUDNN_HEUR_MODE_FALLBACK)
    return refuse_finalize(CUDNN_STATUS_NOT_SUPPORTED, type, "heuristics mode ",
                           static_cast<int>(*h.mode), " is not modelled (only A and FALLBACK)");
  const std::vector<EngineSpec>& engines =
      *h.mode == CUDNN_HEUR_MODE_A ? mode_a_engines() : fallback_engines();
  h.results.clear();
  for (const EngineSpec& engine : engines)
    h.results.push_back(EngineValue{&engine, *h.graph});
  return CUDNN_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Configurations, engines, execution plans and variant packs.

cudnnStatus_t set(ConfigState&, const SetCall& call) { return not_modelled(call); }

cudnnStatus_t finalize(ConfigState& c) {
  if (c.value) return CUDNN_STATUS_SUCCESS;
  return refuse_finalize(CUDNN_STATUS_BAD_PARAM, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                         "CUDNN_ATTR_ENGINECFG_ENGINE, a required attribute, is not set "
                         "(configurations come from CUDNN_ATTR_ENGINEHEUR_RESULTS only)");
}

cudnnStatus_t set(EngineState&, const SetCall& call) { return not_modelled(call); }

cudnnStatus_t finalize(EngineState& e) {
  if (e.value) return CUDNN_STATUS_SUCCESS;
  return refuse_finalize(CUDNN_STATUS_BAD_PARAM, CUDNN_BACKEND_ENGINE_DESCRIPTOR,
                         "CUDNN_ATTR_ENGINE_OPERATION_GRAPH and CUDNN_ATTR_ENGINE_GLOBAL_INDEX, "
                         "required attributes, are not set (engines come from "
                         "CUDNN_ATTR_ENGINECFG_ENGINE only)");
}

cudnnStatus_t set(PlanState& plan, const SetCall& call) {
  switch (call.name) {
    case CUDNN_ATTR_EXECUTION_PLAN_HANDLE: return set_handle(call, &plan.handle);
    case CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: {
      const ConfigState* c = nullptr;
      FAKE_CUDNN_TRY(referenced_state(call, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &c));
      plan.config = c->value;
      return CUDNN_STATUS_SUCCESS;
    }
    default: break;
  }
  return not_modelled(call);
}

cudnnStatus_t finalize(PlanState& plan) {
  const auto type = CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR;
  FAKE_CUDNN_TRY(require(plan.handle, type, CUDNN_ATTR_EXECUTION_PLAN_HANDLE));
  FAKE_CUDNN_TRY(require(plan.config, type, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG));
  const EngineSpec& engine = *plan.config->spec;
  if (!engine.builds_plan)
    return refuse_finalize(CUDNN_STATUS_NOT_SUPPORTED, type, "engine ", engine.global_index,
                           " has no kernel for this operation graph");
  plan.workspace = workspace_bytes(engine, plan.config->graph.operation.problem);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t set_pointers(const SetCall& call, std::optional<std::vector<void*>>* out) {
  FAKE_CUDNN_TRY(expect(call, CUDNN_TYPE_VOID_PTR, 0, INT32_MAX));
  *out = all_elements<void*>(call);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t set(PackState& pack, const SetCall& call) {
  switch (call.name) {
    case CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS:
      FAKE_CUDNN_TRY(expect(call, CUDNN_TYPE_INT64, 0, INT32_MAX));
      pack.uids = all_elements<int64_t>(call);
      return CUDNN_STATUS_SUCCESS;
    case CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: return set_pointers(call, &pack.pointers);
    case CUDNN_ATTR_VARIANT_PACK_WORKSPACE:
      FAKE_CUDNN_TRY(expect(call, CUDNN_TYPE_VOID_PTR, 1, 1));
      pack.workspace = element<void*>(call.elements, 0);
      return CUDNN_STATUS_SUCCESS;
    default: break;
  }
  return not_modelled(call);
}

cudnnStatus_t finalize(PackState& pack) {
  const auto type = CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR;
  FAKE_CUDNN_TRY(require(pack.uids, type, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS));
  FAKE_CUDNN_TRY(require(pack.pointers, type, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS));
  if (pack.uids->size() != pack.pointers->size())
    return refuse_finalize(CUDNN_STATUS_BAD_PARAM, type, pack.uids->size(), " uids but ",
                           pack.pointers->size(), " data pointers");
  std::vector<int64_t> sorted = *pack.uids;
  std::sort(sorted.begin(), sorted.end());
  const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice != sorted.end())
    return refuse_finalize(CUDNN_STATUS_BAD_PARAM, type, "uid ", *twice, " is given twice");
  return CUDNN_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// cudnnBackendGetAttribute: the attributes the engine reads back.

// The arguments of one cudnnBackendGetAttribute call.
struct GetCall {
  cudnnBackendDescriptorType_t descriptor;
  cudnnBackendAttributeName_t name;
  cudnnBackendAttributeType_t type;
  int64_t requested;
  int64_t* count;
  void* elements;
};

template <typename... Parts>
cudnnStatus_t refuse(cudnnStatus_t status, const GetCall& call, Parts&&... parts) {
  return failure(status, kGet, attribute_name(call.name), " of a ",
                 descriptor_name(call.descriptor), ": ", std::forward<Parts>(parts)...);
}

cudnnStatus_t not_modelled(const GetCall& call) {
  return refuse(CUDNN_STATUS_NOT_SUPPORTED, call, "reading it is not modelled");
}

cudnnStatus_t expect_output(const GetCall& call, cudnnBackendAttributeType_t type) {
  if (call.type != type)
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "is ", attribute_type_name(type), ", not ",
                  attribute_type_name(call.type));
  if (call.requested > 0 && call.elements == nullptr)
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "arrayOfElements is null for ", call.requested,
                  " element(s)");
  return CUDNN_STATUS_SUCCESS;
}

// Writes the first `requested` of `values` and says how many there are.
template <typename T>
cudnnStatus_t give(const GetCall& call, cudnnBackendAttributeType_t type,
                   const std::vector<T>& values) {
  FAKE_CUDNN_TRY(expect_output(call, type));
  const int64_t written = std::min<int64_t>(call.requested, static_cast<int64_t>(values.size()));
  if (written > 0)
    std::memcpy(call.elements, values.data(), static_cast<size_t>(written) * sizeof(T));
  *call.count = static_cast<int64_t>(values.size());
  return CUDNN_STATUS_SUCCESS;
}

// The caller's descriptors of `type` that a get fills: the first `n` of its array.
cudnnStatus_t output_descriptors(const GetCall& call, cudnnBackendDescriptorType_t type, int64_t n,
                                 std::vector<Descriptor*>* out) {
  FAKE_CUDNN_TRY(expect_output(call, CUDNN_TYPE_BACKEND_DESCRIPTOR));
  for (int64_t i = 0; i < n; ++i) {
    Descriptor* d = lookup(element<cudnnBackendDescriptor_t>(call.elements, i));
    if (d == nullptr || d->type != type)
      return refuse(CUDNN_STATUS_BAD_PARAM, call, "element ", i, " is not a live ",
                    descriptor_name(type), " the caller created");
    out->push_back(d);
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t get(HeuristicState& h, const GetCall& call) {
  if (call.name != CUDNN_ATTR_ENGINEHEUR_RESULTS) return not_modelled(call);
  const auto total = static_cast<int64_t>(h.results.size());
  std::vector<Descriptor*> configs;
  FAKE_CUDNN_TRY(output_descriptors(call, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                                    std::min(call.requested, total), &configs));
  for (size_t i = 0; i < configs.size(); ++i) fill(*configs[i], ConfigState{h.results[i]});
  *call.count = total;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t get(ConfigState& c, const GetCall& call) {
  if (call.name != CUDNN_ATTR_ENGINECFG_ENGINE) return not_modelled(call);
  std::vector<Descriptor*> engine;
  FAKE_CUDNN_TRY(output_descriptors(call, CUDNN_BACKEND_ENGINE_DESCRIPTOR,
                                    std::min<int64_t>(call.requested, 1), &engine));
  if (!engine.empty()) fill(*engine.front(), EngineState{c.value});
  *call.count = 1;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t get(EngineState& e, const GetCall& call) {
  const EngineSpec& engine = *e.value->spec;
  switch (call.name) {
    case CUDNN_ATTR_ENGINE_GLOBAL_INDEX:
      return give(call, CUDNN_TYPE_INT64, std::vector<int64_t>{engine.global_index});
    case CUDNN_ATTR_ENGINE_NUMERICAL_NOTE:
      if (injected(FakeGraphFault::notes_unreadable, engine.global_index))
        return refuse(CUDNN_STATUS_NOT_SUPPORTED, call, "engine ", engine.global_index,
                      "'s notes are unreadable (an injected fault)");
      return give(call, CUDNN_TYPE_NUMERICAL_NOTE, engine.notes);
    case CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE:
      return give(call, CUDNN_TYPE_BEHAVIOR_NOTE, engine.behaviour);
    default: break;
  }
  return not_modelled(call);
}

cudnnStatus_t get(PlanState& plan, const GetCall& call) {
  if (call.name != CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE) return not_modelled(call);
  return give(call, CUDNN_TYPE_INT64, std::vector<int64_t>{static_cast<int64_t>(plan.workspace)});
}

template <typename Other>
cudnnStatus_t get(Other&, const GetCall& call) {
  return not_modelled(call);
}

// ---------------------------------------------------------------------------------------------
// cudnnBackendExecute.

template <typename StateOf>
cudnnStatus_t finalized_state(cudnnBackendDescriptor_t handle, cudnnBackendDescriptorType_t type,
                              const char* argument, const StateOf** out) {
  const Descriptor* d = lookup(handle);
  if (d == nullptr)
    return failure(CUDNN_STATUS_BAD_PARAM, kExecute, argument,
                   " is not a live descriptor (null, destroyed or never created)");
  if (d->type != type)
    return failure(CUDNN_STATUS_BAD_PARAM, kExecute, argument, " is a ", descriptor_name(d->type),
                   ", not a ", descriptor_name(type));
  if (!d->finalized)
    return failure(CUDNN_STATUS_BAD_PARAM, kExecute, argument, " is not finalized");
  *out = &std::get<StateOf>(d->state);
  return CUDNN_STATUS_SUCCESS;
}

// The variant pack's pointer for `tensor`, aligned as the tensor's descriptor promised.
cudnnStatus_t pointer_of(const PackState& pack, const TensorValue& tensor, const char* name,
                         void** out) {
  const auto at = std::find(pack.uids->begin(), pack.uids->end(), tensor.uid);
  if (at == pack.uids->end())
    return failure(CUDNN_STATUS_BAD_PARAM, kExecute, "the variant pack has no pointer for ", name,
                   " (uid ", tensor.uid, ")");
  void* p = (*pack.pointers)[static_cast<size_t>(at - pack.uids->begin())];
  if (reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(tensor.alignment) != 0)
    return failure(CUDNN_STATUS_BAD_PARAM, kExecute, name, " (uid ", tensor.uid,
                   ") is not aligned to its descriptor's ", tensor.alignment, " bytes");
  *out = p;
  return CUDNN_STATUS_SUCCESS;
}

// The operation's data in convolve's argument order: forward (x, w) -> y, backward data
// (dy, w) -> dx, backward filter (x, dy) -> dw.
struct Arguments {
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
};

cudnnStatus_t arguments(const OperationValue& op, const PackState& pack, Arguments* out) {
  const OperandNames names = operand_names(op.direction);
  void *x = nullptr, *w = nullptr, *y = nullptr;
  FAKE_CUDNN_TRY(pointer_of(pack, op.x, names.x, &x));
  FAKE_CUDNN_TRY(pointer_of(pack, op.w, names.w, &w));
  FAKE_CUDNN_TRY(pointer_of(pack, op.y, names.y, &y));
  switch (op.direction) {
    case Direction::forward: *out = {x, w, y}; break;
    case Direction::backward_data: *out = {y, w, x}; break;
    case Direction::backward_filter: *out = {x, y, w}; break;
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t execute(cudnnHandle_t handle, const PlanState& plan, const PackState& pack) {
  const OperationValue& op = plan.config->graph.operation;
  if (injected(FakeGraphFault::execution_fails, plan.config->spec->global_index))
    return failure(CUDNN_STATUS_EXECUTION_FAILED, kExecute, "engine ",
                   plan.config->spec->global_index, " failed (an injected fault)");
  Arguments args;
  FAKE_CUDNN_TRY(arguments(op, pack, &args));
  const size_t needed = plan.workspace;
  void* workspace = pack.workspace;
  if (needed > 0 && workspace == nullptr)
    return failure(CUDNN_STATUS_BAD_PARAM, kExecute, "the plan needs ", needed,
                   " bytes of workspace and the variant pack gives none");
  FAKE_CUDNN_TRY(check_operands(kExecute, op.direction, op.problem, args.a, args.b, args.out,
                                workspace, needed, needed));
  const Direction direction = op.direction;
  const ConvProblem problem = op.problem;
  const float alpha = op.alpha, beta = op.beta;
  emu::enqueue(handle->stream, [=] {
    poison(workspace, needed);
    convolve(direction, problem, args.a, args.b, args.out, alpha, beta);
  });
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace
}  // namespace fake_cudnn

using namespace fake_cudnn;

extern "C" {

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t* streamId) {
  if (handle == nullptr || streamId == nullptr)
    return failure(CUDNN_STATUS_BAD_PARAM, "cudnnGetStream", "handle or streamId is null");
  *streamId = handle->stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t descriptorType,
                                           cudnnBackendDescriptor_t* descriptor) {
  const char* function = "cudnnBackendCreateDescriptor";
  if (descriptor == nullptr) return failure(CUDNN_STATUS_BAD_PARAM, function, "descriptor is null");
  std::optional<State> state = initial_state(descriptorType);
  if (!state)
    return failure(CUDNN_STATUS_NOT_SUPPORTED, function, descriptor_name(descriptorType),
                   " is not modelled");
  auto* d = new Descriptor{descriptorType, false, std::move(*state)};
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    live_descriptors().insert(d);
  }
  *descriptor = d;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
  Descriptor* d = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    const auto it = live_descriptors().find(static_cast<Descriptor*>(descriptor));
    if (it != live_descriptors().end()) {
      d = *it;
      live_descriptors().erase(it);
    }
  }
  if (d == nullptr) {
    // A destroy is seldom checked, and on the GPU this is a double free or worse: say so.
    std::fprintf(stderr,
                 "fake cuDNN: cudnnBackendDestroyDescriptor: %p is not a live descriptor "
                 "(destroyed twice, or never created)\n",
                 descriptor);
    return failure(CUDNN_STATUS_BAD_PARAM, "cudnnBackendDestroyDescriptor",
                   "not a live descriptor (destroyed twice, or never created)");
  }
  delete d;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
                                       cudnnBackendAttributeName_t attributeName,
                                       cudnnBackendAttributeType_t attributeType,
                                       int64_t elementCount, const void* arrayOfElements) {
  Descriptor* d = lookup(descriptor);
  if (d == nullptr)
    return failure(CUDNN_STATUS_BAD_PARAM, kSet,
                   "not a live descriptor (null, destroyed or never created)");
  const SetCall call{d->type, attributeName, attributeType, elementCount, arrayOfElements};
  if (d->finalized)
    return refuse(CUDNN_STATUS_NOT_INITIALIZED, call, "the descriptor is already finalized");
  if (!belongs(d->type, attributeName))
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "not an attribute of this descriptor type");
  if (read_only(attributeName))
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "cuDNN computes it; it cannot be set");
  return std::visit([&](auto& state) { return set(state, call); }, d->state);
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                       cudnnBackendAttributeName_t attributeName,
                                       cudnnBackendAttributeType_t attributeType,
                                       int64_t requestedElementCount, int64_t* elementCount,
                                       void* arrayOfElements) {
  Descriptor* d = lookup(descriptor);
  if (d == nullptr)
    return failure(CUDNN_STATUS_BAD_PARAM, kGet,
                   "not a live descriptor (null, destroyed or never created)");
  const GetCall call{d->type,      attributeName,  attributeType, requestedElementCount,
                     elementCount, arrayOfElements};
  if (!d->finalized)
    return refuse(CUDNN_STATUS_NOT_INITIALIZED, call, "the descriptor is not finalized");
  if (!belongs(d->type, attributeName))
    return refuse(CUDNN_STATUS_BAD_PARAM, call, "not an attribute of this descriptor type");
  if (requestedElementCount < 0 || elementCount == nullptr)
    return refuse(CUDNN_STATUS_BAD_PARAM, call,
                  "requestedElementCount must be >= 0 and elementCount non-null");
  return std::visit([&](auto& state) { return get(state, call); }, d->state);
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
  Descriptor* d = lookup(descriptor);
  if (d == nullptr)
    return failure(CUDNN_STATUS_BAD_PARAM, kFinalize,
                   "not a live descriptor (null, destroyed or never created)");
  if (d->finalized)
    return failure(CUDNN_STATUS_BAD_PARAM, kFinalize, descriptor_name(d->type),
                   ": already finalized");
  FAKE_CUDNN_TRY(std::visit([](auto& state) { return finalize(state); }, d->state));
  d->finalized = true;
  return CUDNN_STATUS_SUCCESS;
}

void fake_cudnn_graph_inject_fault(int fault, int64_t engine) {
  const std::lock_guard<std::mutex> lock(fake_cudnn::fault_mutex());
  fake_cudnn::injected_fault() = {static_cast<FakeGraphFault>(fault), engine};
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t executionPlan,
                                  cudnnBackendDescriptor_t variantPack) {
  if (handle == nullptr) return failure(CUDNN_STATUS_BAD_PARAM, kExecute, "handle is null");
  emu::log_call(kExecute);
  const PlanState* plan = nullptr;
  FAKE_CUDNN_TRY(finalized_state(executionPlan, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                 "executionPlan", &plan));
  const PackState* pack = nullptr;
  FAKE_CUDNN_TRY(
      finalized_state(variantPack, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variantPack", &pack));
  return execute(handle, *plan, *pack);
}

}  // extern "C"
