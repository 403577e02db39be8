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

  // A unit the GPU lacks: none, and said so.
  const DevicePeak v100 = device_peak("Tesla V100-SXM2-32GB", 7, 0, 80, "tf32");
  CHECK(v100.tflops == 0);
  CHECK(v100.basis == "none: the V100 SXM2 has no tf32 unit");
  CHECK(device_peak("Tesla V100-SXM2-32GB", 7, 0, 80, "fp16").tflops == doctest::Approx(125.0));
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
}
