#include "resnet_ddp/cuda/conv_algorithms.h"

#include <algorithm>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "resnet_ddp/cuda/check.h"
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

const ConvAlgorithm& ConvAlgorithmCache::choose(cudnnHandle_t handle, const ConvShape& shape,
                                                ConvDirection direction,
                                                const ConvSearchBuffers* buffers,
                                                size_t workspace_limit) {
  const Key key{static_cast<int>(direction), shape.batch, shape.in_channels, shape.in_h,
                shape.in_w, shape.out_channels, shape.kernel, shape.stride, shape.pad};
  auto found = choices_.find(key);
  if (found != choices_.end()) return found->second;
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
  return choices_.emplace(key, std::move(choice)).first->second;
}

size_t ConvAlgorithmCache::search_workspace_bytes(cudnnHandle_t handle, const ConvShape& shape,
                                                  ConvDirection direction,
                                                  size_t workspace_limit) const {
  switch (direction) {
    case ConvDirection::forward:
      return largest_workspace<Forward>(handle, shape, policy_, workspace_limit);
    case ConvDirection::backward_data:
      return largest_workspace<BackwardData>(handle, shape, policy_, workspace_limit);
    case ConvDirection::backward_filter:
      return largest_workspace<BackwardFilter>(handle, shape, policy_, workspace_limit);
  }
  return 0;
}

std::string ConvAlgorithmCache::summary() const {
  std::ostringstream out;
  for (const auto& [key, choice] : choices_) {
    const auto [direction, batch, in_channels, in_h, in_w, out_channels, kernel, stride, pad] =
        key;
    const ConvShape shape{batch, in_channels, in_h, in_w, out_channels, kernel, stride, pad};
    out << describe(shape, static_cast<ConvDirection>(direction)) << ": algorithm "
        << choice.algorithm << ", math " << static_cast<int>(choice.math) << ", workspace "
        << choice.workspace_bytes << " bytes" << (choice.deterministic ? "" : ", nondeterministic")
        << "\n";
  }
  return out.str();
}

}  // namespace rddp::cuda
