#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "resnet_ddp/gpu_peaks.h"
#include "resnet_ddp/model_flops.h"
#include "resnet_ddp/model_spec.h"

using namespace rddp;

TEST_CASE("a GPU's peak is known only when its name, compute capability and SM count all match") {
  const DevicePeak h100 = device_peak("NVIDIA H100 80GB HBM3", 9, 0, 132, "bf16");
  CHECK(h100.tflops == doctest::Approx(989.4));
  CHECK(h100.basis.find("dense bf16, H100 SXM5 at 1980 MHz") != std::string::npos);
  CHECK(device_peak("NVIDIA H100 80GB HBM3", 9, 0, 132, "tf32").tflops == doctest::Approx(494.7));
  CHECK(device_peak("NVIDIA H100 80GB HBM3", 9, 0, 132, "fp32").tflops == doctest::Approx(66.9));
  CHECK(device_peak("NVIDIA A100-SXM4-80GB", 8, 0, 108, "tf32").tflops == doctest::Approx(156.0));
  CHECK(device_peak("NVIDIA H200", 9, 0, 132, "bf16").tflops == doctest::Approx(989.4));

  // Same chip and SM count, other clocks and power: not guessed.
  const DevicePeak nvl = device_peak("NVIDIA H100 NVL", 9, 0, 132, "bf16");
  CHECK(nvl.tflops == 0);
  CHECK(nvl.basis.find("unknown: NVIDIA H100 NVL (compute capability 9.0, 132 SMs)") == 0);
  CHECK(device_peak("NVIDIA GH200 480GB", 9, 0, 132, "bf16").tflops == 0);  // not an H200
  CHECK(device_peak("NVIDIA A100-SXM4-80GB", 8, 0, 98, "tf32").tflops == 0);  // a partition

  // A unit the GPU lacks: none, and said so (the CUDA engine refuses bf16 there before any of it).
  const DevicePeak v100 = device_peak("Tesla V100-SXM2-32GB", 7, 0, 80, "bf16");
  CHECK(v100.tflops == 0);
  CHECK(v100.basis == "none: the V100 SXM2 has no bf16 unit");
  CHECK(device_peak("Tesla V100-SXM2-32GB", 7, 0, 80, "fp16").tflops == doctest::Approx(125.0));
}

namespace {

struct Sku {
  const char* sku;
  double fp32, tf32, bf16, fp16;  // 0: no such unit
};

struct ReportedGpu {
  const char* name;  // cudaDeviceProp::name as the driver reports it
  int major, minor, sms;
  Sku expected;
};

constexpr Sku kV100Sxm2{"V100 SXM2", 15.7, 0, 0, 125.0};
constexpr Sku kV100Pcie{"V100 PCIe", 14.0, 0, 0, 112.0};
constexpr Sku kA100{"A100", 19.5, 156.0, 312.0, 312.0};
constexpr Sku kH100Sxm5{"H100 SXM5", 66.9, 494.7, 989.4, 989.4};
constexpr Sku kH100Pcie{"H100 PCIe", 51.2, 378.0, 756.0, 756.0};
constexpr Sku kH200Sxm{"H200 SXM", 66.9, 494.7, 989.4, 989.4};

// Every name each SKU goes by, with its compute capability and SM count. A100 names without
// "NVIDIA " are what drivers of 2021 reported.
constexpr ReportedGpu kReported[] = {
    {"Tesla V100-SXM2-16GB", 7, 0, 80, kV100Sxm2},   {"Tesla V100-SXM2-32GB", 7, 0, 80, kV100Sxm2},
    {"Tesla V100-PCIE-16GB", 7, 0, 80, kV100Pcie},   {"Tesla V100-PCIE-32GB", 7, 0, 80, kV100Pcie},
    {"NVIDIA A100-SXM4-40GB", 8, 0, 108, kA100},     {"NVIDIA A100-SXM4-80GB", 8, 0, 108, kA100},
    {"NVIDIA A100-PCIE-40GB", 8, 0, 108, kA100},     {"NVIDIA A100 80GB PCIe", 8, 0, 108, kA100},
    {"A100-SXM4-40GB", 8, 0, 108, kA100},            {"A100-PCIE-40GB", 8, 0, 108, kA100},
    {"NVIDIA H100 80GB HBM3", 9, 0, 132, kH100Sxm5}, {"NVIDIA H100 PCIe", 9, 0, 114, kH100Pcie},
    {"NVIDIA H200", 9, 0, 132, kH200Sxm},
};

}  // namespace

