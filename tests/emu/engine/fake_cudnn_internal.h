#pragma once
// What the stand-in for cuDNN's graph API (fake_cudnn_graph.cpp) shares with the stand-in for its
// legacy calls (fake_cudnn.cpp): the handle, a 4-d tensor as the maths sees it, convolution
// problems and the one computation of each direction, so that a convolution gives the same bits
// through either API; the checks on device memory; the last error.
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>

#include "resnet_ddp/cpu/layers.h"

struct cudnnContext {
  cudaStream_t stream = nullptr;
};

namespace fake_cudnn {

// A 4-d tensor or filter as its descriptor gives it: logical dimensions (n, c, h, w; k, c, r, s
// for a filter), element type and memory format.
struct Layout {
  bool set = false;
  int n = 0, c = 0, h = 0, w = 0;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;

  int64_t plane() const { return static_cast<int64_t>(h) * w; }
  int64_t count() const { return static_cast<int64_t>(n) * c * plane(); }
};

enum class Direction { forward, backward_data, backward_filter };

// x: the convolution's input, w: its filter, y: its output, whichever direction runs.
struct ConvProblem {
  Layout x, w, y;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  rddp::ConvShape shape;
};

// The convolution of input x by filter w (square, as both stand-ins require), in the CPU twin's
// terms: what the output must measure.
inline rddp::ConvShape conv_shape_of(const Layout& x, const Layout& w, int stride, int pad) {
  return {x.n, x.c, x.h, x.w, w.n, w.h, stride, pad};
}

// ---------------------------------------------------------------------------------------------
// Failures: cuDNN 9 keeps a sentence about the last one, which the engine appends to its report.

extern thread_local std::string last_error;

template <typename... Parts>
cudnnStatus_t failure(cudnnStatus_t status, const char* function, Parts&&... parts) {
  std::ostringstream out;
  out << function << ": ";
  (out << ... << std::forward<Parts>(parts));
  last_error = out.str();
  return status;
}

#define FAKE_CUDNN_TRY(call)                             \
  do {                                                   \
    const cudnnStatus_t status_ = (call);                \
    if (status_ != CUDNN_STATUS_SUCCESS) return status_; \
  } while (0)

// Float, bfloat16 and half: the element types the stand-ins compute with.
bool supported_type(cudnnDataType_t type);
size_t element_bytes(cudnnDataType_t type);
size_t byte_size(const Layout& d);

// Fills [workspace, workspace + bytes) with 0xff (NaN in every float type), as scratch is left.
void poison(void* workspace, size_t bytes);

// CUDNN_STATUS_BAD_PARAM, naming `name`, unless [p, p + bytes) lies in one allocation of the
// emulated cudaMalloc.
cudnnStatus_t check_device(const char* function, const char* name, const void* p, size_t bytes);

// Runs one direction. `a` and `b` are the inputs and `out` the output in the argument order of
// the cuDNN call: forward (x, w) -> y, backward data (dy, w) -> dx, backward filter (x, dy) -> dw.
void convolve(Direction direction, const ConvProblem& p, const void* a, const void* b, void* out,
              float alpha, float beta);

// Device memory for every operand (in convolve's order), and no two of them sharing bytes where
// cuDNN would read one while writing the other: the output over an input, or the workspace
// (`scratch_bytes` of it, what the call overwrites) over any tensor.
cudnnStatus_t check_operands(const char* function, Direction direction, const ConvProblem& p,
                             const void* a, const void* b, const void* out, const void* workspace,
                             size_t workspace_size, size_t scratch_bytes);

}  // namespace fake_cudnn
