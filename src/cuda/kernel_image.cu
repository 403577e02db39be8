#include "resnet_ddp/cuda/kernel_image.h"

// Text of a macro's expansion, commas included.
#define RDDP_TEXT(...) #__VA_ARGS__
#define RDDP_EXPANDED_TEXT(...) RDDP_TEXT(__VA_ARGS__)

namespace rddp::cuda {

namespace {

__global__ void image_probe_kernel() {}

}  // namespace

cudaError_t kernel_image_status() {
  cudaFuncAttributes attributes{};
  return cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(image_probe_kernel));
}

const char* built_architectures() {
#if defined(__CUDA_ARCH_LIST__)
  return RDDP_EXPANDED_TEXT(__CUDA_ARCH_LIST__);
#else
  return "";
#endif
}

}  // namespace rddp::cuda
