#pragma once
// How emulated GPU work reaches a stream: the runtime's async copies and sets, kernel launches
// and the library stand-ins (tests/emu/engine/) all go through enqueue, so that a stream being
// captured into a CUDA graph records the work instead of doing it, as on the GPU.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

namespace emu {

// Runs `work` now (streams are synchronous here), or records it into the graph being captured
// on `stream`. `work` must hold copies of everything it reads at call time but device memory.
void enqueue(cudaStream_t stream, std::function<void()> work);

// Whether [p, p + bytes) lies inside one allocation of the emulated cudaMalloc.
bool is_device_memory(const void* p, size_t bytes);

}  // namespace emu
