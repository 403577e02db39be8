// The dynamic loss scale's maths (kernels/loss_scale_math.h) against torch.cuda.amp.GradScaler's
// documented behaviour: its defaults, growth after growth_interval consecutive finite steps,
// backoff and a fresh count on any non-finite step, no growth into Inf, and 1/scale in double.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <string>

#include "loss_scale_math.h"

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
