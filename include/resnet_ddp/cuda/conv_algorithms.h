#pragma once
// Which cuDNN algorithm runs each convolution: chosen once per shape and direction and kept,
// as PyTorch does with torch.backends.cudnn.benchmark = True (a timed search, our default) or
// False (cuDNN's heuristics).
#include <cudnn.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "resnet_ddp/layer_shapes.h"
#include "resnet_ddp/cuda/cudnn_descriptors.h"
#include "resnet_ddp/cuda/engine_options.h"

namespace rddp::cuda {

enum class ConvDirection { forward, backward_data, backward_filter };
const char* to_string(ConvDirection direction);

// How convolutions and matrix products may compute.
struct MathPolicy {
  // TF32 tensor cores (inputs rounded to a 10-bit mantissa, float accumulation) for
  // convolutions and GEMMs; false keeps strict float32.
  bool allow_tf32 = true;
  // Only algorithms cuDNN reports as bitwise reproducible from run to run, like
  // torch.backends.cudnn.deterministic = True.
  bool deterministic = false;
  ConvAlgorithmSearch search = ConvAlgorithmSearch::timed;
  // What activations and filters are stored in: CUDNN_DATA_FLOAT, or CUDNN_DATA_BFLOAT16 for
  // mixed precision (float compute either way; allow_tf32 then only concerns what stays float).
  cudnnDataType_t data_type = CUDNN_DATA_FLOAT;
  // How activations and filters are laid out (cudnn_descriptors.h): a search must time the
  // kernels of the layout the steps run in, which differ (NHWC tensor-core kernels read their
  // operands without the transposes cuDNN inserts for NCHW).
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  // The graph API's candidates are chosen the same way (timed or by cuDNN's ranking, with the
  // same refusals); a convolution it offers none for uses the legacy API's choice.
  ConvApi api = ConvApi::legacy;
};

struct ConvGraphPlan;

// What the graph API offers one convolution (conv_graph.h): the plans of the configurations
// cuDNN's heuristics list for it (its ranked list, then its fallback list), in that order, that
// the policy admits and whose workspace fits the limit; where there are none, why not.
struct ConvGraphCandidates {
  std::vector<std::shared_ptr<const ConvGraphPlan>> plans;
  std::string why_none;
};

struct ConvAlgorithm {
  int algorithm = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t, by direction
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace_bytes = 0;
  bool deterministic = false;
  // The convolution descriptor set to `math`: cuDNN picks its kernel from the algorithm and the
  // descriptor's math type together, so both must be what the choice was made with.
  std::unique_ptr<ConvolutionDescriptor> descriptor;
  // Set when the choice is a graph-API plan; `algorithm` is then its engine's global index and
  // `descriptor` is null.
  std::shared_ptr<const ConvGraphPlan> graph;
};

// Device buffers a timed search runs the candidates on, all of the policy's data type. Inputs
// are only read; the output of the direction searched is overwritten with whatever the last
// candidate left there.
struct ConvSearchBuffers {
  const void* x = nullptr;   // [batch, in_channels, in_h, in_w], in the policy's format
  const void* w = nullptr;   // [out_channels, in_channels, kernel, kernel], likewise
  const void* dy = nullptr;  // [batch, out_channels, out_h, out_w]
  void* y = nullptr;         // forward's output
  void* dx = nullptr;        // backward data's output
  void* dw = nullptr;        // backward filter's output
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

class ConvAlgorithmCache {
 public:
  explicit ConvAlgorithmCache(const MathPolicy& policy) : policy_(policy) {}

  // The algorithm of `shape` in `direction`: the one chosen before for the same shape, or one
  // chosen now. The policy's timed search runs when `buffers` is given (it synchronises the
  // device, so it belongs to set-up); otherwise cuDNN's heuristics choose. A new choice needs at
  // most `workspace_limit` bytes of workspace and honours the policy; throws Error when no
  // algorithm does. References stay valid for the cache's lifetime. `accumulate` asks for a
  // backward-data choice that adds to dx (beta 1) rather than overwriting it: the graph API fixes
  // beta in the plan, the legacy API takes it per call and so chooses once for both.
  const ConvAlgorithm& choose(cudnnHandle_t handle, const ConvShape& shape,
                              ConvDirection direction, const ConvSearchBuffers* buffers,
                              size_t workspace_limit, bool accumulate = false);

  // The workspace a timed search of `shape` in `direction` needs so that every candidate the
  // policy admits within `workspace_limit` can run: the largest of their workspaces, from
  // cuDNN's heuristic list (nothing is run). A search given a flat `workspace_limit` instead
  // would hold that much memory while it runs, whatever the candidates need.
  size_t search_workspace_bytes(cudnnHandle_t handle, const ConvShape& shape,
                                ConvDirection direction, size_t workspace_limit,
                                bool accumulate = false) const;

  const MathPolicy& policy() const { return policy_; }
  size_t size() const { return choices_.size(); }
  // Every choice, one line each: the convolution and direction, then cuDNN's algorithm number,
  // math type and workspace (a graph-API plan: its engine and workspace; a legacy algorithm
  // under the graph API: why the graph API had no plan). Two runs that differ in their numbers
  // can be told apart by it.
  std::string summary() const;

  // How the choices so far run: on graph-API plans or legacy algorithms, and, under the graph
  // API, why the first convolution in the summary's order that fell back to the legacy API did.
  struct ApiUse {
    size_t graph_plans = 0;
    size_t legacy_algorithms = 0;
    std::string first_fallback;
  };
  ApiUse api_use() const;

 private:
  // The direction, whether it accumulates (graph API only), then every field of the shape.
  using Key = std::tuple<int, bool, int, int, int, int, int, int, int, int>;
  Key key(const ConvShape& shape, ConvDirection direction, bool accumulate) const;
  const ConvGraphCandidates& graph_candidates(
      cudnnHandle_t handle, const ConvShape& shape, ConvDirection direction, bool accumulate,
      size_t workspace_limit) const;

  MathPolicy policy_;
  std::map<Key, ConvAlgorithm> choices_;
  // Graph-API plans built to size a search's workspace, kept for the search itself (building
  // them twice would double the set-up); a choice drops its shape's.
  mutable std::map<Key, ConvGraphCandidates> graph_candidates_;
  // Under the graph API, why each choice that is a legacy algorithm is one.
  std::map<Key, std::string> graph_fallbacks_;
};

}  // namespace rddp::cuda
