#include "resnet_ddp/cuda/conv_algorithms.h"

#include <algorithm>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/cudnn_check.h"
#include "resnet_ddp/cuda/conv_graph.h"
#include "resnet_ddp/error.h"

namespace rddp::cuda {

const char* to_string(ConvDirection direction) {
  switch (direction) {
    case ConvDirection::forward: return "forward";
    case ConvDirection::backward_data: return "backward-data";
    case ConvDirection::backward_filter: return "backward-filter";
  }
  return "?";
}

const char* to_string(ConvApi api) {
  switch (api) {
    case ConvApi::legacy: return "legacy";
    case ConvApi::graph: return "graph";
  }
  return "?";
}

namespace {

// The descriptors a search needs. `conv` carries the math type the policy asks for: FMA math
// for strict float32 (kernels without tensor cores), default math otherwise, which on Ampere and
// later lets cuDNN use TF32 tensor cores for float data, as PyTorch's allow_tf32 does.
// (CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION is not TF32: it converts float data to half.)
// bfloat16 data asks for CUDNN_TENSOR_OP_MATH, as PyTorch does for its half and bfloat16
// convolutions: tensor-core kernels, bfloat16 products accumulated in float.
cudnnMathType_t search_math(const MathPolicy& policy) {
  if (policy.data_type != CUDNN_DATA_FLOAT) return CUDNN_TENSOR_OP_MATH;
  return policy.allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

struct Descriptors {
  Descriptors(const ConvShape& s, const MathPolicy& policy)
      : x(make_activation_descriptor(s.batch, s.in_channels, s.in_h, s.in_w, policy.data_type,
                                     policy.format)),
        y(make_activation_descriptor(s.batch, s.out_channels, s.out_h(), s.out_w(),
                                     policy.data_type, policy.format)),
        w(make_filter_descriptor(s.out_channels, s.in_channels, s.kernel, policy.data_type,
                                 policy.format)),
        conv(make_convolution_descriptor(s.stride, s.pad, search_math(policy))) {}
  std::unique_ptr<TensorDescriptor> x, y;
  std::unique_ptr<FilterDescriptor> w;
  std::unique_ptr<ConvolutionDescriptor> conv;
};

// The three directions differ only in which cuDNN functions they call; these adapters give
// them one shape so that the selection below is written once.
struct Forward {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static int max_count(cudnnHandle_t handle) {
    int count = 0;
    RDDP_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &count));
    return count;
  }
  static void heuristic(cudnnHandle_t handle, const Descriptors& d, int requested, int* returned,
                        Perf* perf) {
    RDDP_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
        handle, d.x->get(), d.w->get(), d.conv->get(), d.y->get(), requested, returned, perf));
  }
  static void timed(cudnnHandle_t handle, const Descriptors& d, const ConvSearchBuffers& b,
                    int requested, int* returned, Perf* perf) {
    RDDP_ASSERT(b.x != nullptr && b.w != nullptr && b.y != nullptr);
    RDDP_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
        handle, d.x->get(), b.x, d.w->get(), b.w, d.conv->get(), d.y->get(), b.y, requested,
        returned, perf, b.workspace, b.workspace_bytes));
  }
  static cudnnStatus_t workspace(cudnnHandle_t handle, const Descriptors& d,
                                 cudnnConvolutionDescriptor_t conv, const Perf& perf,
                                 size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(handle, d.x->get(), d.w->get(), conv,
                                                   d.y->get(), perf.algo, bytes);
  }
};

struct BackwardData {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static int max_count(cudnnHandle_t handle) {
    int count = 0;
    RDDP_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &count));
    return count;
  }
  static void heuristic(cudnnHandle_t handle, const Descriptors& d, int requested, int* returned,
                        Perf* perf) {
    RDDP_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        handle, d.w->get(), d.y->get(), d.conv->get(), d.x->get(), requested, returned, perf));
  }
  static void timed(cudnnHandle_t handle, const Descriptors& d, const ConvSearchBuffers& b,
                    int requested, int* returned, Perf* perf) {
    RDDP_ASSERT(b.w != nullptr && b.dy != nullptr && b.dx != nullptr);
    RDDP_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
        handle, d.w->get(), b.w, d.y->get(), b.dy, d.conv->get(), d.x->get(), b.dx, requested,
        returned, perf, b.workspace, b.workspace_bytes));
  }
  static cudnnStatus_t workspace(cudnnHandle_t handle, const Descriptors& d,
                                 cudnnConvolutionDescriptor_t conv, const Perf& perf,
                                 size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, d.w->get(), d.y->get(), conv,
                                                        d.x->get(), perf.algo, bytes);
  }
};

