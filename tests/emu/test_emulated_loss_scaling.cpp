// kernels/loss_scaling.cu run on the CPU through the emulator (README.md) against the maths
// headers run on the host (include/resnet_ddp/kernel_math/loss_scale.h, include/resnet_ddp/kernel_math/adamw.h): the scaling of
// d(loss)/d(logits), the search for a non-finite gradient and a step's verdict, bit for bit.
// Counts reach past kMaxBlocks * kThreads elements, where the grid-stride loops go round again.
// tests/unit/test_loss_scale.cpp holds the maths to GradScaler's rules, and
// tests/gpu/test_cuda_fp16.cpp the whole float16 step on a GPU.
#include <doctest/doctest.h>

#include <cfloat>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "resnet_ddp/kernel_math/adamw.h"
#include "resnet_ddp/kernel_math/loss_scale.h"
#include "resnet_ddp/cuda/loss_scaling.h"
#include "resnet_ddp/rng.h"
#include "support/device_buffers.h"
#include "support/test_tensors.h"

using namespace rddp;
using namespace rddp::testing;

namespace {

// One round of the grid-stride loops: kMaxBlocks * kThreads of kernels/loss_scaling.cu.
constexpr size_t kOneRound = 2048 * 256;
constexpr size_t kUntouched = 32;

// The emulator's streams are synchronous: the default stream throughout.
template <typename T>
T downloaded_one(const cuda::DeviceBuffer<T>& device) {
  return to_host(device, nullptr)[0];
}

template <typename T>
bool same_bytes(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Finite gradients with the extremes of float among them, none of which is a reason to skip.
std::vector<float> finite_gradients(size_t count, const char* tag) {
  Rng rng(derive_seed(count, tag));
  std::vector<float> grads = normal_floats(rng, count, 1e-3);
  const float extremes[] = {FLT_MAX, -FLT_MAX, FLT_MIN, std::numeric_limits<float>::denorm_min(),
                            -0.0f};
  for (size_t i = 0; i < count; i += 97) grads[i] = extremes[(i / 97) % 5];
  return grads;
}

// StepState after find_non_finite over `grads`, starting from a state whose found_inf is a
// stale 1 from the step before, which the launcher must clear itself.
loss_scale::StepState after_search(const cuda::DeviceBuffer<float>& grads, size_t count) {
  loss_scale::StepState stale = loss_scale::initial_step_state({}, 7);
  stale.found_inf = 1;
  const auto state = to_device(std::vector{stale}, nullptr);
  cuda::find_non_finite(grads.get(), count, state.get(), nullptr);
  const loss_scale::StepState got = downloaded_one(state);
  loss_scale::StepState rest = got;
  rest.found_inf = 1;
  CHECK_MESSAGE(same_bytes(rest, stale), "only found_inf is written");
  return got;
}

}  // namespace

TEST_CASE("emulated scale_loss_gradient multiplies every element by the state's scale") {
  loss_scale::StepState state = loss_scale::initial_step_state({}, 0);
  state.scaler.scale = 3072.0f;  // not a power of two: each product rounds, as on the host
  const auto d_state = to_device(std::vector{state}, nullptr);
  for (size_t count : {size_t{1}, size_t{255}, size_t{257}, kOneRound, kOneRound + 1,
                       2 * kOneRound + 333}) {
    CAPTURE(count);
    Rng rng(derive_seed(count, "scale"));
    std::vector<float> values = normal_floats(rng, count, 1.0);
    // Finite elements after the `count` to scale, which must stay as they are. The emulator's
    // guard bytes cannot show a `*=` past the end: NaN times the scale is the same NaN on x86.
    values.resize(count + kUntouched, 1.0f);
    const auto d_values = to_device(values, nullptr);
    cuda::scale_loss_gradient(d_values.get(), static_cast<int64_t>(count), d_state.get(), nullptr);
    std::vector<float> want = values;
    for (size_t i = 0; i < count; ++i) want[i] = values[i] * state.scaler.scale;
    CHECK(bitwise_equal(to_host(d_values, nullptr), want));
  }
  CHECK_MESSAGE(same_bytes(downloaded_one(d_state), state), "the state is only read");

  // No elements: nothing to launch, nothing touched.
  const std::vector<float> values{1.0f, 2.0f};
  const auto d_values = to_device(values, nullptr);
  cuda::scale_loss_gradient(d_values.get(), 0, d_state.get(), nullptr);
  CHECK(bitwise_equal(to_host(d_values, nullptr), values));
}

TEST_CASE("emulated find_non_finite finds one NaN or Inf anywhere, and nothing in finite data") {
  const float bad_values[] = {std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()};
  for (size_t count : {size_t{1}, size_t{257}, kOneRound + 1, 2 * kOneRound + 333}) {
    CAPTURE(count);
    std::vector<float> grads = finite_gradients(count, "find");
    REQUIRE(count_non_finite(grads) == 0);
    // Exactly `count` elements: a read past them finds the guard bytes, NaN, and a clean
    // buffer would be flagged.
    auto d_grads = to_device(grads, nullptr);
    CHECK(after_search(d_grads, count).found_inf == 0);

    for (size_t at : {size_t{0}, count / 2, count - 1}) {
      for (float bad : bad_values) {
        CAPTURE(at);
        CAPTURE(bad);
        cuda::copy_to_device(d_grads.get() + at, &bad, 1, nullptr);
        CHECK(after_search(d_grads, count).found_inf == 1);
        cuda::copy_to_device(d_grads.get() + at, &grads[at], 1, nullptr);
      }
    }
  }

  // No gradients: the stale verdict is cleared and the buffer, NaN here, is not looked at.
  const auto nan = to_device(std::vector{std::numeric_limits<float>::quiet_NaN()}, nullptr);
  CHECK(after_search(nan, 0).found_inf == 0);
}

namespace {

struct Verdicts {
  loss_scale::StepState state;
  adamw::Scalars<float> scalars;
};

// Runs one step after another as the CUDA engine orders them under float16 loss scaling
// (find_non_finite, then begin_scaled_step) on the device and as loss_scale::begin_step and
// adamw::scalars on the host, and compares the state and AdamW's scalars after each step.
// `overflows[k]` puts a non-finite value into step k's gradients. Without hyperparameters
// (SGD) no scalars are written. Returns the host's final state.
loss_scale::StepState check_steps(const loss_scale::Config& config, loss_scale::StepState start,
                                  const std::vector<bool>& overflows, bool with_adamw) {
  const adamw::Hyperparameters hyper{1e-3, 0.05, 0.9, 0.999, 1e-8};
  Verdicts host{start, {}};
  std::memset(&host.scalars, 0xff, sizeof host.scalars);  // as poisoned<>: never written yet
  const auto d_state = to_device(std::vector{start}, nullptr);
  const auto d_hyper = to_device(std::vector{hyper}, nullptr);
  const auto d_scalars = poisoned<adamw::Scalars<float>>(1, nullptr);

  const size_t count = 1001;
  const std::vector<float> clean = finite_gradients(count, "steps");
  const auto d_grads = to_device(clean, nullptr);
  for (size_t step = 0; step < overflows.size(); ++step) {
    CAPTURE(step);
    std::vector<float> grads = clean;
    if (overflows[step])
      grads[(step * 389) % count] = step % 2 ? std::numeric_limits<float>::infinity()
                                             : std::numeric_limits<float>::quiet_NaN();
    cuda::copy_to_device(d_grads.get(), grads.data(), count, nullptr);
    cuda::find_non_finite(d_grads.get(), count, d_state.get(), nullptr);
    cuda::begin_scaled_step(d_state.get(), config, with_adamw ? d_hyper.get() : nullptr,
                            with_adamw ? d_scalars.get() : nullptr, nullptr);

    host.state.found_inf = count_non_finite(grads) != 0;
    if (loss_scale::begin_step(host.state, config) && with_adamw)
      host.scalars = adamw::scalars<float>(hyper, host.state.step_count);
    CHECK_MESSAGE(same_bytes(downloaded_one(d_state), host.state),
                  "scale " << host.state.scaler.scale << ", tracker "
                           << host.state.scaler.growth_tracker << ", step "
                           << host.state.step_count << ", skipped " << host.state.skipped_steps);
    if (with_adamw) CHECK_MESSAGE(same_bytes(downloaded_one(d_scalars), host.scalars), "scalars");
  }
  return host.state;
}

}  // namespace

TEST_CASE("emulated begin_scaled_step follows loss_scale::begin_step and adamw::scalars") {
  loss_scale::Config config;
  config.init_scale = 1024.0f;
  config.growth_interval = 3;
  // An overflow first (AdamW's scalars must stay unwritten), growth after three finite steps,
  // backoff, a count restarted by an overflow, two overflows in a row, and growth again.
  const std::vector<bool> overflows{true, false, false, false, false, true,  false,
                                    false, true, true,  false, false, false, false};
  for (bool with_adamw : {true, false}) {
    CAPTURE(with_adamw);
    const loss_scale::StepState end =
        check_steps(config, loss_scale::initial_step_state(config, 41), overflows, with_adamw);
    // The sequence reached every transition it was written for.
    CHECK(end.step_count == 41 + 10);
    CHECK(end.skipped_steps == 4);
    CHECK(end.scaler.scale == 256.0f);  // 1024: /2, x2, /2, /2, /2, x2
    CHECK(end.scaler.growth_tracker == 1);
  }
}

TEST_CASE("emulated begin_scaled_step keeps a scale whose growth would overflow to Inf") {
  loss_scale::Config config;
  config.growth_interval = 1;
  loss_scale::StepState start = loss_scale::initial_step_state(config, 0);
  start.scaler.scale = FLT_MAX / 1.5f;
  const loss_scale::StepState end = check_steps(config, start, {false, false}, true);
  CHECK(end.scaler.scale == FLT_MAX / 1.5f);
  CHECK(end.step_count == 2);
}
