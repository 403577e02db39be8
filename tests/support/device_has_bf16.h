#pragma once
// bfloat16 tensor-core maths (and cuDNN's bfloat16 BatchNorm) need compute capability 8.0; the
// GPU tests of bfloat16 skip their cases on older devices, saying so.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <string>

#include "resnet_ddp/cuda/check.h"

namespace rddp::testing {

// `skipped` names the cases passed over, for the message.
inline bool device_has_bf16(const char* skipped) {
  int device = 0, major = 0;
  RDDP_CUDA_CHECK(cudaGetDevice(&device));
  RDDP_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 8)
    MESSAGE(std::string(skipped) << " skipped: device 0 is older than compute capability 8.0");
  return major >= 8;
}

}  // namespace rddp::testing
