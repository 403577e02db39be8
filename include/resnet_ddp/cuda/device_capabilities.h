#pragma once
// What this rank's GPU can compute, asked of the device when the CUDA engine is made, before it
// allocates or times anything: a precision the GPU lacks is refused there with the fix, on every
// rank (each makes its own engine), instead of failing later inside cuDNN or cuBLAS. Plain C++:
// the trainer's settings table uses precision_description() without the CUDA headers.
//
// What needs which compute capability in this code (src/cuda, kernels/):
//   bf16  8.0: bfloat16 tensor cores; cuDNN's bfloat16 convolutions (PSEUDO_BFLOAT16_CONFIG) and
//         BatchNorm, and cuBLAS's bfloat16 GemmEx, all refuse older GPUs;
//   tf32  runs anywhere, on TF32 tensor cores from 8.0; below, cuDNN's default math and cuBLAS's
//         TF32 mode compute in plain float32, so tf32 there is fp32;
//   fp16  runs anywhere the build has kernels for; tensor cores from 7.0 (V100).
// And the build: its kernels must hold code the GPU runs (CMAKE_CUDA_ARCHITECTURES; a build for
// 8.0 and 9.0 has none for a V100, and CUDA 13 builds none below 7.5).
// Everything else needs nothing more: --conv-api graph falls back to the legacy API for each
// convolution cuDNN's graph API refuses (conv_graph.h); our kernels (fused BatchNorm, NHWC
// layouts, the bfloat16 casts of --grad-allreduce bf16) use warp shuffles and 16-bit conversions
// that every architecture we build for has; NCCL sums bfloat16 in float before 8.0; CUDA graphs
// and deterministic algorithms are not tied to an architecture.
#include <string>

#include "resnet_ddp/engine.h"

namespace rddp::cuda {

struct DeviceCapabilities {
  int index = 0;     // the CUDA device ordinal
  std::string name;  // cudaDeviceProp::name, e.g. "Tesla V100-SXM2-32GB"
  int major = 0, minor = 0;  // compute capability
  int sms = 0;               // multiprocessors
};

// The device's own answers. Throws Error when the runtime cannot give them.
DeviceCapabilities query_device_capabilities(int device);

// Throws Error naming the GPU, the compute capabilities this build has kernels for and how to
// rebuild, when none of this program's kernels can run on the device.
void require_kernels_for(const DeviceCapabilities& device);
// That refusal's message; `built` lists the build's architectures as nvcc does ("800,900"), or is
// empty where unknown.
std::string missing_kernels_message(const DeviceCapabilities& device, const std::string& built);

// Throws Error naming the GPU, what `precision` needs and the precision to use instead, when the
// device cannot compute in `precision`.
void require_precision_supported(const DeviceCapabilities& device, Precision precision);

// What `precision` computes on a GPU of compute capability major.minor, for the settings table,
// e.g. "tf32: plain float32 (this GPU has no TF32 units)" below 8.0.
std::string precision_description(Precision precision, int major, int minor);
inline std::string precision_description(Precision precision, const DeviceCapabilities& device) {
  return precision_description(precision, device.major, device.minor);
}

}  // namespace rddp::cuda
