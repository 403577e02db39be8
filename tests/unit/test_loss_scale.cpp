// The dynamic loss scale's maths (include/resnet_ddp/kernel_math/loss_scale.h) against torch.cuda.amp.GradScaler's
// documented behaviour: its defaults, growth after growth_interval consecutive finite steps,
// backoff and a fresh count on any non-finite step, no growth into Inf, and 1/scale in double.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <string>

#include "resnet_ddp/kernel_math/loss_scale.h"

using namespace rddp;

TEST_CASE("the loss scale starts with GradScaler's defaults") {
  const loss_scale::Config config;
  CHECK(config.init_scale == 65536.0f);
  CHECK(config.growth_factor == 2.0f);
  CHECK(config.backoff_factor == 0.5f);
  CHECK(config.growth_interval == 2000);
  const loss_scale::State state = loss_scale::initial(config);
  CHECK(state.scale == 65536.0f);
  CHECK(state.growth_tracker == 0);
}

TEST_CASE("the scale doubles after exactly growth_interval consecutive finite steps") {
  const loss_scale::Config config;
  loss_scale::State state = loss_scale::initial(config);
  for (int step = 1; step < 2000; ++step) loss_scale::update(state, false, config);
  CHECK(state.scale == 65536.0f);
  CHECK(state.growth_tracker == 1999);
  loss_scale::update(state, false, config);
  CHECK(state.scale == 131072.0f);
  CHECK(state.growth_tracker == 0);
  // And again after 2000 more, not before.
  for (int step = 1; step < 2000; ++step) loss_scale::update(state, false, config);
  CHECK(state.scale == 131072.0f);
  loss_scale::update(state, false, config);
  CHECK(state.scale == 262144.0f);
}

TEST_CASE("a non-finite step halves the scale and restarts the count") {
  const loss_scale::Config config;
  loss_scale::State state = loss_scale::initial(config);
  for (int step = 0; step < 1500; ++step) loss_scale::update(state, false, config);
  loss_scale::update(state, true, config);
  CHECK(state.scale == 32768.0f);
  CHECK(state.growth_tracker == 0);
  // The 1500 finite steps before the overflow no longer count towards growth.
  for (int step = 1; step < 2000; ++step) loss_scale::update(state, false, config);
  CHECK(state.scale == 32768.0f);
  loss_scale::update(state, false, config);
  CHECK(state.scale == 65536.0f);
  // Backoff is exact in powers of two, down to below 1 (a scale may go under 1, as in PyTorch).
  for (int overflow = 0; overflow < 17; ++overflow) loss_scale::update(state, true, config);
  CHECK(state.scale == 0.5f);
}

TEST_CASE("a scale that would grow to Inf stays, and its count restarts") {
  loss_scale::Config config;
  config.growth_interval = 1;
  loss_scale::State state{FLT_MAX / 1.5f, 0};
  loss_scale::update(state, false, config);
  CHECK(state.scale == FLT_MAX / 1.5f);
  CHECK(state.growth_tracker == 0);
  CHECK(std::isfinite(state.scale));
}

TEST_CASE("a short interval and custom factors follow the same rules step by step") {
  loss_scale::Config config;
  config.init_scale = 8.0f;
  config.growth_factor = 4.0f;
  config.backoff_factor = 0.25f;
  config.growth_interval = 3;
  loss_scale::State state = loss_scale::initial(config);
  // finite, finite, finite (grow), finite, overflow (back off), finite x3 (grow)
  const bool overflows[] = {false, false, false, false, true, false, false, false};
  const float scales[] = {8, 8, 32, 32, 8, 8, 8, 32};
  const int trackers[] = {1, 2, 0, 1, 0, 1, 2, 0};
  for (int step = 0; step < 8; ++step) {
    CAPTURE(step);
    loss_scale::update(state, overflows[step], config);
    CHECK(state.scale == scales[step]);
    CHECK(state.growth_tracker == trackers[step]);
  }
}

TEST_CASE("gradients are unscaled by 1/scale computed in double and rounded once") {
  CHECK(loss_scale::inverse(65536.0f) == 0x1p-16f);
  CHECK(loss_scale::inverse(3.0f) == static_cast<float>(1.0 / 3.0));
  CHECK(loss_scale::inverse(1e-3f) == static_cast<float>(1.0 / static_cast<double>(1e-3f)));
  // A gradient scaled by a power of two comes back exactly.
  const float grad = 1.2345e-6f;
  CHECK(loss_scale::unscale(grad * 65536.0f, loss_scale::inverse(65536.0f)) == grad);
  CHECK(std::isnan(loss_scale::unscale(NAN, 1.0f)));
}

TEST_CASE("a step's verdict: unscale by the scale the loss was multiplied by, then update") {
  loss_scale::Config config;
  config.growth_interval = 2;
  loss_scale::StepState s = loss_scale::initial_step_state(config, 10);
  CHECK(s.scaler.scale == 65536.0f);
  CHECK(s.step_count == 10);

  // A finite step: taken, counted; the inverse is of the scale before the update.
  s.found_inf = 0;
  CHECK(loss_scale::begin_step(s, config));
  CHECK(s.inverse_scale == 1.0f / 65536.0f);
  CHECK(s.step_count == 11);
  CHECK(s.skipped_steps == 0);
  CHECK(s.scaler.growth_tracker == 1);

  // The second finite step grows the scale, after fixing this step's inverse.
  CHECK(loss_scale::begin_step(s, config));
  CHECK(s.inverse_scale == 1.0f / 65536.0f);
  CHECK(s.scaler.scale == 131072.0f);
  CHECK(s.step_count == 12);

  // A non-finite step: skipped, the optimizer's count unchanged, the skip counted, the scale
  // halved for the next step.
  s.found_inf = 1;
  CHECK_FALSE(loss_scale::begin_step(s, config));
  CHECK(s.step_count == 12);
  CHECK(s.skipped_steps == 1);
  CHECK(s.scaler.scale == 65536.0f);
  CHECK(s.scaler.growth_tracker == 0);
}

TEST_CASE("unscaling by a power-of-two scale is exact") {
  // Multiplying by 2^-k only changes the exponent of a normal float, so grad * scale * (1/scale)
  // gives grad back: what lets the GPU test compare an fp16 step bit for bit.
  for (const float scale : {1.0f, 2.0f, 1024.0f, 65536.0f, 1048576.0f}) {
    const float inverse = loss_scale::inverse(scale);
    for (const float grad : {1e-3f, -0.7f, 3.14159f, 1e-20f})
      CHECK(loss_scale::unscale(grad * scale, inverse) == grad);
  }
}
