#include "resnet_ddp/cuda/conv_graph.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/cudnn_check.h"
#include "resnet_ddp/cuda/handles.h"
#include "resnet_ddp/error.h"

namespace rddp::cuda {

BackendDescriptor::BackendDescriptor(cudnnBackendDescriptorType_t type) {
  RDDP_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &descriptor_));
}

BackendDescriptor::~BackendDescriptor() {
  if (descriptor_ != nullptr) cudnnBackendDestroyDescriptor(descriptor_);
}

// The descriptors a plan was built from. cuDNN does not say whether a finalized plan still
// refers to them, so they live as long as the plan does.
struct ConvGraphSource {
  std::vector<std::unique_ptr<BackendDescriptor>> parts;  // tensors, convolution, operation
  std::unique_ptr<BackendDescriptor> graph;
};

namespace {

// The operands' unique ids in every operation graph and variant pack, by their forward names.
constexpr int64_t kUidX = 1, kUidW = 2, kUidY = 3;
// What the plans are built for and execute_conv_graph checks: cudaMalloc and the activation
// arena give 256 bytes, the weights' 16-bit copies at least 16 (asserted at every call).
constexpr int64_t kAlignment = 16;
// Candidates timed per convolution at most, best ranked first: it bounds the set-up time,
// as torch.backends.cudnn.benchmark_limit does (10 there).
constexpr size_t kMaxCandidates = 16;

using Dims = std::array<int64_t, 4>;

void set(const BackendDescriptor& d, cudnnBackendAttributeName_t name,
         cudnnBackendAttributeType_t type, int64_t count, const void* values) {
  RDDP_CUDNN_CHECK(cudnnBackendSetAttribute(d.get(), name, type, count, values));
}

void set_descriptor(const BackendDescriptor& d, cudnnBackendAttributeName_t name,
                    const BackendDescriptor& value) {
  cudnnBackendDescriptor_t raw = value.get();
  set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}

void set_handle(const BackendDescriptor& d, cudnnBackendAttributeName_t name,
                cudnnHandle_t handle) {
  set(d, name, CUDNN_TYPE_HANDLE, 1, &handle);
}

int64_t get_int64(const BackendDescriptor& d, cudnnBackendAttributeName_t name) {
  int64_t value = 0, count = 0;
  RDDP_CUDNN_CHECK(cudnnBackendGetAttribute(d.get(), name, CUDNN_TYPE_INT64, 1, &count, &value));
  return value;
}

// Dimensions stay the logical N, C, H, W (K, C, R, S for filters) in either format; only the
// strides tell NCHW from NHWC (KRSC for filters), as in cudnn_descriptors.h.
Dims packed_strides(const Dims& dims, cudnnTensorFormat_t format) {
  const auto [n, c, h, w] = dims;
  (void)n;
  if (format == CUDNN_TENSOR_NHWC) return {h * w * c, 1, w * c, c};
  return {c * h * w, h * w, w, 1};
}

std::unique_ptr<BackendDescriptor> tensor(int64_t uid, const Dims& dims, const MathPolicy& policy) {
  auto d = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const Dims strides = packed_strides(dims, policy.format);
  set(*d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &policy.data_type);
  set(*d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
  set(*d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
  set(*d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  set(*d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &kAlignment);
  RDDP_CUDNN_CHECK(cudnnBackendFinalize(d->get()));
  return d;
}

// Float compute for every data type, as make_convolution_descriptor: bfloat16 and half products
// accumulate in float.
std::unique_ptr<BackendDescriptor> convolution(const ConvShape& s) {
  auto d = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const int64_t spatial_dims = 2;
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const std::array<int64_t, 2> padding{s.pad, s.pad}, stride{s.stride, s.stride}, dilation{1, 1};
  set(*d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial_dims);
  set(*d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  set(*d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  set(*d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, padding.data());
  set(*d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, padding.data());
  set(*d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation.data());
  set(*d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride.data());
  RDDP_CUDNN_CHECK(cudnnBackendFinalize(d->get()));
  return d;
}

// Each direction's operation type and the names of its attributes.
struct OperationNames {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
};

OperationNames operation_names(ConvDirection direction) {
  switch (direction) {
    case ConvDirection::forward:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
    case ConvDirection::backward_data:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
    case ConvDirection::backward_filter:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
  }
  fail("internal error: unknown convolution direction; please report this");
}

// The operands, the convolution and the operation of one direction, finalized, the operation
// last. cuDNN checks there that the operands' shapes, strides and types fit the convolution,
// before any device is involved.
std::shared_ptr<ConvGraphSource> conv_operation(const ConvShape& s, ConvDirection direction,
                                                float beta, const MathPolicy& policy) {
  auto source = std::make_shared<ConvGraphSource>();
  auto& parts = source->parts;
  parts.push_back(tensor(kUidX, {s.batch, s.in_channels, s.in_h, s.in_w}, policy));
  parts.push_back(tensor(kUidW, {s.out_channels, s.in_channels, s.kernel, s.kernel}, policy));
  parts.push_back(tensor(kUidY, {s.batch, s.out_channels, s.out_h(), s.out_w()}, policy));
  parts.push_back(convolution(s));
  const OperationNames names = operation_names(direction);
  auto operation = std::make_unique<BackendDescriptor>(names.type);
  set_descriptor(*operation, names.x, *parts[0]);
  set_descriptor(*operation, names.w, *parts[1]);
  set_descriptor(*operation, names.y, *parts[2]);
  set_descriptor(*operation, names.conv, *parts[3]);
  const float alpha = 1.0f;
  set(*operation, names.alpha, CUDNN_TYPE_FLOAT, 1, &alpha);
  set(*operation, names.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  RDDP_CUDNN_CHECK(cudnnBackendFinalize(operation->get()));
  parts.push_back(std::move(operation));
  return source;
}

std::shared_ptr<ConvGraphSource> operation_graph(cudnnHandle_t handle, const ConvShape& s,
                                                 ConvDirection direction, float beta,
                                                 const MathPolicy& policy) {
  std::shared_ptr<ConvGraphSource> source = conv_operation(s, direction, beta, policy);
  source->graph = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  cudnnBackendDescriptor_t op = source->parts.back()->get();
  set(*source->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op);
  set_handle(*source->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, handle);
  RDDP_CUDNN_CHECK(cudnnBackendFinalize(source->graph->get()));
  return source;
}

// The engine configurations cuDNN's heuristics of `mode` list, best first; none where they
// cannot handle the graph.
std::vector<std::unique_ptr<BackendDescriptor>> listed_configs(const BackendDescriptor& graph,
                                                               cudnnBackendHeurMode_t mode) {
  BackendDescriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  set_descriptor(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  set(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (cudnnBackendFinalize(heuristics.get()) != CUDNN_STATUS_SUCCESS) return {};
  int64_t count = 0;
  if (cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr) !=
          CUDNN_STATUS_SUCCESS ||
      count <= 0)
    return {};
  std::vector<std::unique_ptr<BackendDescriptor>> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.push_back(std::make_unique<BackendDescriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(configs.back()->get());
  }
  int64_t returned = 0;
  if (cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned,
                               raw.data()) != CUDNN_STATUS_SUCCESS)
    return {};
  configs.resize(static_cast<size_t>(std::clamp<int64_t>(returned, 0, count)));
  return configs;
}

struct EngineFacts {
  int64_t global_index = -1;
  std::vector<cudnnBackendNumericalNote_t> notes;
  std::vector<cudnnBackendBehaviorNote_t> behaviour;
  bool has(cudnnBackendNumericalNote_t note) const {
    return std::find(notes.begin(), notes.end(), note) != notes.end();
  }
  // Compiled when its plan is built: seconds each, for every shape and direction, which would
  // make the set-up unbounded; the precompiled engines are the ones the legacy API runs too.
  bool compiled_at_run_time() const {
    return std::find(behaviour.begin(), behaviour.end(),
                     CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) != behaviour.end();
  }
};

// The facts of the configuration's engine, or nullopt where cuDNN will not tell them: an engine
// whose notes are unknown cannot be held to the policy.
std::optional<EngineFacts> engine_facts(const BackendDescriptor& config) {
  BackendDescriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t count = 0;
  EngineFacts facts;
  facts.notes.resize(CUDNN_NUMERICAL_NOTE_TYPE_COUNT);
  facts.behaviour.resize(CUDNN_BEHAVIOR_NOTE_TYPE_COUNT);
  int64_t notes = 0, behaviours = 0;
  const bool told =
      cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &raw) ==
          CUDNN_STATUS_SUCCESS &&
      cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1,
                               &count, &facts.global_index) == CUDNN_STATUS_SUCCESS &&
      cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                               CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &notes,
                               facts.notes.data()) == CUDNN_STATUS_SUCCESS &&
      cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                               CUDNN_TYPE_BEHAVIOR_NOTE, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT,
                               &behaviours, facts.behaviour.data()) == CUDNN_STATUS_SUCCESS;
  if (!told) return std::nullopt;
  facts.notes.resize(static_cast<size_t>(std::clamp<int64_t>(notes, 0, facts.notes.size())));
  facts.behaviour.resize(
      static_cast<size_t>(std::clamp<int64_t>(behaviours, 0, facts.behaviour.size())));
  return facts;
}

// Why the configurations cuDNN listed for a convolution were not candidates, for the summary of
// a convolution left with none.
struct Refusals {
  size_t listed = 0, unreadable = 0, compiled = 0, precision = 0, nondeterministic = 0,
         not_built = 0, over_limit = 0;

  std::string text(size_t workspace_limit) const {
    if (listed == 0) return "cuDNN's heuristics listed no engine configuration";
    std::ostringstream out;
    out << "none of the " << listed << " engine configurations cuDNN listed was admitted:";
    const char* separator = " ";
    const auto part = [&](size_t n, const char* what) {
      if (n == 0) return;
      out << separator << n << " " << what;
      separator = ", ";
    };
    part(unreadable, "whose notes cuDNN would not give");
    part(compiled, "compiled at run time");
    part(precision, "converting inputs or reducing in less than float (or on tensor cores, "
                    "refused in strict float32)");
    part(nondeterministic, "non-deterministic");
    part(not_built, "whose plan cuDNN would not build");
    out << separator << over_limit << " over the workspace limit of " << workspace_limit
        << " bytes";
    return out.str();
  }
};

// Refused whatever the policy: engines that convert the inputs to a narrower type (the legacy
// selection likewise refuses CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) and those that reduce in
// less than float (a weight gradient sums up to batch x height x width products; PyTorch's
// filter admits them, and admitting them measured no faster:
// bench/results/2026-11-28-H100-fa60b96). Strict float32 admits no tensor-core engine either
// (they are TF32 for float data), as PyTorch filters its own when allow_tf32 is off.
bool refused_for_precision(const EngineFacts& facts, const MathPolicy& policy) {
  if (facts.has(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) ||
      facts.has(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION))
    return true;
  const bool strict_float = policy.data_type == CUDNN_DATA_FLOAT && !policy.allow_tf32;
  return strict_float && facts.has(CUDNN_NUMERICAL_NOTE_TENSOR_CORE);
}

// A plan of `config`, or null where cuDNN will not build one for this graph.
std::unique_ptr<BackendDescriptor> build_plan(cudnnHandle_t handle,
                                              const BackendDescriptor& config) {
  auto plan = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  set_handle(*plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, handle);
  set_descriptor(*plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
  if (cudnnBackendFinalize(plan->get()) != CUDNN_STATUS_SUCCESS) return nullptr;
  return plan;
}

// A pack of the operands and workspace, built on first use and kept with the plan.
const BackendDescriptor& variant_pack(const ConvGraphPlan& plan, const void* x, const void* w,
                                      const void* y, void* workspace) {
  const std::array<const void*, 4> key{x, w, y, workspace};
  auto found = plan.packs.find(key);
  if (found != plan.packs.end()) return *found->second;
  // A layer's buffers stay put, so more than this many means they moved (a new memory plan):
  // the old packs are of no further use.
  constexpr size_t kMaxPacks = 16;
  if (plan.packs.size() >= kMaxPacks) plan.packs.clear();
  auto pack = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  const std::array<int64_t, 3> uids{kUidX, kUidW, kUidY};
  // cuDNN takes the data pointers as void* whichever operand it writes.
  const std::array<void*, 3> pointers{const_cast<void*>(x), const_cast<void*>(w),
                                      const_cast<void*>(y)};
  set(*pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids.data());
  set(*pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, pointers.data());
  set(*pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  RDDP_CUDNN_CHECK(cudnnBackendFinalize(pack->get()));
  return *plan.packs.emplace(key, std::move(pack)).first->second;
}

cudnnStatus_t run_plan(cudnnHandle_t handle, const ConvGraphPlan& plan, const void* x,
                       const void* w, const void* y, void* workspace) {
  return cudnnBackendExecute(handle, plan.plan->get(),
                             variant_pack(plan, x, w, y, workspace).get());
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kAlignment == 0; }

// The operands a search runs a direction on, by their forward names.
struct SearchOperands {
  const void* x;
  const void* w;
  const void* y;
};

SearchOperands search_operands(ConvDirection direction, const ConvSearchBuffers& b) {
  switch (direction) {
    case ConvDirection::forward: return {b.x, b.w, b.y};
    case ConvDirection::backward_data: return {b.dx, b.w, b.dy};
    case ConvDirection::backward_filter: return {b.x, b.dw, b.dy};
  }
  fail("internal error: unknown convolution direction; please report this");
}

// The best of three timed runs in milliseconds, after one to warm up; infinity where the plan
// fails to run.
float best_time_ms(cudnnHandle_t handle, cudaStream_t stream, const ConvGraphPlan& plan,
                   const SearchOperands& operands, void* workspace) {
  const Event start(EventTiming::on), stop(EventTiming::on);
  float best = std::numeric_limits<float>::infinity();
  for (int run = 0; run < 4; ++run) {
    RDDP_CUDA_CHECK(cudaEventRecord(start.get(), stream));
    if (run_plan(handle, plan, operands.x, operands.w, operands.y, workspace) !=
        CUDNN_STATUS_SUCCESS)
      return std::numeric_limits<float>::infinity();
    RDDP_CUDA_CHECK(cudaEventRecord(stop.get(), stream));
    RDDP_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float ms = 0.0f;
    RDDP_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    if (run > 0) best = std::min(best, ms);
  }
  return best;
}

}  // namespace

void finalize_conv_operation(const ConvShape& shape, ConvDirection direction, float beta,
                             const MathPolicy& policy) {
  conv_operation(shape, direction, beta, policy);
}

ConvGraphCandidates conv_graph_candidates(cudnnHandle_t handle, const ConvShape& shape,
                                          ConvDirection direction, float beta,
                                          const MathPolicy& policy, size_t workspace_limit) {
  ConvGraphCandidates result;
  std::shared_ptr<ConvGraphSource> source;
  try {
    source = operation_graph(handle, shape, direction, beta, policy);
  } catch (const Error& refusal) {
    // The legacy API still runs this convolution; the summary says why the graph API does not.
    result.why_none = std::string("cuDNN refused its operation graph: ") + refusal.what();
    return result;
  }
  Refusals refusals;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    std::vector<std::unique_ptr<BackendDescriptor>> configs =
        listed_configs(*source->graph, mode);
    refusals.listed += configs.size();
    for (auto& config : configs) {
      if (result.plans.size() >= kMaxCandidates) return result;
      const std::optional<EngineFacts> facts = engine_facts(*config);
      if (!facts) {
        ++refusals.unreadable;
        continue;
      }
      if (facts->compiled_at_run_time()) {
        ++refusals.compiled;
        continue;
      }
      if (refused_for_precision(*facts, policy)) {
        ++refusals.precision;
        continue;
      }
      const bool deterministic = !facts->has(CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);
      if (policy.deterministic && !deterministic) {
        ++refusals.nondeterministic;
        continue;
      }
      std::unique_ptr<BackendDescriptor> plan = build_plan(handle, *config);
      if (!plan) {
        ++refusals.not_built;
        continue;
      }
      const auto workspace = static_cast<size_t>(
          std::max<int64_t>(0, get_int64(*plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)));
      if (workspace > workspace_limit) {
        ++refusals.over_limit;
        continue;
      }
      auto candidate = std::make_shared<ConvGraphPlan>();
      candidate->source = source;
      candidate->config = std::move(config);
      candidate->plan = std::move(plan);
      candidate->engine = facts->global_index;
      candidate->workspace_bytes = workspace;
      candidate->deterministic = deterministic;
      candidate->tensor_core = facts->has(CUDNN_NUMERICAL_NOTE_TENSOR_CORE);
      result.plans.push_back(std::move(candidate));
    }
  }
  if (result.plans.empty()) result.why_none = refusals.text(workspace_limit);
  return result;
}

std::shared_ptr<const ConvGraphPlan> fastest_conv_graph_plan(
    cudnnHandle_t handle, const std::vector<std::shared_ptr<const ConvGraphPlan>>& candidates,
    ConvDirection direction, const ConvSearchBuffers& buffers) {
  RDDP_ASSERT(!candidates.empty());
  cudaStream_t stream = nullptr;
  RDDP_CUDNN_CHECK(cudnnGetStream(handle, &stream));
  const SearchOperands operands = search_operands(direction, buffers);
  RDDP_ASSERT(operands.x != nullptr && operands.w != nullptr && operands.y != nullptr);
  std::shared_ptr<const ConvGraphPlan> best;
  float best_ms = std::numeric_limits<float>::infinity();
  for (const auto& candidate : candidates) {
    RDDP_ASSERT(candidate->workspace_bytes <= buffers.workspace_bytes);
    const float ms = best_time_ms(handle, stream, *candidate, operands, buffers.workspace);
    if (ms < best_ms) {
      best_ms = ms;
      best = candidate;
    }
  }
  RDDP_CUDA_CHECK(cudaStreamSynchronize(stream));
  return best_ms < std::numeric_limits<float>::infinity() ? best : nullptr;
}

void execute_conv_graph(cudnnHandle_t handle, const ConvGraphPlan& plan, const void* x,
                        const void* w, const void* y, void* workspace, size_t workspace_bytes) {
  RDDP_ASSERT(workspace_bytes >= plan.workspace_bytes);
  if (!aligned(x) || !aligned(w) || !aligned(y))
    fail("internal error: a convolution's operand is not ", kAlignment,
         "-byte aligned, as its cuDNN graph-API plan requires; please report this, and use "
         "--conv-api legacy meanwhile");
  RDDP_CUDNN_CHECK(run_plan(handle, plan, x, w, y, workspace));
}

}  // namespace rddp::cuda