struct BackwardFilter {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  static int max_count(cudnnHandle_t handle) {
    int count = 0;
    RDDP_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &count));
    return count;
  }
  static void heuristic(cudnnHandle_t handle, const Descriptors& d, int requested, int* returned,
                        Perf* perf) {
    RDDP_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        handle, d.x->get(), d.y->get(), d.conv->get(), d.w->get(), requested, returned, perf));
  }
  static void timed(cudnnHandle_t handle, const Descriptors& d, const ConvSearchBuffers& b,
                    int requested, int* returned, Perf* perf) {
    RDDP_ASSERT(b.x != nullptr && b.dy != nullptr && b.dw != nullptr);
    RDDP_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        handle, d.x->get(), b.x, d.y->get(), b.dy, d.conv->get(), d.w->get(), b.dw, requested,
        returned, perf, b.workspace, b.workspace_bytes));
  }
  static cudnnStatus_t workspace(cudnnHandle_t handle, const Descriptors& d,
                                 cudnnConvolutionDescriptor_t conv, const Perf& perf,
                                 size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, d.x->get(), d.y->get(), conv,
                                                          d.w->get(), perf.algo, bytes);
  }
};

std::string describe(const ConvShape& s, ConvDirection direction) {
  std::ostringstream out;
  out << to_string(direction) << " convolution of " << s.batch << "x" << s.in_channels << "x"
      << s.in_h << "x" << s.in_w << " by " << s.out_channels << "x" << s.in_channels << "x"
      << s.kernel << "x" << s.kernel << " (stride " << s.stride << ", padding " << s.pad << ")";
  return out.str();
}

// Why a candidate cuDNN offers may not be used, whatever its workspace.
enum class Refusal { none, cannot_run, nondeterministic, tensor_core };

template <typename Perf>
Refusal refusal(const Perf& candidate, const MathPolicy& policy) {
  if (candidate.status != CUDNN_STATUS_SUCCESS) return Refusal::cannot_run;
  if (policy.deterministic && candidate.determinism != CUDNN_DETERMINISTIC)
    return Refusal::nondeterministic;
  // Strict float32 admits only FMA kernels (PyTorch asserts the same of its choice), and
  // nothing may convert float data to half behind our back. bfloat16 data admits tensor-core
  // and FMA kernels alike: both accumulate in float.
  const bool strict_float = policy.data_type == CUDNN_DATA_FLOAT && !policy.allow_tf32;
  if ((strict_float && candidate.mathType != CUDNN_FMA_MATH) ||
      candidate.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
    return Refusal::tensor_core;
  return Refusal::none;
}

// The workspace `candidate` needs with its own math type, or nullopt where cuDNN cannot say;
// `descriptor` receives the convolution descriptor set to that math type.
template <typename Direction>
std::optional<size_t> candidate_workspace(cudnnHandle_t handle, const ConvShape& shape,
                                          const Descriptors& descriptors,
                                          const typename Direction::Perf& candidate,
                                          std::unique_ptr<ConvolutionDescriptor>* descriptor) {
  *descriptor = make_convolution_descriptor(shape.stride, shape.pad, candidate.mathType);
  size_t bytes = 0;
  if (Direction::workspace(handle, descriptors, (*descriptor)->get(), candidate, &bytes) !=
      CUDNN_STATUS_SUCCESS)
    return std::nullopt;
  return std::max(bytes, candidate.memory);
}

// cuDNN lists candidates best first (fastest measured, or its heuristics' ranking); the first
// that runs, honours the policy and fits the workspace wins.
template <typename Direction>
ConvAlgorithm select(cudnnHandle_t handle, const ConvShape& shape, ConvDirection direction,
                     const MathPolicy& policy, const ConvSearchBuffers* buffers,
                     size_t workspace_limit) {
  const Descriptors descriptors(shape, policy);
  const int requested = Direction::max_count(handle);
  std::vector<typename Direction::Perf> perf(static_cast<size_t>(std::max(requested, 1)));
  int returned = 0;
  const bool timed = buffers != nullptr && policy.search == ConvAlgorithmSearch::timed;
  if (timed)
    Direction::timed(handle, descriptors, *buffers, requested, &returned, perf.data());
  else
    Direction::heuristic(handle, descriptors, requested, &returned, perf.data());

  int runnable = 0, nondeterministic = 0, tensor_core = 0, too_large = 0;
  for (int i = 0; i < returned; ++i) {
    const auto& candidate = perf[static_cast<size_t>(i)];
    const Refusal why = refusal(candidate, policy);
    if (why == Refusal::cannot_run) continue;
    ++runnable;
    if (why == Refusal::nondeterministic) ++nondeterministic;
    if (why == Refusal::tensor_core) ++tensor_core;
    if (why != Refusal::none) continue;
    std::unique_ptr<ConvolutionDescriptor> descriptor;
    const std::optional<size_t> bytes =
        candidate_workspace<Direction>(handle, shape, descriptors, candidate, &descriptor);
    if (!bytes) continue;
    if (*bytes > workspace_limit) {
      ++too_large;
      continue;
    }
    ConvAlgorithm choice;
    choice.algorithm = static_cast<int>(candidate.algo);
    choice.math = candidate.mathType;
    choice.workspace_bytes = *bytes;
    choice.deterministic = candidate.determinism == CUDNN_DETERMINISTIC;
    choice.descriptor = std::move(descriptor);
    return choice;
  }
  fail("cuDNN offers no usable algorithm for the ", describe(shape, direction), ": of ",
       returned, " candidates ", runnable, " can run, ", nondeterministic,
       " of them were refused as non-deterministic, ", tensor_core,
       " for using tensor-core maths under strict float32, ", too_large, " for needing more than ",
       workspace_limit, " bytes of workspace. Allow non-deterministic algorithms or TF32, or ",
       "free GPU memory (a smaller --batch-size)");
}

// The largest workspace among the candidates of cuDNN's heuristic list that the policy admits
// and that fit `workspace_limit`. The list names every algorithm of the direction, the same ones
// a timed search runs, so a search given this much workspace can run each candidate it could
// have run with `workspace_limit`.
template <typename Direction>
size_t largest_workspace(cudnnHandle_t handle, const ConvShape& shape, const MathPolicy& policy,
                         size_t workspace_limit) {
  const Descriptors descriptors(shape, policy);
  const int requested = Direction::max_count(handle);
  std::vector<typename Direction::Perf> perf(static_cast<size_t>(std::max(requested, 1)));
  int returned = 0;
  Direction::heuristic(handle, descriptors, requested, &returned, perf.data());
  size_t largest = 0;
  for (int i = 0; i < returned; ++i) {
    const auto& candidate = perf[static_cast<size_t>(i)];
    if (refusal(candidate, policy) != Refusal::none) continue;
    std::unique_ptr<ConvolutionDescriptor> descriptor;
    const std::optional<size_t> bytes =
        candidate_workspace<Direction>(handle, shape, descriptors, candidate, &descriptor);
    if (bytes && *bytes <= workspace_limit) largest = std::max(largest, *bytes);
  }
  return largest;
}

}  // namespace

