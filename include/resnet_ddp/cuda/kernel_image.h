#pragma once
// Whether this program's kernels can run on the current device: a build for other GPUs (one made
// for 8.0 and 9.0, run on a V100) is refused when the engine is made, before anything runs,
// rather than at the first kernel launch.
#include <cuda_runtime_api.h>

namespace rddp::cuda {

// cudaSuccess when the current device can run this build's kernels (the fat binary holds code
// for its architecture, or PTX the driver compiles for it); cudaErrorNoKernelImageForDevice (or,
// from older runtimes, cudaErrorInvalidDeviceFunction) when it holds none. It asks about a
// kernel of no work; nothing is launched.
cudaError_t kernel_image_status();

// The compute capabilities this build's kernels were compiled for, as nvcc lists them
// ("800,900"), or "" where the compiler does not say.
const char* built_architectures();

}  // namespace rddp::cuda
