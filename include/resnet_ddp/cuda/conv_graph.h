#pragma once
// Convolutions through cuDNN's graph API, as PyTorch runs its own: per shape and direction an
// operation graph of one convolution, and an execution plan chosen among the engine
// configurations cuDNN's heuristics list for it. The legacy API (conv_algorithms.h) offers about
// eight algorithms per direction and picks each one's kernel variant (tile shape, split-K)
// itself; here every configuration is a candidate of its own, timed like the others.
#include <cudnn.h>

#include <cstddef>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "resnet_ddp/cuda/conv_algorithms.h"

namespace rddp::cuda {

// An owned cudnnBackendDescriptor_t of one type.
class BackendDescriptor {
 public:
  explicit BackendDescriptor(cudnnBackendDescriptorType_t type);
  ~BackendDescriptor();
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;
  cudnnBackendDescriptor_t get() const { return descriptor_; }

 private:
  cudnnBackendDescriptor_t descriptor_ = nullptr;
};

struct ConvGraphSource;

// A finalized execution plan of one convolution, and what its engine's notes say of it.
struct ConvGraphPlan {
  // What the plan was built from, declared first so that the plan goes before them.
  std::shared_ptr<const ConvGraphSource> source;
  std::unique_ptr<BackendDescriptor> config;
  std::unique_ptr<BackendDescriptor> plan;
  int64_t engine = -1;  // the engine's global index, as cuDNN numbers them
  size_t workspace_bytes = 0;
  bool deterministic = true;
  bool tensor_core = false;
  // Variant packs by their pointers (x, w, y, workspace), finalized once: a layer runs on the
  // same buffers every step, and building a pack per call would cost an eager step host time
  // for every convolution. Bounded (conv_graph.cpp); one thread runs a plan.
  mutable std::map<std::array<const void*, 4>, std::unique_ptr<BackendDescriptor>> packs;
};

// Builds and finalizes the operation of one convolution direction as conv_graph_candidates does
// first, and throws Error where cuDNN refuses it. It needs no device: cuDNN checks the operands'
// shapes, strides and types against the convolution when the operation is finalized, so a host
// test can hold every convolution of the network against the cuDNN it is linked with.
void finalize_conv_operation(const ConvShape& shape, ConvDirection direction, float beta,
                             const MathPolicy& policy);

// The candidates of the convolution, with at most `workspace_limit` bytes of workspace. `beta`
// is the operation's: 0 overwrites the output, 1 adds to it (cuDNN's graph API fixes alpha and
// beta when the plan is built). A GPU's cuDNN refusing the operation graph or a configuration is
// not an error: the convolution then has fewer candidates, or none.
ConvGraphCandidates conv_graph_candidates(cudnnHandle_t handle, const ConvShape& shape,
                                          ConvDirection direction, float beta,
                                          const MathPolicy& policy, size_t workspace_limit);

// The fastest of `candidates` on `buffers` (each run once to warm up, then its best of three
// timed runs; the device is synchronised), or null where none of them ran. Needs every
// candidate's workspace to fit buffers.workspace_bytes.
std::shared_ptr<const ConvGraphPlan> fastest_conv_graph_plan(
    cudnnHandle_t handle, const std::vector<std::shared_ptr<const ConvGraphPlan>>& candidates,
    ConvDirection direction, const ConvSearchBuffers& buffers);

// Runs `plan` on the handle's stream. The operands go by their forward names whatever the
// direction: x (dx for backward data), w (dw for backward filter), y (dy for both backward
// directions). Each must be 16-byte aligned, as the plan was built for.
void execute_conv_graph(cudnnHandle_t handle, const ConvGraphPlan& plan, const void* x,
                        const void* w, const void* y, void* workspace, size_t workspace_bytes);

}  // namespace rddp::cuda