ConvAlgorithmCache::Key ConvAlgorithmCache::key(const ConvShape& shape, ConvDirection direction,
                                                bool accumulate) const {
  const bool own_beta = policy_.api == ConvApi::graph && direction == ConvDirection::backward_data;
  return {static_cast<int>(direction), own_beta && accumulate, shape.batch, shape.in_channels,
          shape.in_h, shape.in_w, shape.out_channels, shape.kernel, shape.stride, shape.pad};
}

const ConvGraphCandidates& ConvAlgorithmCache::graph_candidates(
    cudnnHandle_t handle, const ConvShape& shape, ConvDirection direction, bool accumulate,
    size_t workspace_limit) const {
  const Key k = key(shape, direction, accumulate);
  auto found = graph_candidates_.find(k);
  if (found == graph_candidates_.end()) {
    found = graph_candidates_
                .emplace(k, conv_graph_candidates(handle, shape, direction,
                                                  accumulate ? 1.0f : 0.0f, policy_,
                                                  workspace_limit))
                .first;
  }
  return found->second;
}

namespace {

std::string plans_text(size_t count) {
  return std::to_string(count) + (count == 1 ? " plan" : " plans");
}

// A graph-API plan as a choice, or nullopt, with why in `why_not`, where the graph API has none:
// no candidate, none fitting `workspace_limit` (they were listed for a limit of their own), or
// none that ran in the timed search.
std::optional<ConvAlgorithm> graph_choice(cudnnHandle_t handle,
                                          const ConvGraphCandidates& candidates,
                                          ConvDirection direction,
                                          const ConvSearchBuffers* buffers,
                                          size_t workspace_limit, bool timed,
                                          std::string* why_not) {
  if (candidates.plans.empty()) {
    *why_not = candidates.why_none;
    return std::nullopt;
  }
  const size_t limit =
      timed ? std::min(workspace_limit, buffers->workspace_bytes) : workspace_limit;
  std::vector<std::shared_ptr<const ConvGraphPlan>> fitting;
  for (const auto& candidate : candidates.plans)
    if (candidate->workspace_bytes <= limit) fitting.push_back(candidate);
  if (fitting.empty()) {
    *why_not = "none of its " + plans_text(candidates.plans.size()) +
               " fits the workspace limit of " + std::to_string(limit) + " bytes";
    return std::nullopt;
  }
  std::shared_ptr<const ConvGraphPlan> plan =
      timed ? fastest_conv_graph_plan(handle, fitting, direction, *buffers) : fitting.front();
  if (!plan) {
    *why_not = "none of its " + plans_text(fitting.size()) + " ran";
    return std::nullopt;
  }
  ConvAlgorithm choice;
  choice.algorithm = static_cast<int>(plan->engine);
  choice.math = plan->tensor_core ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  choice.workspace_bytes = plan->workspace_bytes;
  choice.deterministic = plan->deterministic;
  choice.graph = std::move(plan);
  return choice;
}

}  // namespace

