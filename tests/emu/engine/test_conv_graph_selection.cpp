// How the engine chooses among the graph API's engine configurations (src/cuda/conv_graph.cpp,
// src/cuda/conv_algorithms.cpp), held to the fake's fixed engine table (the head comment of
// fake_cudnn_graph.cpp), which a GPU's cuDNN does not have: engines compiled at run time,
// converting their inputs or reducing in less than float are never chosen; tensor cores only
// where TF32 or 16-bit data allow them; non-deterministic ones not under --deterministic;
// workspace limits honoured, with the fallback list behind; a search sized for every candidate.
#include <cudnn.h>
#include <doctest/doctest.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/conv_algorithms.h"
#include "resnet_ddp/cuda/conv_graph.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/cuda/handles.h"
#include "fake_cudnn_graph_faults.h"

using namespace rddp;

namespace {

// The fake's engines by global index: 7 is compiled at run time, 1 converts its inputs (on
// tensor cores), 2 never builds a plan, 3 runs on tensor cores with a workspace of the larger
// tensor, 4 is non-deterministic and needs over 1 GiB, 5 reduces in reduced precision, 0 is
// plain with half the larger tensor's workspace; 6, the fallback, is plain with none.
constexpr int kTensorCore = 3, kPlain = 0, kFallback = 6;

const ConvShape kShape{2, 8, 6, 6, 16, 3, 1, 1};
constexpr size_t kLimit = size_t{64} << 20;

cuda::MathPolicy graph_policy(cudnnDataType_t type, bool allow_tf32, bool deterministic) {
  cuda::MathPolicy policy;
  policy.allow_tf32 = allow_tf32;
  policy.deterministic = deterministic;
  policy.search = cuda::ConvAlgorithmSearch::heuristic;
  policy.data_type = type;
  policy.api = cuda::ConvApi::graph;
  return policy;
}

std::vector<int64_t> engines_of(const cuda::ConvGraphCandidates& candidates) {
  std::vector<int64_t> engines;
  for (const auto& candidate : candidates.plans) engines.push_back(candidate->engine);
  return engines;
}

}  // namespace

TEST_CASE("graph-API candidates: the policy's refusals, in cuDNN's order, fallback last") {
  cuda::ComputeContext context;
  const auto candidates = [&](cudnnDataType_t type, bool tf32, bool deterministic,
                              size_t limit = kLimit) {
    return engines_of(cuda::conv_graph_candidates(context.cudnn(), kShape,
                                                  cuda::ConvDirection::forward, 0.0f,
                                                  graph_policy(type, tf32, deterministic), limit));
  };
  // Strict float32: no tensor cores; 4's workspace is over any limit.
  CHECK(candidates(CUDNN_DATA_FLOAT, false, false) == std::vector<int64_t>{kPlain, kFallback});
  // TF32 and bfloat16 admit tensor cores, never converted inputs or reduced-precision sums.
  CHECK(candidates(CUDNN_DATA_FLOAT, true, false) ==
        std::vector<int64_t>{kTensorCore, kPlain, kFallback});
  CHECK(candidates(CUDNN_DATA_BFLOAT16, false, false) ==
        std::vector<int64_t>{kTensorCore, kPlain, kFallback});
  // A limit below every workspace leaves the fallback's none.
  CHECK(candidates(CUDNN_DATA_BFLOAT16, false, false, 0) == std::vector<int64_t>{kFallback});
  for (const auto& plan : cuda::conv_graph_candidates(
           context.cudnn(), kShape, cuda::ConvDirection::backward_filter, 0.0f,
           graph_policy(CUDNN_DATA_BFLOAT16, false, true), kLimit).plans) {
    CAPTURE(plan->engine);
    CHECK(plan->deterministic);
    CHECK(plan->workspace_bytes <= kLimit);
    CHECK(plan->tensor_core == (plan->engine == kTensorCore));
  }
}

TEST_CASE("graph-API candidates: engines reducing in less than float are never candidates") {
  cuda::ComputeContext context;
  for (const cudnnDataType_t type : {CUDNN_DATA_FLOAT, CUDNN_DATA_BFLOAT16, CUDNN_DATA_HALF}) {
    CAPTURE(static_cast<int>(type));
    const cuda::ConvGraphCandidates found = cuda::conv_graph_candidates(
        context.cudnn(), kShape, cuda::ConvDirection::forward, 0.0f,
        graph_policy(type, /*allow_tf32=*/true, false), kLimit);
    // cuDNN's list ranks it before the plain engine; the filter takes it out.
    CHECK(engines_of(found) == std::vector<int64_t>{kTensorCore, kPlain, kFallback});
  }
}

