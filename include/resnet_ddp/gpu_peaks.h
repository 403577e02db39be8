#pragma once
// Peak dense arithmetic rates of the GPUs we know, for MFU (model FLOP/s over peak FLOP/s).
//
// A GPU is recognised only when its name, compute capability and SM count all match an entry;
// anything else is unknown, and MFU is reported as unknown rather than guessed. The name tells
// apart SKUs that share a chip and SM count but not clocks or power (H100 SXM5 and H100 NVL
// both have 132 SMs). Tensor-core figures are dense: NVIDIA's datasheets print TF32 and BF16
// "with sparsity" (2:4 structured), twice the dense rate, which ResNet training cannot use.
// All figures hold at the SKU's boost clock, given here so a run can show when its device
// reports a lower one (a clock-capped or power-capped part reaches less).
#include <cstdio>
#include <string>

namespace rddp {

struct PeakTflops {
  double fp32 = 0, tf32 = 0, bf16 = 0;  // 0: the GPU has no such unit (V100: no TF32, BF16)
  // Float16 tensor cores with float accumulation: bf16's rate from Ampere on; V100's tensor
  // cores are float16 only.
  double fp16 = 0;
};

struct KnownGpu {
  const char* sku;
  const char* name_has[2];    // must occur in cudaDeviceProp::name (null: no condition)
  const char* name_lacks[2];  // must not occur (null: no condition)
  int major, minor, sms;
  int boost_mhz;
  PeakTflops peak;
  const char* source;
};

inline constexpr KnownGpu kKnownGpus[] = {
    // FP32: 132 SMs x 128 lanes x 2 FLOPs x 1.98 GHz.
    {"H100 SXM5", {"H100", "HBM3"}, {"NVL", nullptr}, 9, 0, 132, 1980, {66.9, 494.7, 989.4, 989.4},
     "NVIDIA H100 Tensor Core GPU Architecture whitepaper, H100 SXM5 column (dense)"},
    {"H100 PCIe", {"H100", "PCIe"}, {nullptr, nullptr}, 9, 0, 114, 1755, {51.2, 378.0, 756.0, 756.0},
     "NVIDIA H100 Tensor Core GPU Architecture whitepaper, H100 PCIe column (dense)"},
    // "GH200" (a Grace Hopper superchip) contains "H200" but is an H100 with other memory.
    {"H200 SXM", {"H200", nullptr}, {"NVL", "GH200"}, 9, 0, 132, 1980, {66.9, 494.7, 989.4, 989.4},
     "NVIDIA H200 datasheet (67 FP32; TF32 989, BF16 and FP16 1979 with sparsity, halved)"},
    // Every A100 (SXM4 and PCIe, 40 and 80 GB) has the same peaks at 1.41 GHz.
    {"A100", {"A100", nullptr}, {nullptr, nullptr}, 8, 0, 108, 1410, {19.5, 156.0, 312.0, 312.0},
     "NVIDIA A100 Tensor Core GPU Architecture whitepaper, table 1 (dense)"},
    {"V100 SXM2", {"V100-SXM2", nullptr}, {nullptr, nullptr}, 7, 0, 80, 1530, {15.7, 0, 0, 125.0},
     "NVIDIA Tesla V100 datasheet (SXM2; tensor performance 125)"},
    {"V100 PCIe", {"V100-PCIE", nullptr}, {nullptr, nullptr}, 7, 0, 80, 1380, {14.0, 0, 0, 112.0},
     "NVIDIA Tesla V100 datasheet (PCIe; tensor performance 112)"},
};

// The entry that matches every condition, or null.
inline const KnownGpu* recognise_gpu(const std::string& name, int major, int minor, int sms) {
  for (const KnownGpu& gpu : kKnownGpus) {
    if (gpu.major != major || gpu.minor != minor || gpu.sms != sms) continue;
    bool names_match = true;
    for (const char* part : gpu.name_has)
      if (part != nullptr && name.find(part) == std::string::npos) names_match = false;
    for (const char* part : gpu.name_lacks)
      if (part != nullptr && name.find(part) != std::string::npos) names_match = false;
    if (names_match) return &gpu;
  }
  return nullptr;
}

// The peak for a precision name ("fp32", "tf32", "bf16", "fp16"); 0 when the GPU lacks the unit.
inline double peak_for(const PeakTflops& peak, const std::string& precision) {
  if (precision == "tf32") return peak.tf32;
  if (precision == "bf16") return peak.bf16;
  if (precision == "fp16") return peak.fp16;
  return peak.fp32;
}

// What MFU is taken against on one device at one precision: the dense peak and where the figure
// comes from, or (tflops 0) why there is none. tf32 on a GPU without TF32 units (V100) is taken
// against the float32 peak, which is what it computes at; bf16 there has no peak (the CUDA engine
// refuses it, cuda/device_capabilities.h).
struct DevicePeak {
  double tflops = 0;
  std::string basis;
};

inline DevicePeak device_peak(const std::string& name, int major, int minor, int sms,
                              const std::string& precision) {
  const KnownGpu* gpu = recognise_gpu(name, major, minor, sms);
  if (gpu == nullptr)
    return {0, "unknown: " + name + " (compute capability " + std::to_string(major) + "." +
                   std::to_string(minor) + ", " + std::to_string(sms) +
                   " SMs) is not among the GPUs of include/resnet_ddp/gpu_peaks.h"};
  // tf32 without TF32 units computes in plain float32 (cuDNN's and cuBLAS's TF32 modes fall back
  // to it), so its MFU is taken against the float32 peak, and the basis says so.
  const bool tf32_as_fp32 = precision == "tf32" && gpu->peak.tf32 == 0;
  const std::string basis_precision = tf32_as_fp32 ? "fp32" : precision;
  const double tflops = peak_for(gpu->peak, basis_precision);
  if (tflops == 0) return {0, "none: the " + std::string(gpu->sku) + " has no " + precision + " unit"};
  const std::string why =
      tf32_as_fp32 ? " (tf32 computes in plain float32 here: the " + std::string(gpu->sku) +
                         " has no TF32 units)"
                   : "";
  char text[384];
  std::snprintf(text, sizeof text, "%.1f TFLOP/s dense %s%s, %s at %d MHz (%s)", tflops,
                basis_precision.c_str(), why.c_str(), gpu->sku, gpu->boost_mhz, gpu->source);
  return {tflops, text};
}

}  // namespace rddp
