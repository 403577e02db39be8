// The CUDA runtime calls of the kernel files and of the tests' device buffers, on host memory,
// in place of libcudart (which the emulated tests do not link). Work is done at once: a stream is
// only a handle, and synchronising returns at once unless asynchronous work (an emulated
// collective, stream_work.h) is in flight.
//
// "Device" memory comes from cudaMalloc as on the GPU, 256-byte aligned, filled with 0xff (NaN
// in every float type, -1 in every integer) so that an element nobody wrote cannot pass for a
// result, and with 256 guard bytes of 0xff on both sides. After every launch the guards of every
// live allocation are checked: a kernel that wrote out of bounds fails its launch. Reads out of
// bounds find NaN there (and AddressSanitizer builds see them as well).
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "capture_state.h"
#include "cuda_emu.h"
#include "host_waits.h"
#include "launch_fault.h"
#include "stream_work.h"

namespace emu::detail {

namespace {

constexpr size_t kGuardBytes = 256;
constexpr unsigned char kPoison = 0xff;

struct Allocation {
  size_t bytes;
};

struct Runtime {
  std::map<uintptr_t, Allocation> allocations;  // by the address cudaMalloc returned
  size_t allocated_bytes = 0;
  std::set<void*> streams;
  std::set<void*> pinned;  // cudaHostAlloc'd: plain host memory here
  cudaError_t last_error = cudaSuccess;
};

Runtime& runtime() {
  static Runtime r;
  return r;
}

size_t padded(size_t bytes) { return (bytes + kGuardBytes - 1) / kGuardBytes * kGuardBytes; }

// The allocation holding [p, p + bytes), or null.
const std::pair<const uintptr_t, Allocation>* find_allocation(const void* p, size_t bytes) {
  auto& allocations = runtime().allocations;
  const auto address = reinterpret_cast<uintptr_t>(p);
  auto it = allocations.upper_bound(address);
  if (it == allocations.begin()) return nullptr;
  --it;
  if (address + bytes > it->first + it->second.bytes) return nullptr;
  return &*it;
}

// The first guard byte that is no longer the poison, as its distance from the buffer: negative
// before it, >= its size after it.
bool guards_intact(uintptr_t base, const Allocation& a, long long& offset) {
  const auto* data = reinterpret_cast<const unsigned char*>(base);
  for (size_t i = 0; i < kGuardBytes; ++i)
    if (data[-static_cast<long long>(kGuardBytes) + static_cast<long long>(i)] != kPoison) {
      offset = -static_cast<long long>(kGuardBytes) + static_cast<long long>(i);
      return false;
    }
  const size_t end = padded(a.bytes) + kGuardBytes;
  for (size_t i = a.bytes; i < end; ++i)
    if (data[i] != kPoison) {
      offset = static_cast<long long>(i);
      return false;
    }
  return true;
}

bool device_range(const void* p, size_t bytes) {
  return bytes == 0 || find_allocation(p, bytes) != nullptr;
}

bool known_stream(cudaStream_t stream) {
  return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread ||
         runtime().streams.count(stream) != 0;
}

}  // namespace

void set_last_error(cudaError_t error) { runtime().last_error = error; }

void check_all_guards(const Config& config) {
  for (const auto& [base, allocation] : runtime().allocations) {
    long long offset = 0;
    if (guards_intact(base, allocation, offset)) continue;
    std::ostringstream out;
    out << "emulated launch failed: kernel " << config.kernel << " (launched at " << config.file
        << ":" << config.line << ") wrote out of bounds: byte " << offset
        << " of the buffer of " << allocation.bytes << " bytes at 0x" << std::hex << base
        << " changed";
    // Restore the guard so that the next launch reports only its own damage.
    auto* data = reinterpret_cast<unsigned char*>(base);
    std::memset(data - kGuardBytes, kPoison, kGuardBytes);
    std::memset(data + allocation.bytes, kPoison, padded(allocation.bytes) + kGuardBytes -
                                                      allocation.bytes);
    throw LaunchFault(out.str());
  }
}

void check_kernel_pointer(const Config& config, int argument, const void* pointer) {
  if (find_allocation(pointer, 0) != nullptr) return;
  std::ostringstream out;
  out << "emulated launch failed: kernel " << config.kernel << " (launched at " << config.file
      << ":" << config.line << ") was given argument " << argument << " = " << pointer
      << ", which is not in memory from cudaMalloc (a host pointer would fault on the GPU)";
  throw LaunchFault(out.str());
}

}  // namespace emu::detail

namespace emu {

HostWaits& host_waits() {
  thread_local HostWaits counts;
  return counts;
}

bool is_device_memory(const void* p, size_t bytes) { return detail::device_range(p, bytes); }
}  // namespace emu