TEST_CASE("graph-API choices: cuDNN's first admitted by heuristic, any admitted when timed") {
  cuda::ComputeContext context;
  {
    cuda::ConvAlgorithmCache cache(graph_policy(CUDNN_DATA_FLOAT, false, true));
    const cuda::ConvAlgorithm& chosen =
        cache.choose(context.cudnn(), kShape, cuda::ConvDirection::forward, nullptr, kLimit);
    REQUIRE(chosen.graph != nullptr);
    CHECK(chosen.algorithm == kPlain);
    CHECK(chosen.deterministic);
    CHECK(chosen.math == CUDNN_FMA_MATH);
    CHECK(chosen.workspace_bytes == chosen.graph->workspace_bytes);
    // Too little workspace for the plain engine's: the fallback's.
    const cuda::ConvAlgorithm& tight = cache.choose(
        context.cudnn(), kShape, cuda::ConvDirection::backward_data, nullptr, 0);
    REQUIRE(tight.graph != nullptr);
    CHECK(tight.algorithm == kFallback);
    CHECK(cache.summary().find("graph engine 6, workspace 0 bytes") != std::string::npos);
  }
  {
    // A timed search over real buffers: whichever it picks is admitted, and fits the workspace
    // sized by search_workspace_bytes (the larger of the legacy list's and the plans').
    cuda::MathPolicy policy = graph_policy(CUDNN_DATA_FLOAT, true, false);
    policy.search = cuda::ConvAlgorithmSearch::timed;
    cuda::ConvAlgorithmCache cache(policy);
    const size_t bytes = cache.search_workspace_bytes(context.cudnn(), kShape,
                                                      cuda::ConvDirection::forward, kLimit);
    const size_t larger_tensor = sizeof(float) * 2 * 16 * 6 * 6;
    CHECK(bytes >= (larger_tensor + 255) / 256 * 256);  // engine 3's
    const size_t in = sizeof(float) * 2 * 8 * 6 * 6, w = sizeof(float) * 16 * 8 * 9;
    cuda::DeviceBuffer<std::byte> x(in), weights(w), y(larger_tensor), workspace(bytes);
    RDDP_CUDA_CHECK(cudaMemset(x.get(), 0, in));
    RDDP_CUDA_CHECK(cudaMemset(weights.get(), 0, w));
    const cuda::ConvSearchBuffers buffers{x.get(), weights.get(), nullptr,   y.get(),
                                          nullptr, nullptr,       workspace.get(), bytes};
    const cuda::ConvAlgorithm& chosen =
        cache.choose(context.cudnn(), kShape, cuda::ConvDirection::forward, &buffers, kLimit);
    REQUIRE(chosen.graph != nullptr);
    CHECK((chosen.algorithm == kTensorCore || chosen.algorithm == kPlain ||
           chosen.algorithm == kFallback));
    CHECK(chosen.workspace_bytes <= bytes);
  }
}

TEST_CASE("graph-API choices: an accumulating backward data is a plan of its own; the legacy "
          "API's is the same choice") {
  cuda::ComputeContext context;
  cuda::ConvAlgorithmCache graph(graph_policy(CUDNN_DATA_BFLOAT16, false, false));
  const auto& overwrite = graph.choose(context.cudnn(), kShape, cuda::ConvDirection::backward_data,
                                       nullptr, kLimit, false);
  const auto& accumulate = graph.choose(context.cudnn(), kShape,
                                        cuda::ConvDirection::backward_data, nullptr, kLimit, true);
  CHECK(&overwrite != &accumulate);
  CHECK(overwrite.graph != accumulate.graph);
  CHECK(graph.size() == 2);
  CHECK(graph.summary().find(", accumulating: graph engine") != std::string::npos);

  cuda::MathPolicy legacy_policy = graph_policy(CUDNN_DATA_BFLOAT16, false, false);
  legacy_policy.api = cuda::ConvApi::legacy;
  cuda::ConvAlgorithmCache legacy(legacy_policy);
  const auto& first = legacy.choose(context.cudnn(), kShape, cuda::ConvDirection::backward_data,
                                    nullptr, kLimit, false);
  const auto& second = legacy.choose(context.cudnn(), kShape, cuda::ConvDirection::backward_data,
                                     nullptr, kLimit, true);
  CHECK(&first == &second);
  CHECK(first.graph == nullptr);
  CHECK(legacy.size() == 1);
}

