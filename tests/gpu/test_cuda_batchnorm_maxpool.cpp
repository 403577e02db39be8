// The imagenet stem's training forward without its BatchNorm output stored: our BatchNorm's
// statistics alone (batchnorm_forward_train with no y) and the max-pool normalising on the fly
// (maxpool_forward_of_batchnorm_relu) must give what the two passes give through the stored
// output (BatchNorm with its ReLU, then maxpool_forward), bit for bit: pooled values, argmax,
// saved and running statistics. Both formats, every activation type; the shifts (beta) are
// negative, so that the ReLU zeroes most values and windows hold ties at 0, where the first must
// win.
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <vector>

#include "resnet_ddp/cpu/layers.h"
#include "resnet_ddp/cuda/batchnorm_kernels.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/cuda/handles.h"
#include "resnet_ddp/cuda/layer_kernels.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/memory_format.h"
#include "resnet_ddp/rng.h"
#include "support/device_buffers.h"
#include "support/test_tensors.h"

using namespace rddp;
using cuda::DeviceBuffer;
using testing::bitwise_equal;
using testing::poisoned;
using testing::to_device;
using testing::to_host;

namespace {

// The stem's training forward on the device, and the buffers it leaves there.
template <typename T>
struct StemOnDevice {
  cuda::BatchNormShape shape;
  DeviceBuffer<T> x;
  DeviceBuffer<float> gamma, beta, running_mean, running_var, save_mean, save_invstd;
  DeviceBuffer<T> pooled;
  DeviceBuffer<uint8_t> argmax;
  DeviceBuffer<std::byte> scratch;
};

// The stem's BatchNorm (with its ReLU) and max-pool on `x`, through the stored output
// (`on_the_fly` false) or without it.
template <typename T>
StemOnDevice<T> stem_forward(const PoolShape& pool, MemoryFormat format,
                             const std::vector<T>& x, const std::vector<float>& gamma,
                             const std::vector<float>& beta, bool on_the_fly,
                             cudaStream_t stream) {
  const cuda::BatchNormShape shape{pool.batch, pool.channels, pool.in_h, pool.in_w, format};
  const size_t outputs =
      static_cast<size_t>(pool.batch) * pool.channels * pool.out_h() * pool.out_w();
  const size_t channels = static_cast<size_t>(pool.channels);
  StemOnDevice<T> d{shape,
                    to_device(x, stream),
                    to_device(gamma, stream),
                    to_device(beta, stream),
                    to_device(std::vector<float>(channels, 0.0f), stream),
                    to_device(std::vector<float>(channels, 1.0f), stream),
                    poisoned<float>(channels, stream),
                    poisoned<float>(channels, stream),
                    poisoned<T>(outputs, stream),
                    poisoned<uint8_t>(outputs, stream),
                    DeviceBuffer<std::byte>(cuda::batchnorm_scratch_bytes(shape))};
  auto stored = poisoned<T>(x.size(), stream);
  cuda::batchnorm_forward_train<T>(shape, d.x.get(), d.gamma.get(), d.beta.get(),
                                   d.running_mean.get(), d.running_var.get(), d.save_mean.get(),
                                   d.save_invstd.get(), nullptr, /*relu=*/true,
                                   on_the_fly ? nullptr : stored.get(), d.scratch.get(),
                                   d.scratch.bytes(), stream);
  if (on_the_fly)
    cuda::maxpool_forward_of_batchnorm_relu<T>(
        pool, d.x.get(), {d.save_mean.get(), d.save_invstd.get(), d.gamma.get(), d.beta.get()},
        d.pooled.get(), d.argmax.get(), stream, format);
  else
    cuda::maxpool_forward<T>(pool, stored.get(), d.pooled.get(), d.argmax.get(), stream, format);
  // `stored` goes with this function: the pool must have read it.
  RDDP_CUDA_CHECK(cudaStreamSynchronize(stream));
  return d;
}

// What one way of running the stem's forward leaves.
template <typename T>
struct StemForward {
  std::vector<T> pooled;
  std::vector<uint8_t> argmax;
  std::vector<float> save_mean, save_invstd, running_mean, running_var;
};

template <typename T>
StemForward<T> run_stem(const PoolShape& pool, MemoryFormat format, const std::vector<T>& x,
                        const std::vector<float>& gamma, const std::vector<float>& beta,
                        bool on_the_fly, cudaStream_t stream) {
  const StemOnDevice<T> d = stem_forward(pool, format, x, gamma, beta, on_the_fly, stream);
  return {to_host(d.pooled, stream),       to_host(d.argmax, stream),
          to_host(d.save_mean, stream),    to_host(d.save_invstd, stream),
          to_host(d.running_mean, stream), to_host(d.running_var, stream)};
}

const PoolShape kShapes[] = {
    {2, 64, 16, 16, 3, 2, 1},  // the imagenet stem's window on a small plane
    {3, 5, 9, 7, 3, 2, 1},     // odd channels and planes: single-value loads
    {2, 8, 14, 14, 3, 2, 1},   // 8 channels: 16-byte NHWC loads of 16-bit values
    {1, 3, 6, 6, 2, 2, 0},     // another window
};

// Calls check(pool, format, inputs) for every shape in both formats, where inputs is the
// BatchNorm's number of values, with the case in doctest's context for a failure's message.
template <typename Check>
void for_each_case(const Check& check) {
  for (const PoolShape& pool : kShapes) {
    for (MemoryFormat format : {MemoryFormat::nchw, MemoryFormat::nhwc}) {
      CAPTURE(pool.channels);
      CAPTURE(pool.in_h);
      CAPTURE(pool.in_w);
      CAPTURE(pool.kernel);
      const std::string format_name = to_string(format);  // doctest prints a char* as a pointer
      CAPTURE(format_name);
      check(pool, format,
            static_cast<size_t>(pool.batch) * pool.channels * pool.in_h * pool.in_w);
    }
  }
}

// A stem's random inputs, drawn from `rng` in this order: x (stored in the case's format; the
// values' order does not matter to what is compared), then gamma in [0.5, 1.5] and beta in
// [beta_low, beta_high] per channel.
template <typename T>
struct StemInputs {
  std::vector<T> x;
  std::vector<float> gamma, beta;
};

template <typename T>
StemInputs<T> random_inputs(Rng& rng, const PoolShape& pool, size_t count, double beta_low,
                            double beta_high) {
  const auto channels = static_cast<size_t>(pool.channels);
  StemInputs<T> in;
  in.x = testing::converted<T>(testing::random_uniform<float>(rng, count));
  in.gamma = testing::random_uniform<float>(rng, channels, 0.5, 1.5);
  in.beta = testing::random_uniform<float>(rng, channels, beta_low, beta_high);
  return in;
}

template <typename T>
void check_type() {
  cuda::ComputeContext context;
  cudaStream_t stream = context.stream();
  for_each_case([&](const PoolShape& pool, MemoryFormat format, size_t count) {
    Rng rng(derive_seed(count, "batchnorm maxpool"));
    const StemInputs<T> in = random_inputs<T>(rng, pool, count, -1.0, 0.0);
    const StemForward<T> stored = run_stem(pool, format, in.x, in.gamma, in.beta, false, stream);
    const StemForward<T> on_the_fly =
        run_stem(pool, format, in.x, in.gamma, in.beta, true, stream);
    CHECK(bitwise_equal(on_the_fly.pooled, stored.pooled));
    CHECK(on_the_fly.argmax == stored.argmax);
    CHECK(bitwise_equal(on_the_fly.save_mean, stored.save_mean));
    CHECK(bitwise_equal(on_the_fly.save_invstd, stored.save_invstd));
    CHECK(bitwise_equal(on_the_fly.running_mean, stored.running_mean));
    CHECK(bitwise_equal(on_the_fly.running_var, stored.running_var));
    // Ties at 0 were met: some window's maximum is a ReLU's zero.
    size_t zeros = 0;
    for (T v : stored.pooled) zeros += static_cast<float>(v) == 0.0f;
    CHECK(zeros > 0);
  });
}

}  // namespace

TEST_CASE("the stem's max-pool of BatchNorm normalised on the fly matches the stored output's") {
  check_type<float>();
  check_type<__nv_bfloat16>();
  check_type<__half>();
}

TEST_CASE("the max-pool of BatchNorm on the fly refuses missing statistics") {
  cuda::ComputeContext context;
  const PoolShape pool{1, 2, 4, 4, 3, 2, 1};
  CHECK_THROWS_AS(cuda::maxpool_forward_of_batchnorm_relu<float>(pool, nullptr, {}, nullptr,
                                                                 nullptr, context.stream(),
                                                                 MemoryFormat::nchw),
                  Error);
}
