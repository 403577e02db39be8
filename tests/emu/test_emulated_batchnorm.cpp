// kernels/batchnorm.cu itself, run on the CPU through the emulator (README.md), against the CPU
// twin with the GPU test's bounds and checks (support/batchnorm_kernel_check.h): every thread,
// barrier, shuffle and vector load of the real kernels, launched by the real host code. The
// shapes are the GPU test's with small batches for ResNet-18's layers (each still split over
// several blocks a channel); each runs in both formats and, through pointers shifted by an
// element or by 8 bytes, at each vector width the dispatcher picks, through the fusions,
// aliasings and ReLU mask sources in turn.
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "resnet_ddp/kernel_math/batchnorm_partition.h"
#include "resnet_ddp/cpu/layers.h"
#include "resnet_ddp/cuda/batchnorm_kernels.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/error.h"
#include "support/batchnorm_kernel_check.h"

using namespace rddp;
using namespace rddp::testing::batchnorm_check;

namespace {

const std::vector<Case> kCases = odd_shapes_then({
    {{2, 64, 112, 112}, 1.0},  // ResNet-18 at 224x224, batch 2: the stem (3 splits in NCHW)
    {{2, 64, 56, 56}, 0.0},    //   layer1
    {{2, 128, 28, 28}, 0.0},   //   layer2
    {{2, 256, 14, 14}, 0.0},   //   layer3: 14x14, 8-byte loads of 16-bit NCHW
    {{2, 512, 7, 7}, 0.0},     //   layer4
    {{4, 64, 32, 32}, 0.0},    // the cifar stem at 32x32
    {{8, 512, 4, 4}, 0.0},     // its layer4
    {{8, 2, 112, 112}, 5.0},   // 100,352 values a channel: 12 splits in NCHW, 24 in NHWC
});

// The vector width batchnorm.cu's dispatcher takes for the shape with every pointer `shift`
// elements past a 256-byte boundary, to prove that each width was met.
template <typename T>
int vector_width_of(const cuda::BatchNormShape& s, size_t shift) {
  constexpr int kWidest = 16 / static_cast<int>(sizeof(T));
  const bn::Partition p = bn::make_partition(s.batch, s.channels, s.height, s.width,
                                             s.format == MemoryFormat::nhwc);
  for (int vector = bn::widest_vector(p, kWidest); vector > 1; vector /= 2)
    if ((vector == kWidest || vector == kWidest / 2) && shift % static_cast<size_t>(vector) == 0)
      return vector;
  return 1;
}

template <typename T>
void check_type() {
  constexpr size_t kWidest = 16 / sizeof(T);
  // Shifts of 0, 8 bytes and one element: 16-byte, 8-byte and single loads where C or H * W
  // allows them.
  const size_t shifts[] = {0, kWidest / 2, 1};
  std::map<MemoryFormat, Ledger> ours;
  std::map<MemoryFormat, std::set<int>> widths;
  int run = 0;
  for (const Case& k : kCases) {
    const cpu::BatchNormShape& s = k.shape;
    const Inputs in = inputs_of<T>(k);
    const ForwardReference f = forward_reference(s, in);
    // Small shapes at every shift; ResNet-18's (most of the run time) at one each, in turn.
    const bool small = elements(s) < 100000;
    for (MemoryFormat format : {MemoryFormat::nchw, MemoryFormat::nhwc}) {
      const size_t big_shift = shifts[run % 3];
      for (size_t shift : shifts) {
        if (!small && shift != big_shift) continue;
        // Fusions, aliasings and mask sources in turn, each met in both formats.
        const Variant v = variant_of(run);
        ++run;
        CAPTURE(describe(s));
        const std::string format_name = to_string(format);  // doctest prints a char* as a pointer
        CAPTURE(format_name);
        CAPTURE(shift);
        CAPTURE(v.residual);
        CAPTURE(v.relu);
        CAPTURE(v.aliasing);
        const std::string mask_source = to_string(v.mask);
        CAPTURE(mask_source);
        const cuda::BatchNormShape shape{s.batch, s.channels, s.height, s.width, format};
        widths[format].insert(vector_width_of<T>(shape, shift_of(v, shift)));
        check_ours<T>(s, in, f, format, v, /*stream=*/nullptr, ours[format], shift);
      }
    }
  }
  for (MemoryFormat format : {MemoryFormat::nchw, MemoryFormat::nhwc}) {
    MESSAGE(std::string(Type<T>::kName) << " " << std::string(to_string(format))
                           << ", worst error / allowed:" << ours[format].summary());
    const std::set<int> every_width{1, static_cast<int>(kWidest / 2), static_cast<int>(kWidest)};
    CHECK_MESSAGE(widths[format] == every_width,
                  "not every vector width was run in " << std::string(to_string(format)));
  }
}

}  // namespace

TEST_CASE("emulated BatchNorm kernels match the CPU twin: float") { check_type<float>(); }