// What a GPU's cuDNN may refuse where the stand-in does not (fake_cudnn_graph_faults.h): the
// convolution still runs, on the legacy API's algorithm, and the summary says why.
TEST_CASE("graph-API faults: a refused graph, unreadable notes or plans that fail to run leave "
          "the convolution to the legacy API, saying why") {
  cuda::ComputeContext context;
  const cuda::MathPolicy strict = graph_policy(CUDNN_DATA_FLOAT, false, false);
  SUBCASE("the operation graph refused") {
    const InjectedGraphFault fault(FakeGraphFault::graph_refused);
    const cuda::ConvGraphCandidates none = cuda::conv_graph_candidates(
        context.cudnn(), kShape, cuda::ConvDirection::forward, 0.0f, strict, kLimit);
    CHECK(none.plans.empty());
    CHECK(none.why_none.find("cuDNN refused its operation graph") != std::string::npos);
    CHECK(none.why_none.find("an injected fault") != std::string::npos);
    cuda::ConvAlgorithmCache cache(strict);
    const cuda::ConvAlgorithm& chosen =
        cache.choose(context.cudnn(), kShape, cuda::ConvDirection::forward, nullptr, kLimit);
    CHECK(chosen.graph == nullptr);
    CHECK(chosen.descriptor != nullptr);
    CHECK(cache.summary().find("(legacy API: cuDNN refused its operation graph") !=
          std::string::npos);
    const cuda::ConvAlgorithmCache::ApiUse use = cache.api_use();
    CHECK(use.graph_plans == 0);
    CHECK(use.legacy_algorithms == 1);
    CHECK(use.first_fallback == none.why_none);
  }
  SUBCASE("an engine's notes unreadable") {
    {
      const InjectedGraphFault fault(FakeGraphFault::notes_unreadable, kPlain);
      CHECK(engines_of(cuda::conv_graph_candidates(context.cudnn(), kShape,
                                                   cuda::ConvDirection::forward, 0.0f, strict,
                                                   kLimit)) == std::vector<int64_t>{kFallback});
    }
    // With the fallback's notes unreadable and no workspace allowed, no engine is left; every
    // one of the 8 listed is counted under its reason (the table in fake_cudnn_graph.cpp).
    const InjectedGraphFault fault(FakeGraphFault::notes_unreadable, kFallback);
    const cuda::ConvGraphCandidates none = cuda::conv_graph_candidates(
        context.cudnn(), kShape, cuda::ConvDirection::forward, 0.0f, strict, 0);
    CHECK(none.plans.empty());
    CHECK(none.why_none ==
          "none of the 8 engine configurations cuDNN listed was admitted: 1 whose notes cuDNN "
          "would not give, 1 compiled at run time, 3 converting inputs or reducing in less than "
          "float (or on tensor cores, refused in strict float32), 1 whose plan cuDNN would not "
          "build, 2 over the workspace limit of 0 bytes");
  }
  SUBCASE("plans that fail to run in the timed search") {
    cuda::MathPolicy policy = strict;
    policy.search = cuda::ConvAlgorithmSearch::timed;
    const size_t in = sizeof(float) * 2 * 8 * 6 * 6, w = sizeof(float) * 16 * 8 * 9,
                 out = sizeof(float) * 2 * 16 * 6 * 6, bytes = size_t{1} << 20;
    cuda::DeviceBuffer<std::byte> x(in), weights(w), y(out), workspace(bytes);
    RDDP_CUDA_CHECK(cudaMemset(x.get(), 0, in));
    RDDP_CUDA_CHECK(cudaMemset(weights.get(), 0, w));
    const cuda::ConvSearchBuffers buffers{x.get(), weights.get(), nullptr,   y.get(),
                                          nullptr, nullptr,       workspace.get(), bytes};
    {
      // The plain engine fails: the search goes on to the others.
      const InjectedGraphFault fault(FakeGraphFault::execution_fails, kPlain);
      cuda::ConvAlgorithmCache cache(policy);
      const cuda::ConvAlgorithm& chosen =
          cache.choose(context.cudnn(), kShape, cuda::ConvDirection::forward, &buffers, kLimit);
      REQUIRE(chosen.graph != nullptr);
      CHECK(chosen.algorithm == kFallback);
    }
    // With no workspace the fallback is the only candidate; it fails, so the legacy API runs.
    const InjectedGraphFault fault(FakeGraphFault::execution_fails, kFallback);
    cuda::ConvAlgorithmCache cache(policy);
    const cuda::ConvAlgorithm& chosen =
        cache.choose(context.cudnn(), kShape, cuda::ConvDirection::forward, &buffers, 0);
    CHECK(chosen.graph == nullptr);
    CHECK(chosen.workspace_bytes == 0);
    CHECK(cache.summary().find("(legacy API: none of its 1 plan ran)") != std::string::npos);
  }
}

