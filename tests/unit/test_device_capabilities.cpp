#include <doctest/doctest.h>

#include <string>

#include "resnet_ddp/cuda/device_capabilities.h"
#include "resnet_ddp/error.h"

using namespace rddp;
using cuda::DeviceCapabilities;

namespace {

DeviceCapabilities gpu(const char* name, int major, int minor, int sms) {
  DeviceCapabilities device;
  device.name = name;
  device.major = major;
  device.minor = minor;
  device.sms = sms;
  return device;
}

// The message require_precision_supported throws, or "" where it accepts.
std::string refusal(const DeviceCapabilities& device, Precision precision) {
  try {
    cuda::require_precision_supported(device, precision);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("bf16 is refused below compute capability 8.0, naming the GPU and fp16 as the fix") {
  const std::string v100 = refusal(gpu("Tesla V100-SXM2-32GB", 7, 0, 80), Precision::bf16);
  CHECK(has(v100, "--precision bf16 needs a GPU of compute capability 8.0 or later"));
  CHECK(has(v100, "cuda:0 is a Tesla V100-SXM2-32GB of compute capability 7.0"));
  CHECK(has(v100, "use --precision fp16 on V100"));
  // Turing (a T4) has float16 tensor cores but no bfloat16 ones either.
  CHECK(has(refusal(gpu("Tesla T4", 7, 5, 40), Precision::bf16), "compute capability 7.5"));
  CHECK(has(refusal(gpu("Tesla P100-PCIE-16GB", 6, 0, 56), Precision::bf16),
            "use --precision fp16"));

  for (const DeviceCapabilities& device :
       {gpu("NVIDIA A100-SXM4-80GB", 8, 0, 108), gpu("NVIDIA A10", 8, 6, 72),
        gpu("NVIDIA H100 80GB HBM3", 9, 0, 132), gpu("NVIDIA H200", 9, 0, 132),
        gpu("NVIDIA B200", 10, 0, 148)})
    CHECK_MESSAGE(refusal(device, Precision::bf16).empty(), device.name);
}

TEST_CASE("tf32, fp32 and fp16 run on every GPU") {
  for (const DeviceCapabilities& device :
       {gpu("Tesla P100-PCIE-16GB", 6, 0, 56), gpu("Tesla V100-PCIE-16GB", 7, 0, 80),
        gpu("Tesla T4", 7, 5, 40), gpu("NVIDIA A100 80GB PCIe", 8, 0, 108),
        gpu("NVIDIA H100 PCIe", 9, 0, 114)})
    for (Precision precision : {Precision::tf32, Precision::fp32, Precision::fp16})
      CHECK_MESSAGE(refusal(device, precision).empty(), device.name, " ", to_string(precision));
}

TEST_CASE("what each precision computes on a GPU, by compute capability") {
  // tf32 on a GPU without TF32 units: cuDNN's and cuBLAS's TF32 modes compute in float32.
  CHECK(cuda::precision_description(Precision::tf32, 7, 0) ==
        "tf32: plain float32 (this GPU has no TF32 units)");
  CHECK(cuda::precision_description(Precision::tf32, 7, 5) ==
        "tf32: plain float32 (this GPU has no TF32 units)");
  for (int major : {8, 9, 10}) {
    const std::string tf32 = cuda::precision_description(Precision::tf32, major, 0);
    CHECK(tf32.rfind("tf32: TF32 tensor cores", 0) == 0);
  }
  CHECK(cuda::precision_description(Precision::tf32, gpu("NVIDIA A10", 8, 6, 72)).rfind(
            "tf32: TF32 tensor cores", 0) == 0);

  CHECK(cuda::precision_description(Precision::fp32, 7, 0) == "fp32: strict float32, no TF32");
  CHECK(cuda::precision_description(Precision::fp32, 9, 0) == "fp32: strict float32, no TF32");

  CHECK(cuda::precision_description(Precision::bf16, 8, 0).rfind("bf16: bfloat16 tensor cores",
                                                                  0) == 0);
  CHECK(has(cuda::precision_description(Precision::bf16, 7, 0), "not on this GPU"));

  // V100 brought float16 tensor cores; Pascal has float16 arithmetic without them.
  for (int major : {7, 8, 9})
    CHECK(cuda::precision_description(Precision::fp16, major, 0).rfind(
              "fp16: float16 tensor cores", 0) == 0);
  CHECK(has(cuda::precision_description(Precision::fp16, 6, 0),
            "no tensor cores (this GPU has none)"));
  for (int major : {6, 7, 8, 9})
    CHECK(has(cuda::precision_description(Precision::fp16, major, 0), "dynamic loss scaling"));
}

TEST_CASE("a GPU this build has no kernels for: the GPU, the build's architectures, the rebuild") {
  CHECK(cuda::missing_kernels_message(gpu("Tesla V100-SXM2-32GB", 7, 0, 80), "800,900") ==
        "this resnet_ddp has no kernels that cuda:0, a Tesla V100-SXM2-32GB of compute "
        "capability 7.0, can run: it was built for compute capability 8.0, 9.0. Rebuild it with "
        "-DCMAKE_CUDA_ARCHITECTURES=70 and a CUDA 12 toolkit (CUDA 13 dropped compute "
        "capabilities below 7.5)");
  // A newer GPU than the build's real architectures, without their PTX to compile for it.
  const std::string b200 = cuda::missing_kernels_message(gpu("NVIDIA B200", 10, 0, 148), "900");
  CHECK(has(b200, "it was built for compute capability 9.0. Rebuild it with "
                  "-DCMAKE_CUDA_ARCHITECTURES=100"));
  CHECK_FALSE(has(b200, "CUDA 12"));
  CHECK(has(cuda::missing_kernels_message(gpu("Tesla T4", 7, 5, 40), ""),
            "can run: it was built for other GPUs. Rebuild it with -DCMAKE_CUDA_ARCHITECTURES=75"));
}
