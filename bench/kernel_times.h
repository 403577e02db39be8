#pragma once
// Every kernel the GPU runs over some training steps, with its duration, from CUPTI's activity
// records (the library Nsight Systems and PyTorch's profiler collect with), summed by name
// (bench/kernel_summary.h), so that bench/profile_breakdown.py sets them beside PyTorch's
// (bench/pytorch_ddp.py --kernel-csv) by category. It needs no profiler installed: where a
// machine has neither nsys nor ncu, the step's kernel time is still known by kernel.
//
// CUPTI is loaded at run time (dlopen), so the benchmark starts and measures without it; only
// --kernel-csv needs it. The kernels keep running concurrently as they do untraced (CUPTI's
// CONCURRENT_KERNEL records), replayed from a CUDA graph or not.
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel_summary.h"

#ifndef RDDP_EMULATED_CUDA
#include <cupti.h>
#endif

namespace rddp::bench {

#ifdef RDDP_EMULATED_CUDA

// The emulator runs kernels on the CPU: there is nothing for CUPTI to trace.
class KernelTimes {
 public:
  KernelTimes() {
    throw std::runtime_error("kernel times need CUPTI on a GPU; this benchmark runs on the CUDA "
                             "emulator");
  }
  void start() {}
  KernelTotals stop() { return {}; }
};

#else

// Collects while started. One at a time in a process: CUPTI hands its buffers to plain
// functions, which find the collector through a static pointer.
class KernelTimes {
 public:
  KernelTimes() {
    if (active_ != nullptr) throw std::runtime_error("internal error: two kernel time collectors");
    load();
    check(register_callbacks_(&buffer_requested, &buffer_completed),
          "cuptiActivityRegisterCallbacks");
    active_ = this;
  }
  ~KernelTimes() {
    if (started_) {
      (void)disable_(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      (void)flush_all_(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    }
    active_ = nullptr;
  }
  KernelTimes(const KernelTimes&) = delete;
  KernelTimes& operator=(const KernelTimes&) = delete;

  void start() {
    check(enable_(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
          "cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)");
    started_ = true;
  }

  // Call after the device has finished the traced work (a synchronisation).
  KernelTotals stop() {
    check(flush_all_(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
    check(disable_(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityDisable");
    started_ = false;
    std::lock_guard<std::mutex> lock(mutex_);
    if (dropped_ > 0)
      throw std::runtime_error("CUPTI dropped " + std::to_string(dropped_) +
                               " kernel records: the totals would be short");
    return totals_;
  }

 private:
  using Enable = decltype(&cuptiActivityEnable);
  using Disable = decltype(&cuptiActivityDisable);
  using FlushAll = decltype(&cuptiActivityFlushAll);
  using NextRecord = decltype(&cuptiActivityGetNextRecord);
  using RegisterCallbacks = decltype(&cuptiActivityRegisterCallbacks);
  using DroppedRecords = decltype(&cuptiActivityGetNumDroppedRecords);
  using ResultString = decltype(&cuptiGetResultString);
  using GetVersion = decltype(&cuptiGetVersion);

  static constexpr size_t kBufferBytes = 8 << 20;

  // libcupti of the CUDA major version this was built with (its records' layout), from the
  // library path, then from the toolkit's usual places.
  void load() {
    const std::string major = std::to_string(CUPTI_API_VERSION / 10000);
    const std::vector<std::string> candidates = {
        "libcupti.so." + major,
        "libcupti.so",
        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so." + major,
        "/usr/local/cuda/lib64/libcupti.so." + major,
        "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so." + major,
    };
    std::string tried;
    for (const std::string& candidate : candidates) {
      library_ = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (library_ != nullptr) break;
      tried += (tried.empty() ? "" : ", ") + candidate;
    }
    if (library_ == nullptr)
      throw std::runtime_error("no CUPTI library to load (tried " + tried +
                               "): put the CUDA toolkit's extras/CUPTI/lib64, or the directory "
                               "of the nvidia-cuda-cupti wheel, on LD_LIBRARY_PATH");
    // The records' layout (CUpti_ActivityKernel10) is that of this CUDA major version's CUPTI.
    uint32_t version = 0;
    const auto get_version = symbol<GetVersion>("cuptiGetVersion");
    if (get_version(&version) != CUPTI_SUCCESS || version / 10000 != CUPTI_API_VERSION / 10000)
      throw std::runtime_error("the CUPTI library loaded is of API version " +
                               std::to_string(version) + ", this benchmark was built with " +
                               std::to_string(CUPTI_API_VERSION) + ": load CUPTI " + major +
                               " (LD_LIBRARY_PATH)");
    enable_ = symbol<Enable>("cuptiActivityEnable");
    disable_ = symbol<Disable>("cuptiActivityDisable");
    flush_all_ = symbol<FlushAll>("cuptiActivityFlushAll");
    next_record_ = symbol<NextRecord>("cuptiActivityGetNextRecord");
    register_callbacks_ = symbol<RegisterCallbacks>("cuptiActivityRegisterCallbacks");
    dropped_records_ = symbol<DroppedRecords>("cuptiActivityGetNumDroppedRecords");
    result_string_ = symbol<ResultString>("cuptiGetResultString");
  }

  template <typename F>
  F symbol(const char* name) {
    void* address = dlsym(library_, name);
    if (address == nullptr)
      throw std::runtime_error(std::string("the CUPTI library loaded has no ") + name);
    return reinterpret_cast<F>(address);
  }

  void check(CUptiResult result, const char* call) const {
    if (result == CUPTI_SUCCESS) return;
    const char* text = nullptr;
    if (result_string_ == nullptr || result_string_(result, &text) != CUPTI_SUCCESS) text = "?";
    throw std::runtime_error(std::string(call) + " failed: " + text);
  }

  static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    // CUPTI wants 8-byte alignment.
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    *size = *buffer != nullptr ? kBufferBytes : 0;
    *max_records = 0;
  }

  static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer,
                                        size_t /*size*/, size_t valid) {
    KernelTimes* self = active_;
    if (self != nullptr) {
      std::lock_guard<std::mutex> lock(self->mutex_);
      CUpti_Activity* record = nullptr;
      while (self->next_record_(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
        const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        self->totals_.add(demangled(kernel->name),
                          static_cast<double>(kernel->end - kernel->start));
      }
      size_t dropped = 0;
      if (self->dropped_records_(context, stream, &dropped) == CUPTI_SUCCESS)
        self->dropped_ += dropped;
    }
    std::free(buffer);
  }

  static inline KernelTimes* active_ = nullptr;
  void* library_ = nullptr;
  Enable enable_ = nullptr;
  Disable disable_ = nullptr;
  FlushAll flush_all_ = nullptr;
  NextRecord next_record_ = nullptr;
  RegisterCallbacks register_callbacks_ = nullptr;
  DroppedRecords dropped_records_ = nullptr;
  ResultString result_string_ = nullptr;
  std::mutex mutex_;
  KernelTotals totals_;
  size_t dropped_ = 0;
  bool started_ = false;
};

#endif  // RDDP_EMULATED_CUDA

}  // namespace rddp::bench
