// The whole CPU network: gradients by central differences, the order in which gradients are
// reported, and training/evaluation-mode bookkeeping.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "resnet_ddp/cpu/executor.h"
#include "resnet_ddp/cpu/softmax_xent.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/rng.h"
#include "support/gradient_checker.h"
#include "support/relu_ties.h"

using namespace rddp;

namespace {

ModelSpec narrow_spec(Stem stem) {
  ModelSpec spec;
  spec.stem = stem;
  spec.in_channels = 2;
  spec.num_classes = 5;
  spec.widths = {3, 4, 4, 5};
  return spec;
}

template <typename T>
std::vector<T> random_values(size_t count, uint64_t seed) {
  Rng rng(seed);
  std::vector<T> values(count);
  for (T& v : values) v = static_cast<T>(rng.normal());
  return values;
}

std::vector<int32_t> random_labels(int batch, int classes, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> labels(batch);
  for (int32_t& label : labels) label = static_cast<int32_t>(rng.below(classes));
  return labels;
}

}  // namespace

TEST_CASE("whole-network gradients match central differences (double)") {
  for (Stem stem : {Stem::cifar, Stem::imagenet}) {
    const std::string stem_name = to_string(stem);
    CAPTURE(stem_name);
    const int batch = 3, size = stem == Stem::cifar ? 8 : 16;
    ModelState<double> state(narrow_spec(stem));
    init_torchvision(state, 11);
    // Non-trivial BatchNorm affine parameters, so their gradients are not special cases.
    Rng rng(5);
    for (const TensorInfo& info : state.layout.tensors())
      if (info.role == TensorRole::parameter && info.shape.size() == 1 && info.name != "fc.bias")
        for (size_t i = 0; i < info.numel; ++i)
          state.params[info.offset + i] += 0.3 * rng.normal();

    cpu::Executor<double> executor(state, batch, size, size);
    const auto input = random_values<double>(static_cast<size_t>(batch) * 2 * size * size, 3);
    const auto labels = random_labels(batch, 5, 4);
    const double smoothing = 0.1;
    std::vector<double> dlogits(static_cast<size_t>(batch) * 5);

    const double* logits = executor.forward(input.data(), batch, true);
    cpu::softmax_cross_entropy(logits, labels.data(), batch, 5, smoothing, dlogits.data());
    executor.backward(dlogits.data());
    const std::vector<double> analytic = state.grads;

    auto loss = [&] {
      const double* out = executor.forward(input.data(), batch, true);
      return cpu::softmax_cross_entropy<double>(out, labels.data(), batch, 5, smoothing, nullptr).loss;
    };
    std::vector<testing::GradientInput> inputs;
    for (const TensorInfo& info : state.layout.tensors())
      if (info.role == TensorRole::parameter)
        inputs.push_back({info.name, state.params.data() + info.offset,
                          analytic.data() + info.offset, info.numel});
    testing::GradientCheckOptions options;
    options.max_points_per_input = 60;  // every element of the small tensors, 60 of the others
    const auto report = testing::check_gradients(loss, inputs, options);
    CHECK_MESSAGE(report.passed(), report.summary());
    CHECK(report.checked > 1000);
    MESSAGE(stem_name, " stem: ", report.summary());
  }
}

TEST_CASE("backward reports every parameter once, in the order of the flat buffer") {
  ModelState<float> state(narrow_spec(Stem::imagenet));
  init_torchvision(state, 1);
  const int batch = 2, size = 24;
  cpu::Executor<float> executor(state, batch, size, size);
  const auto input = random_values<float>(static_cast<size_t>(batch) * 2 * size * size, 9);
  const auto labels = random_labels(batch, 5, 8);
  std::vector<float> dlogits(batch * 5);
  const float* logits = executor.forward(input.data(), batch, true);
  cpu::softmax_cross_entropy(logits, labels.data(), batch, 5, 0.0f, dlogits.data());

  std::vector<const TensorInfo*> reported;
  executor.backward(dlogits.data(), [&](const TensorInfo& info) { reported.push_back(&info); });

  std::vector<const TensorInfo*> parameters;
  for (const TensorInfo& info : state.layout.tensors())
    if (info.role == TensorRole::parameter) parameters.push_back(&info);
  REQUIRE(reported.size() == parameters.size());
  for (size_t i = 0; i < reported.size(); ++i) CHECK(reported[i] == parameters[i]);
}

