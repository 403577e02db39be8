#pragma once
// The calls by which the calling thread made the host wait for the device, or could have: a
// training step must make none between handing its batch over and returning, but the one wait
// for the batch's copy (tests/emu/engine/test_host_waits.cpp). Counted by the emulated runtime.
namespace emu {

struct HostWaits {
  long stream_syncs = 0;     // cudaStreamSynchronize
  long device_syncs = 0;     // cudaDeviceSynchronize
  long event_syncs = 0;      // cudaEventSynchronize
  long blocking_copies = 0;  // cudaMemcpy and cudaMemset, which wait for the legacy stream
  long allocations = 0;      // cudaMalloc, cudaFree (which waits for the device), pinned memory
  long polls = 0;            // cudaEventQuery: not a wait, but a step that polls depends on one

  long total() const {
    return stream_syncs + device_syncs + event_syncs + blocking_copies + allocations + polls;
  }
};

// This thread's counts since it started.
HostWaits& host_waits();

}  // namespace emu