using emu::detail::device_range;
using emu::detail::finish_stream;
using emu::detail::refuse_during_capture;
using emu::detail::kGuardBytes;
using emu::detail::kPoison;
using emu::detail::padded;
using emu::detail::runtime;

namespace {
// RDDP_EMU_LOG_PROFILER=1 prints each cudaProfilerStart/Stop on stderr, for the test of
// --profile-steps.
cudaError_t note_profiler_call(const char* name) {
  if (const char* log = std::getenv("RDDP_EMU_LOG_PROFILER"); log != nullptr && std::string(log) == "1")
    std::fprintf(stderr, "emulated CUDA: %s\n", name);
  return cudaSuccess;
}
}  // namespace

extern "C" {

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  ++emu::host_waits().allocations;
  if (const cudaError_t refused = refuse_during_capture()) return refused;
  if (pointer == nullptr) return runtime().last_error = cudaErrorInvalidValue;
  const auto device = emu::detail::hold_device();  // a replay's kernels check every allocation's guards
  const size_t total = kGuardBytes + padded(bytes) + kGuardBytes;
  auto* block = static_cast<unsigned char*>(std::aligned_alloc(kGuardBytes, total));
  if (block == nullptr) return runtime().last_error = cudaErrorMemoryAllocation;
  std::memset(block, kPoison, total);
  *pointer = block + kGuardBytes;
  runtime().allocations[reinterpret_cast<uintptr_t>(*pointer)] = {bytes};
  runtime().allocated_bytes += bytes;
  return cudaSuccess;
}

cudaError_t cudaFree(void* pointer) {
  ++emu::host_waits().allocations;
  if (pointer == nullptr) return cudaSuccess;
  if (const cudaError_t refused = refuse_during_capture()) return refused;
  const auto device = emu::detail::hold_device();
  auto& allocations = runtime().allocations;
  const auto it = allocations.find(reinterpret_cast<uintptr_t>(pointer));
  if (it == allocations.end()) return runtime().last_error = cudaErrorInvalidValue;
  runtime().allocated_bytes -= it->second.bytes;
  allocations.erase(it);
  std::free(static_cast<unsigned char*>(pointer) - kGuardBytes);
  return cudaSuccess;
}

namespace {

cudaError_t check_copy(void* to, const void* from, size_t bytes, cudaMemcpyKind kind) {
  const bool to_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool from_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if ((to_device && !device_range(to, bytes)) || (from_device && !device_range(from, bytes)) ||
      kind == cudaMemcpyHostToHost || kind == cudaMemcpyDefault)
    return runtime().last_error = cudaErrorInvalidValue;
  return cudaSuccess;
}

}  // namespace

