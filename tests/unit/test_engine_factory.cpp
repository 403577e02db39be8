// The engine factory on a machine with or without a GPU: --device auto's probe never throws,
// and asking for the CUDA engine where no device answers is a clear Error, not a crash.
#include <doctest/doctest.h>

#include <string>

#include "resnet_ddp/cuda/device.h"
#include "resnet_ddp/engine_factory.h"
#include "resnet_ddp/error.h"

using namespace rddp;

namespace {

EngineConfig small_config() {
  EngineConfig config;
  config.spec.stem = Stem::cifar;
  config.spec.in_channels = 1;
  config.spec.num_classes = 3;
  config.spec.widths = {2, 2, 2, 2};
  config.max_batch = 2;
  config.height = config.width = 8;
  return config;
}

}  // namespace

TEST_CASE("the CPU engine is built whatever the machine") {
  auto engine = make_engine(DeviceKind::cpu, small_config(), CudaEngineOptions{}, 1);
  CHECK(engine->device() == DeviceKind::cpu);
  CHECK(engine->layout().parameter_count() > 0);
}

TEST_CASE("the CPU engine refuses bf16 and fp16 rather than training in float32 unasked") {
  EngineConfig config = small_config();
  config.precision = Precision::bf16;
  CHECK_THROWS_WITH_AS(make_engine(DeviceKind::cpu, config, CudaEngineOptions{}, 1),
                       doctest::Contains("--precision bf16 needs the CUDA engine"), Error);
  config.precision = Precision::fp16;
  CHECK_THROWS_WITH_AS(make_engine(DeviceKind::cpu, config, CudaEngineOptions{}, 1),
                       doctest::Contains("--precision fp16 needs the CUDA engine"), Error);
  config.precision = Precision::fp32;
  CHECK(make_engine(DeviceKind::cpu, config, CudaEngineOptions{}, 1)->device() == DeviceKind::cpu);
}

TEST_CASE("without a CUDA device the probe says why and the CUDA engine is refused") {
  std::string reason;
  const int devices = cuda::cuda_device_count_or_zero(&reason);
  CHECK(devices >= 0);
  if (devices > 0) {
    MESSAGE("a CUDA device answers here; the gpu tests cover the CUDA engine");
    return;
  }
  CHECK_FALSE(reason.empty());
  CHECK_THROWS_WITH_AS(make_engine(DeviceKind::cuda, small_config(), CudaEngineOptions{}, 1), doctest::Contains(reason.c_str()), Error);
}