TEST_CASE("evaluation uses running statistics; training updates them once per forward") {
  ModelState<float> state(narrow_spec(Stem::cifar));
  init_torchvision(state, 2);
  const int batch = 4, size = 8;
  cpu::Executor<float> executor(state, batch, size, size);
  const auto input = random_values<float>(static_cast<size_t>(batch) * 2 * size * size, 1);

  const std::vector<float> running_before = state.running;
  const float* out = executor.forward(input.data(), batch, false);
  const std::vector<float> eval_logits(out, out + batch * 5);
  out = executor.forward(input.data(), batch, false);
  CHECK(std::vector<float>(out, out + batch * 5) == eval_logits);
  CHECK(state.running == running_before);
  CHECK(state.counters[0] == 0);

  executor.forward(input.data(), batch, true);
  CHECK(state.running != running_before);
  for (int64_t count : state.counters) CHECK(count == 1);

  // A sub-batch through an executor built for a larger one equals a right-sized executor.
  ModelState<float> copy = state;
  cpu::Executor<float> small(copy, 2, size, size);
  const float* big_out = executor.forward(input.data(), 2, false);
  const std::vector<float> from_big(big_out, big_out + 2 * 5);
  const float* small_out = small.forward(input.data(), 2, false);
  for (int i = 0; i < 10; ++i) CHECK(from_big[i] == small_out[i]);

  CHECK_THROWS_AS(executor.forward(input.data(), batch + 1, true), Error);
}

TEST_CASE("backward without a training forward is refused") {
  ModelState<float> state(narrow_spec(Stem::cifar));
  cpu::Executor<float> executor(state, 1, 4, 4);
  std::vector<float> input(2 * 16, 0.5f), dlogits(5, 0.1f);
  executor.forward(input.data(), 1, false);
  CHECK_THROWS_AS(executor.backward(dlogits.data()), Error);
}

// The ReLU inputs a training forward finds near zero, which whole-network GPU checks clear
// before they compare gradients element by element (support/relu_ties.h).
TEST_CASE("ReLU ties: recorded by BatchNorm and channel in forward order, and cleared by moving shifts") {
  ModelState<double> state(narrow_spec(Stem::imagenet));
  init_torchvision(state, 3);
  const int batch = 2, size = 24;
  const auto input = random_values<double>(static_cast<size_t>(batch) * 2 * size * size, 4);
  // The BatchNorms whose outputs (plus the identity, for bn2) a ReLU takes, in forward order.
  const std::vector<std::string> relu_fed = {"bn1",          "layer1.0.bn1", "layer1.0.bn2",
                                             "layer1.1.bn1", "layer1.1.bn2", "layer2.0.bn1",
                                             "layer2.0.bn2", "layer2.1.bn1", "layer2.1.bn2",
                                             "layer3.0.bn1", "layer3.0.bn2", "layer3.1.bn1",
                                             "layer3.1.bn2", "layer4.0.bn1", "layer4.0.bn2",
                                             "layer4.1.bn1", "layer4.1.bn2"};
  const auto order_of = [&](const TensorInfo* shift) {
    for (size_t i = 0; i < relu_fed.size(); ++i)
      if (shift->name == relu_fed[i] + ".bias") return static_cast<int>(i);
    return -1;
  };

  {
    ModelState<double> copy = state;
    cpu::Executor<double> executor(copy, batch, size, size);
    executor.forward(input.data(), batch, true);
    CHECK(executor.relu_ties().empty());  // nothing is watched by default
    constexpr double kWide = 0.05;
    executor.watch_relu_ties(kWide);
    executor.forward(input.data(), batch, false);
    CHECK(executor.relu_ties().empty());  // evaluation forwards are not watched
    executor.forward(input.data(), batch, true);
    const auto& ties = executor.relu_ties();
    REQUIRE(ties.size() > 10);
    int last = 0;
    for (const auto& tie : ties) {
      const int order = order_of(tie.shift);
      REQUIRE(order >= 0);
      CHECK(order >= last);
      last = order;
      CHECK(tie.channel >= 0);
      CHECK(static_cast<size_t>(tie.channel) < tie.shift->numel);
      CHECK(tie.scale > 0.0);
      CHECK(std::fabs(tie.value) <= kWide * tie.scale);
    }
    CHECK(last > 0);  // ties beyond the stem's too
  }

  const std::vector<double> params_before = state.params, running_before = state.running;
  constexpr double kMargin = 2e-3;
  const int moved = testing::clear_relu_ties(state, input, batch, size, size, kMargin);
  CHECK(moved > 0);
  CHECK(state.running == running_before);
  size_t changed = 0;
  for (const TensorInfo& info : state.layout.tensors())
    for (size_t i = 0; i < info.numel && info.role == TensorRole::parameter; ++i) {
      const double now = state.params[info.offset + i], was = params_before[info.offset + i];
      if (now == was) continue;
      ++changed;
      CHECK(order_of(&info) >= 0);                                 // only ReLU-fed shifts move
      CHECK(now == static_cast<double>(static_cast<float>(now)));  // and stay floats
    }
  CHECK(changed > 0);
  CHECK(changed <= static_cast<size_t>(moved));
  ModelState<double> copy = state;
  cpu::Executor<double> executor(copy, batch, size, size);
  executor.watch_relu_ties(kMargin);
  executor.forward(input.data(), batch, true);
  CHECK(executor.relu_ties().empty());
}
