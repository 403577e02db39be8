#pragma once
// Which CUDA devices this process can use. Safe to call on a machine without a GPU or driver:
// `--device auto` asks cuda_device_count_or_zero() before deciding between the CPU and a GPU.
#include <string>

namespace rddp::cuda {

// The number of CUDA devices visible to this process, or 0 when there are none or the runtime
// cannot tell (no driver, a driver older than the runtime...). Never throws Error; on 0,
// `reason` (when not null) receives why, in the runtime's words.
int cuda_device_count_or_zero(std::string* reason);

// Makes device `index` current for the calling thread and returns its description, e.g.
// "cuda:0 (NVIDIA H100 80GB HBM3)". Throws Error naming the cause and the fix when no device
// answers or `index` is not one of them.
std::string select_device(int index);

}  // namespace rddp::cuda