TEST_CASE("emulated BatchNorm kernels match the CPU twin: bfloat16") {
  check_type<__nv_bfloat16>();
}

TEST_CASE("emulated BatchNorm kernels match the CPU twin: float16") { check_type<__half>(); }

TEST_CASE("emulated BatchNorm refuses one value per channel, short scratch, two sources of the ReLU's mask and its bits at a narrow load") {
  const cuda::BatchNormShape single{1, 4, 1, 1, MemoryFormat::nhwc};
  CHECK_THROWS_AS(cuda::batchnorm_forward_train<float>(single, nullptr, nullptr, nullptr, nullptr,
                                                       nullptr, nullptr, nullptr, nullptr, false,
                                                       nullptr, nullptr, 0, nullptr),
                  Error);
  CHECK_THROWS_AS(cuda::batchnorm_backward<float>(single, nullptr, nullptr, {}, nullptr,
                                                  nullptr, nullptr, nullptr, nullptr, nullptr,
                                                  nullptr, 0, nullptr),
                  Error);
  const cuda::BatchNormShape shape{2, 4, 3, 3, MemoryFormat::nchw};
  cuda::DeviceBuffer<std::byte> short_scratch(cuda::batchnorm_scratch_bytes(shape) - 4);
  CHECK_THROWS_AS(cuda::batchnorm_forward_train<float>(
                      shape, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                      nullptr, false, nullptr, short_scratch.get(), short_scratch.bytes(), nullptr),
                  Error);
  // A mask both read and recomputed: the caller's mistake, refused before any launch.
  cuda::DeviceBuffer<std::byte> scratch(cuda::batchnorm_scratch_bytes(shape));
  cuda::DeviceBuffer<float> stand_in(1);
  cuda::DeviceBuffer<uint8_t> bits(cuda::batchnorm_relu_bits_bytes<float>(shape));
  const cuda::ReluMask<float> read_and_recomputed{stand_in.get(), stand_in.get(), nullptr};
  const cuda::ReluMask<float> read_and_bits{stand_in.get(), nullptr, bits.get()};
  for (const cuda::ReluMask<float>& two : {read_and_recomputed, read_and_bits})
    CHECK_THROWS_WITH_AS(cuda::batchnorm_backward<float>(shape, nullptr, nullptr, two, nullptr,
                                                         nullptr, nullptr, nullptr, nullptr,
                                                         nullptr, scratch.get(), scratch.bytes(),
                                                         nullptr),
                         doctest::Contains("more than one of the ReLU's output"), Error);
  // The bits are written and read a byte a load of the shape's widest loads: 3x3 planes take one
  // float a load, so a byte a value; 4x4 ones four a load (bfloat16 eight), which an x one
  // element off its 16-byte alignment cannot give.
  CHECK(cuda::batchnorm_relu_bits_bytes<float>(shape) == 2 * 4 * 3 * 3);
  const cuda::BatchNormShape wide{2, 4, 4, 4, MemoryFormat::nchw};
  CHECK(cuda::batchnorm_relu_bits_bytes<float>(wide) == 2 * 4 * 4 * 4 / 4);
  CHECK(cuda::batchnorm_relu_bits_bytes<__nv_bfloat16>(wide) == 2 * 4 * 4 * 4 / 8);
  cuda::DeviceBuffer<float> x(2 * 4 * 4 * 4 + 1), y(2 * 4 * 4 * 4), channel(4);
  cuda::DeviceBuffer<std::byte> wide_scratch(cuda::batchnorm_scratch_bytes(wide));
  cuda::DeviceBuffer<uint8_t> wide_bits(cuda::batchnorm_relu_bits_bytes<float>(wide));
  const auto forward_with_bits = [&](const float* from, bool relu) {
    cuda::batchnorm_forward_train<float>(wide, from, channel.get(), channel.get(), nullptr,
                                         nullptr, channel.get(), channel.get(), nullptr, relu,
                                         y.get(), wide_scratch.get(), wide_scratch.bytes(),
                                         nullptr, wide_bits.get());
  };
  CHECK_THROWS_WITH_AS(forward_with_bits(x.get() + 1, true),
                       doctest::Contains("not 16-byte aligned"), Error);
  CHECK_THROWS_WITH_AS(forward_with_bits(x.get(), false), doctest::Contains("without a ReLU"),
                       Error);
  const auto of_bits = cuda::ReluMask<float>::of_bits(wide_bits.get());
  CHECK_THROWS_WITH_AS(cuda::batchnorm_backward<float>(wide, x.get() + 1, y.get(), of_bits,
                                                       channel.get(), channel.get(), channel.get(),
                                                       y.get(), channel.get(), channel.get(),
                                                       wide_scratch.get(), wide_scratch.bytes(),
                                                       nullptr),
                       doctest::Contains("not 16-byte aligned"), Error);
}