TEST_CASE("every known GPU, by each name it reports, at every precision") {
  for (const ReportedGpu& gpu : kReported) {
    CAPTURE(gpu.name);
    const KnownGpu* known = recognise_gpu(gpu.name, gpu.major, gpu.minor, gpu.sms);
    REQUIRE(known != nullptr);
    CHECK(std::string(known->sku) == gpu.expected.sku);
    const auto peak = [&](const char* precision) {
      return device_peak(gpu.name, gpu.major, gpu.minor, gpu.sms, precision);
    };
    CHECK(peak("fp32").tflops == doctest::Approx(gpu.expected.fp32));
    CHECK(peak("fp16").tflops == doctest::Approx(gpu.expected.fp16));
    if (gpu.expected.bf16 > 0) {
      CHECK(peak("bf16").tflops == doctest::Approx(gpu.expected.bf16));
    } else {
      CHECK(peak("bf16").tflops == 0);
      CHECK(peak("bf16").basis ==
            "none: the " + std::string(gpu.expected.sku) + " has no bf16 unit");
    }
    const DevicePeak tf32 = peak("tf32");
    if (gpu.expected.tf32 > 0) {
      CHECK(tf32.tflops == doctest::Approx(gpu.expected.tf32));
      CHECK(tf32.basis.find(" dense tf32, ") != std::string::npos);
    } else {
      // No TF32 units: tf32 computes in plain float32, and MFU is taken against that peak.
      CHECK(tf32.tflops == doctest::Approx(gpu.expected.fp32));
      CHECK(tf32.basis.find(" dense fp32 (tf32 computes in plain float32 here: the " +
                            std::string(gpu.expected.sku) + " has no TF32 units), ") !=
            std::string::npos);
    }
    for (const char* precision : {"fp32", "tf32", "bf16", "fp16"})
      if (peak(precision).tflops > 0)
        CHECK(peak(precision).basis.find(std::string(gpu.expected.sku) + " at ") !=
              std::string::npos);
  }
}

TEST_CASE("GPUs that share a chip, a name part or an SM count with a known one stay unknown") {
  const struct {
    const char* name;
    int major, minor, sms;
  } unknown[] = {
      {"NVIDIA H100 NVL", 9, 0, 132},       // other clocks and power than the SXM5
      {"NVIDIA H200 NVL", 9, 0, 132},       // likewise the H200's
      {"NVIDIA GH200 480GB", 9, 0, 132},    // a Grace Hopper superchip
      {"Tesla V100S-PCIE-32GB", 7, 0, 80},  // V100S: higher clocks than the V100 PCIe
      {"Tesla V100-SXM3-32GB", 7, 0, 80},   // DGX-2's V100
      {"Tesla V100-SXM2-32GB", 7, 0, 40},   // not the SM count a V100 reports
      {"NVIDIA A100-SXM4-40GB", 8, 0, 14},  // a MIG slice
      {"NVIDIA A100 80GB PCIe", 8, 6, 108}, // not the compute capability an A100 reports
      {"NVIDIA A30", 8, 0, 56},
      {"Tesla T4", 7, 5, 40},
  };
  for (const auto& gpu : unknown) {
    CAPTURE(gpu.name);
    CHECK(recognise_gpu(gpu.name, gpu.major, gpu.minor, gpu.sms) == nullptr);
    for (const char* precision : {"fp32", "tf32", "bf16", "fp16"}) {
      const DevicePeak peak = device_peak(gpu.name, gpu.major, gpu.minor, gpu.sms, precision);
      CHECK(peak.tflops == 0);
      CHECK(peak.basis.rfind(std::string("unknown: ") + gpu.name + " (compute capability ", 0) ==
            0);
    }
  }
}

TEST_CASE("MFU: the model's FLOPs at one GPU's images/s over the GPU's peak") {
  // The counts PyTorch's forward hooks gave for torchvision's resnet18 (bench/results).
  ModelSpec imagenet;
  CHECK(training_flops_per_image(describe(imagenet), 224) == doctest::Approx(1.08844401e10));
  ModelSpec cifar;
  cifar.stem = Stem::cifar;
  cifar.num_classes = 10;
  const double cifar_flops = training_flops_per_image(describe(cifar), 32);
  CHECK(cifar_flops == doctest::Approx(3.33253632e9));

  // The H100 run of 2026-11-27 at 224x224 bf16: 13,857 images/s was 15.2 % of 989.4 TFLOP/s.
  CHECK(model_flop_utilisation(13857.1649, 1.08844401e10, 989.4) ==
        doctest::Approx(0.152443381).epsilon(1e-6));
  CHECK(std::isnan(model_flop_utilisation(13857.0, 1.08844401e10, 0.0)));

  // tf32 on a V100 is float32 arithmetic: 1,000 images/s at 224x224 is 10.9 TFLOP/s, 69 % of the
  // SXM2's 15.7 float32 peak, not a fraction of some tensor-core peak it does not have.
  const DevicePeak v100_tf32 = device_peak("Tesla V100-SXM2-32GB", 7, 0, 80, "tf32");
  CHECK(model_flop_utilisation(1000.0, 1.08844401e10, v100_tf32.tflops) ==
        doctest::Approx(1.08844401e13 / 15.7e12));
  // bf16 there has no peak, so no MFU (the engine refuses to run it anyway).
  CHECK(std::isnan(model_flop_utilisation(
      1000.0, 1.08844401e10, device_peak("Tesla V100-SXM2-32GB", 7, 0, 80, "bf16").tflops)));
  // An A100's tf32 against its TF32 tensor cores.
  CHECK(model_flop_utilisation(1000.0, 1.08844401e10,
                               device_peak("NVIDIA A100-SXM4-80GB", 8, 0, 108, "tf32").tflops) ==
        doctest::Approx(1.08844401e13 / 156.0e12));
}