cudaError_t cudaMemcpy(void* to, const void* from, size_t bytes, cudaMemcpyKind kind) {
  ++emu::host_waits().blocking_copies;
  if (const cudaError_t refused = refuse_during_capture()) return refused;
  if (const cudaError_t bad = check_copy(to, from, bytes, kind)) return bad;
  finish_stream(nullptr);
  if (bytes > 0) std::memmove(to, from, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* to, const void* from, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (!emu::detail::known_stream(stream)) return runtime().last_error = cudaErrorInvalidResourceHandle;
  if (const cudaError_t bad = check_copy(to, from, bytes, kind)) return bad;
  if (bytes > 0) emu::enqueue(stream, [to, from, bytes] { std::memmove(to, from, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemset(void* pointer, int value, size_t bytes) {
  ++emu::host_waits().blocking_copies;
  if (const cudaError_t refused = refuse_during_capture()) return refused;
  if (!device_range(pointer, bytes)) return runtime().last_error = cudaErrorInvalidValue;
  finish_stream(nullptr);
  if (bytes > 0) std::memset(pointer, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* pointer, int value, size_t bytes, cudaStream_t stream) {
  if (!emu::detail::known_stream(stream)) return runtime().last_error = cudaErrorInvalidResourceHandle;
  if (!device_range(pointer, bytes)) return runtime().last_error = cudaErrorInvalidValue;
  if (bytes > 0)
    emu::enqueue(stream, [pointer, value, bytes] { std::memset(pointer, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  if (stream == nullptr) return runtime().last_error = cudaErrorInvalidValue;
  auto* handle = new char;  // only its address matters
  runtime().streams.insert(handle);
  *stream = reinterpret_cast<cudaStream_t>(handle);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int /*flags*/) {
  return cudaStreamCreate(stream);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (runtime().streams.erase(stream) == 0) return runtime().last_error = cudaErrorInvalidResourceHandle;
  finish_stream(stream);  // as on the GPU, work in flight completes
  delete reinterpret_cast<char*>(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  ++emu::host_waits().stream_syncs;
  if (!emu::detail::known_stream(stream)) return cudaErrorInvalidResourceHandle;
  if (const cudaError_t refused = refuse_during_capture()) return refused;
  finish_stream(stream);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  ++emu::host_waits().device_syncs;
  if (const cudaError_t refused = refuse_during_capture()) return refused;
  finish_stream(nullptr);
  return cudaSuccess;
}

// No profiler is attached here, so collection has nothing to switch, as on a GPU without one
// (note_profiler_call).
cudaError_t cudaProfilerStart(void) { return note_profiler_call("cudaProfilerStart"); }
cudaError_t cudaProfilerStop(void) { return note_profiler_call("cudaProfilerStop"); }

// Pinned memory is plain host memory; only cudaFreeHost's check of what it frees is kept.
cudaError_t cudaHostAlloc(void** pointer, size_t bytes, unsigned int /*flags*/) {
  ++emu::host_waits().allocations;
  if (pointer == nullptr) return runtime().last_error = cudaErrorInvalidValue;
  *pointer = std::aligned_alloc(kGuardBytes, padded(bytes == 0 ? 1 : bytes));
  if (*pointer == nullptr) return runtime().last_error = cudaErrorMemoryAllocation;
  runtime().pinned.insert(*pointer);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** pointer, size_t bytes) { return cudaHostAlloc(pointer, bytes, 0); }

cudaError_t cudaFreeHost(void* pointer) {
  ++emu::host_waits().allocations;
  if (pointer == nullptr) return cudaSuccess;
  if (runtime().pinned.erase(pointer) == 0) return runtime().last_error = cudaErrorInvalidValue;
  std::free(pointer);
  return cudaSuccess;
}

// Each device is described as a Hopper GPU so that code asking for tensor-core generations takes
// its usual path, unless RDDP_EMULATED_CC (e.g. "7.0"), RDDP_EMULATED_GPU_NAME
// (cudaDeviceProp::name, e.g. "Tesla V100-SXM2-32GB") and RDDP_EMULATED_SMS describe another
// GPU, so that the engine's checks of what a GPU can run, and the peaks it knows GPUs by, can be
// tried on any of them. The memory it reports is what the emulated cudaMalloc has handed out.
// A node has RDDP_EMULATED_GPUS of them (1 to 16, default 1), each with its own PCI bus id, so
// that ranks on one node can be given distinct GPUs, or made to share one. A process sees those
// that CUDA_VISIBLE_DEVICES lists by index, in its order, as CUDA does (the list ends at the
// first entry that is not a GPU of the node), or all of them. Its memory is its own, whichever
// it selects.
constexpr size_t kDeviceMemory = size_t{16} << 30;

namespace {

struct EmulatedGpu {
  std::string name = "emulated CUDA device (CPU)";
  int major = 9, minor = 0, sms = 1;
};

// A setting a test got wrong ends the program: a GPU silently described otherwise would make
// the test check something else than it says.
[[noreturn]] void bad_setting(const char* variable, const char* value, const char* wanted) {
  std::fprintf(stderr, "emulated CUDA runtime: %s='%s' is not %s\n", variable, value, wanted);
  std::exit(2);
}

const EmulatedGpu& emulated_gpu() {
  static const EmulatedGpu gpu = [] {
    EmulatedGpu g;
    if (const char* name = std::getenv("RDDP_EMULATED_GPU_NAME"); name != nullptr) {
      if (*name == '\0' || std::strlen(name) >= sizeof(cudaDeviceProp::name))
        bad_setting("RDDP_EMULATED_GPU_NAME", name, "a name of 1 to 255 characters");
      g.name = name;
    }
    if (const char* cc = std::getenv("RDDP_EMULATED_CC"); cc != nullptr) {
      int end = 0;
      if (std::sscanf(cc, "%d.%d%n", &g.major, &g.minor, &end) != 2 || cc[end] != '\0' ||
          g.major < 1 || g.minor < 0 || g.minor > 9)
        bad_setting("RDDP_EMULATED_CC", cc, "a compute capability MAJOR.MINOR such as 7.0");
    }
    if (const char* sms = std::getenv("RDDP_EMULATED_SMS"); sms != nullptr) {
      char* end = nullptr;
      const long count = std::strtol(sms, &end, 10);
      if (*sms == '\0' || *end != '\0' || count < 1 || count > 1024)
        bad_setting("RDDP_EMULATED_SMS", sms, "a multiprocessor count from 1 to 1024");
      g.sms = static_cast<int>(count);
    }
    return g;
  }();
  return gpu;
}

}  // namespace

// The node's index of each device this process sees.
const std::vector<int>& visible_devices() {
  static const std::vector<int> visible = [] {
    const char* set = std::getenv("RDDP_EMULATED_GPUS");
    int node_gpus = set == nullptr ? 1 : std::atoi(set);
    if (node_gpus < 1 || node_gpus > 16) node_gpus = 1;
    std::vector<int> devices;
    const char* list = std::getenv("CUDA_VISIBLE_DEVICES");
    if (list == nullptr) {
      for (int d = 0; d < node_gpus; ++d) devices.push_back(d);
      return devices;
    }
    std::stringstream entries(list);
    std::string entry;
    while (std::getline(entries, entry, ',')) {
      char* end = nullptr;
      const long d = std::strtol(entry.c_str(), &end, 10);
      if (entry.empty() || *end != '\0' || d < 0 || d >= node_gpus) break;
      devices.push_back(static_cast<int>(d));
    }
    return devices;
  }();
  return visible;
}

int device_count() { return static_cast<int>(visible_devices().size()); }

bool valid_device(int device) { return device >= 0 && device < device_count(); }

thread_local int current_device = 0;

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return cudaErrorInvalidValue;
  *count = device_count();
  return *count > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device)) return runtime().last_error = cudaErrorInvalidDevice;
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return cudaErrorInvalidValue;
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* properties, int device) {
  if (properties == nullptr || !valid_device(device)) return cudaErrorInvalidDevice;
  *properties = cudaDeviceProp{};
  const EmulatedGpu& gpu = emulated_gpu();
  std::strncpy(properties->name, gpu.name.c_str(), sizeof(properties->name) - 1);
  properties->major = gpu.major;
  properties->minor = gpu.minor;
  properties->multiProcessorCount = gpu.sms;
  properties->totalGlobalMem = kDeviceMemory;
  properties->warpSize = 32;
  properties->maxThreadsPerBlock = 1024;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (value == nullptr || !valid_device(device)) return cudaErrorInvalidDevice;
  switch (attribute) {
    case cudaDevAttrComputeCapabilityMajor: *value = emulated_gpu().major; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = emulated_gpu().minor; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = emulated_gpu().sms; return cudaSuccess;
    case cudaDevAttrWarpSize: *value = 32; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; return cudaSuccess;
    case cudaDevAttrClockRate: *value = 1000000; return cudaSuccess;  // kHz
    default: return runtime().last_error = cudaErrorNotSupported;
  }
}

// Every kernel here runs on every emulated device, whatever its compute capability: the image
// the runtime would pick is the device's own. RDDP_EMULATED_NO_KERNEL_IMAGE=1 answers instead as
// the runtime does for a program built without code for the device.
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, const void* function) {
  if (attributes == nullptr || function == nullptr)
    return runtime().last_error = cudaErrorInvalidDeviceFunction;
  if (const char* none = std::getenv("RDDP_EMULATED_NO_KERNEL_IMAGE");
      none != nullptr && std::string(none) == "1")
    return runtime().last_error = cudaErrorNoKernelImageForDevice;
  *attributes = cudaFuncAttributes{};
  attributes->maxThreadsPerBlock = 1024;
  attributes->binaryVersion = attributes->ptxVersion =
      emulated_gpu().major * 10 + emulated_gpu().minor;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int length, int device) {
  if (bus_id == nullptr || length < 13 || !valid_device(device)) return cudaErrorInvalidValue;
  std::snprintf(bus_id, static_cast<size_t>(length), "0000:%02x:00.0", visible_devices()[static_cast<size_t>(device)] + 1);
  return cudaSuccess;
}

// The toolkit's own version: the headers the emulated programs are built with.
cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return cudaErrorInvalidValue;
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) { return cudaRuntimeGetVersion(version); }

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr) return cudaErrorInvalidValue;
  *total_bytes = kDeviceMemory;
  *free_bytes = kDeviceMemory > runtime().allocated_bytes ? kDeviceMemory - runtime().allocated_bytes : 0;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t error = runtime().last_error;
  runtime().last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError(void) { return runtime().last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    default: return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument (emulated runtime)";
    case cudaErrorMemoryAllocation: return "out of memory (emulated runtime)";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument (emulated runtime)";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle (emulated runtime)";
    case cudaErrorInvalidDevice: return "invalid device ordinal (emulated runtime)";
    case cudaErrorNotSupported: return "operation not supported (emulated runtime)";
    case cudaErrorIllegalState: return "operation not permitted in this state (emulated runtime)";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing (emulated runtime)";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture (emulated runtime)";
    case cudaErrorStreamCaptureImplicit:
      return "operation would make the legacy stream depend on a capturing blocking stream "
             "(emulated runtime)";
    case cudaErrorNotReady: return "device not ready (emulated runtime)";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (emulated runtime)";
    default: return "an error the emulated runtime does not name";
  }
}

}  // extern "C"
