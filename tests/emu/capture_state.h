#pragma once
// What the emulated runtime's synchronous calls need to know of a capture in progress
// (stream_capture.cpp): a capture in cudaStreamCaptureModeThreadLocal, the only mode the engine
// uses, refuses calls that would wait for the GPU or change its memory map, and such a call
// spoils the capture, as on the GPU.
#include <cuda_runtime_api.h>

#include <mutex>

namespace emu::detail {

// cudaSuccess when no capture is in progress or the caller is not the thread that began it;
// otherwise cudaErrorStreamCaptureUnsupported, and the capture ends in
// cudaErrorStreamCaptureInvalidated.
cudaError_t refuse_during_capture();

// Whether `stream` is in the capture in progress (its origin, or a stream that joined it).
bool is_capturing(cudaStream_t stream);

void set_last_error(cudaError_t error);  // host_runtime.cpp

// The device, held by whoever runs device work or changes the memory map: a graph replay runs
// its nodes on a thread of its own (stream_capture.cpp) while the host goes on. Never held while
// waiting for asynchronous work.
std::unique_lock<std::recursive_mutex> hold_device();

// Blocks until the asynchronous work (stream_work.h) in flight on `stream` has completed; on
// the legacy default stream, that of every stream, as it synchronises with them all.
void finish_stream(cudaStream_t stream);

}  // namespace emu::detail
