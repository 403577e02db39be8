// The CUDA engine asks device 0 what it can compute before it allocates anything: on a GPU below
// compute capability 8.0 (a V100) bf16 is refused with the fix, and nothing is left on the
// device, while fp16, tf32 and fp32 engines are made. On a newer GPU every precision is made.
// cpu.emu_engine.test_device_capabilities_v100 runs this file on the emulator described as a
// V100 (RDDP_EMULATED_CC=7.0), cpu.emu_engine.test_device_capabilities as its default Hopper GPU.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/cuda_engine.h"
#include "resnet_ddp/cuda/device_capabilities.h"
#include "resnet_ddp/cuda/kernel_image.h"
#include "resnet_ddp/engine.h"
#include "resnet_ddp/error.h"
#include "support/engine_configs.h"
#include "support/text_contains.h"

using namespace rddp;
using testing::contains;
using testing::heuristic_options;
using testing::small_image_config;

namespace {

size_t free_device_bytes() {
  size_t free_bytes = 0, total_bytes = 0;
  RDDP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

std::unique_ptr<Engine> small_engine(Precision precision) {
  return make_cuda_engine(small_image_config(Stem::cifar, 2, precision), heuristic_options(), 1);
}

}  // namespace

TEST_CASE("the engine knows its GPU as the device describes itself") {
  cudaDeviceProp properties{};
  RDDP_CUDA_CHECK(cudaGetDeviceProperties(&properties, 0));
  const cuda::DeviceCapabilities device = cuda::query_device_capabilities(0);
  CHECK(device.index == 0);
  CHECK(device.name == properties.name);
  CHECK(device.major == properties.major);
  CHECK(device.minor == properties.minor);
  CHECK(device.sms == properties.multiProcessorCount);

  const std::unique_ptr<Engine> engine = small_engine(Precision::tf32);
  const cuda::DeviceCapabilities seen = cuda_device_capabilities(*engine);
  CHECK(seen.name == device.name);
  CHECK(seen.major == device.major);
  CHECK(seen.minor == device.minor);
  CHECK(seen.sms == device.sms);
  // MFU's peak follows the same description of the device.
  CHECK(engine->peak().basis ==
        device_peak(device.name, device.major, device.minor, device.sms, "tf32").basis);
}

TEST_CASE("this build's kernels run on the device the tests run on") {
  CHECK(cuda::kernel_image_status() == cudaSuccess);
  CHECK_NOTHROW(cuda::require_kernels_for(cuda::query_device_capabilities(0)));
  const std::string built = cuda::built_architectures();
  MESSAGE("built for: " << (built.empty() ? "(not said by the compiler)" : built));
}

TEST_CASE("bf16 only where the GPU has bfloat16 tensor cores, refused before any allocation") {
  const cuda::DeviceCapabilities device = cuda::query_device_capabilities(0);
  MESSAGE("device 0: " << device.name << ", compute capability " << device.major << "."
                       << device.minor << ", " << device.sms << " SMs");
  if (device.major < 8) {
    const size_t free_before = free_device_bytes();
    std::string message;
    try {
      small_engine(Precision::bf16);
    } catch (const Error& error) {
      message = error.what();
    }
    CHECK(contains(message, "--precision bf16 needs a GPU of compute capability 8.0 or later"));
    CHECK(contains(message, "cuda:0 is a " + device.name + " of compute capability " +
                                std::to_string(device.major) + "." + std::to_string(device.minor)));
    CHECK(contains(message, "use --precision fp16 on V100"));
    CHECK(free_device_bytes() == free_before);
  } else {
    CHECK(small_engine(Precision::bf16) != nullptr);
  }
  // What tf32 computes here is what the settings table will say.
  const std::string tf32 = cuda::precision_description(Precision::tf32, device);
  CHECK(contains(tf32, device.major < 8 ? "plain float32 (this GPU has no TF32 units)"
                                        : "TF32 tensor cores"));
  for (Precision precision : {Precision::fp16, Precision::tf32, Precision::fp32}) {
    CAPTURE(to_string(precision));
    CHECK(small_engine(precision) != nullptr);
  }
}