const ConvAlgorithm& ConvAlgorithmCache::choose(cudnnHandle_t handle, const ConvShape& shape,
                                                ConvDirection direction,
                                                const ConvSearchBuffers* buffers,
                                                size_t workspace_limit, bool accumulate) {
  const Key k = key(shape, direction, accumulate);
  auto found = choices_.find(k);
  if (found != choices_.end()) return found->second;
  if (policy_.api == ConvApi::graph) {
    const bool timed = buffers != nullptr && policy_.search == ConvAlgorithmSearch::timed;
    std::string why_not;
    std::optional<ConvAlgorithm> choice =
        graph_choice(handle, graph_candidates(handle, shape, direction, accumulate,
                                              workspace_limit),
                     direction, buffers, workspace_limit, timed, &why_not);
    graph_candidates_.erase(k);
    if (choice) return choices_.emplace(k, std::move(*choice)).first->second;
    graph_fallbacks_.emplace(k, std::move(why_not));
  }
  ConvAlgorithm choice;
  switch (direction) {
    case ConvDirection::forward:
      choice = select<Forward>(handle, shape, direction, policy_, buffers, workspace_limit);
      break;
    case ConvDirection::backward_data:
      choice = select<BackwardData>(handle, shape, direction, policy_, buffers, workspace_limit);
      break;
    case ConvDirection::backward_filter:
      choice = select<BackwardFilter>(handle, shape, direction, policy_, buffers, workspace_limit);
      break;
  }
  return choices_.emplace(k, std::move(choice)).first->second;
}

size_t ConvAlgorithmCache::search_workspace_bytes(cudnnHandle_t handle, const ConvShape& shape,
                                                  ConvDirection direction,
                                                  size_t workspace_limit, bool accumulate) const {
  size_t legacy = 0;
  switch (direction) {
    case ConvDirection::forward:
      legacy = largest_workspace<Forward>(handle, shape, policy_, workspace_limit);
      break;
    case ConvDirection::backward_data:
      legacy = largest_workspace<BackwardData>(handle, shape, policy_, workspace_limit);
      break;
    case ConvDirection::backward_filter:
      legacy = largest_workspace<BackwardFilter>(handle, shape, policy_, workspace_limit);
      break;
  }
  if (policy_.api != ConvApi::graph) return legacy;
  // The legacy API's share stays: a convolution the graph API offers no plan for falls back.
  size_t largest = legacy;
  for (const auto& candidate :
       graph_candidates(handle, shape, direction, accumulate, workspace_limit).plans)
    largest = std::max(largest, candidate->workspace_bytes);
  return largest;
}

std::string ConvAlgorithmCache::summary() const {
  std::ostringstream out;
  for (const auto& [key, choice] : choices_) {
    const auto [direction, accumulates, batch, in_channels, in_h, in_w, out_channels, kernel,
                stride, pad] = key;
    const ConvShape shape{batch, in_channels, in_h, in_w, out_channels, kernel, stride, pad};
    out << describe(shape, static_cast<ConvDirection>(direction))
        << (accumulates ? ", accumulating" : "") << ": ";
    if (choice.graph) {
      out << "graph engine " << choice.algorithm
          << (choice.graph->tensor_core ? ", tensor cores" : "");
    } else {
      out << "algorithm " << choice.algorithm << ", math " << static_cast<int>(choice.math);
    }
    out << ", workspace " << choice.workspace_bytes << " bytes"
        << (choice.deterministic ? "" : ", nondeterministic");
    if (const auto fallback = graph_fallbacks_.find(key); fallback != graph_fallbacks_.end())
      out << " (legacy API: " << fallback->second << ")";
    out << "\n";
  }
  return out.str();
}

ConvAlgorithmCache::ApiUse ConvAlgorithmCache::api_use() const {
  ApiUse use;
  for (const auto& [key, choice] : choices_) {
    ++(choice.graph ? use.graph_plans : use.legacy_algorithms);
  }
  // The map's order is the key's, not the order of choosing: the first by direction and shape.
  if (!graph_fallbacks_.empty()) use.first_fallback = graph_fallbacks_.begin()->second;
  return use;
}

}  // namespace rddp::cuda
