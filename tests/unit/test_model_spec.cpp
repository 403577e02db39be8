#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "resnet_ddp/error.h"
#include "resnet_ddp/model_state.h"

using namespace rddp;

TEST_CASE("resnet18 for 1000 classes has torchvision's 11,689,512 parameters") {
  ModelSpec spec;  // torchvision defaults
  ParamLayout layout(describe(spec));
  CHECK(layout.parameter_count() == 11689512);
  // 20 convolutions, 20 BatchNorms (weight + bias each), fc weight + bias.
  size_t parameters = 0, running = 0, counters = 0;
  for (const auto& info : layout.tensors()) {
    parameters += info.role == TensorRole::parameter;
    running += info.role == TensorRole::running_stat;
    counters += info.role == TensorRole::batch_counter;
  }
  CHECK(parameters == 20 + 2 * 20 + 2);
  CHECK(running == 2 * 20);
  CHECK(counters == 20);
}

TEST_CASE("parameter count follows the classes and input channels") {
  ModelSpec spec;
  spec.num_classes = 10;
  spec.in_channels = 1;
  ParamLayout layout(describe(spec));
  // fc shrinks from 512*1000+1000 to 512*10+10; conv1 from 64*3*49 to 64*1*49.
  CHECK(layout.parameter_count() == 11689512 - (513000 - 5130) - 64 * 2 * 49);
  spec.stem = Stem::cifar;  // conv1 becomes 3x3
  CHECK(ParamLayout(describe(spec)).parameter_count() ==
        11689512 - (513000 - 5130) - 64 * 3 * 49 + 64 * 1 * 9);
}

TEST_CASE("tensors carry torchvision state_dict names, laid out in backward order") {
  ModelSpec spec;
  ParamLayout layout(describe(spec));
  const auto& tensors = layout.tensors();
  CHECK(tensors.front().name == "fc.weight");
  CHECK(layout.at("fc.weight").shape == std::vector<int64_t>{1000, 512});
  CHECK(layout.at("conv1.weight").shape == std::vector<int64_t>{64, 3, 7, 7});
  CHECK(layout.at("layer2.0.downsample.0.weight").shape == std::vector<int64_t>{128, 64, 1, 1});
  CHECK(layout.at("layer4.1.bn2.running_var").role == TensorRole::running_stat);
  CHECK(layout.at("layer1.0.bn1.num_batches_tracked").shape.empty());
  CHECK(layout.find("layer1.0.downsample.0.weight") == nullptr);  // layer1 keeps its shape

  // Gradients are produced from the classifier back to the stem: offsets must follow.
  CHECK(layout.at("fc.bias").offset > layout.at("fc.weight").offset);
  CHECK(layout.at("layer4.1.conv2.weight").offset < layout.at("layer4.0.conv1.weight").offset);
  CHECK(layout.at("layer1.0.conv1.weight").offset < layout.at("conv1.weight").offset);

  std::set<std::string> names;
  for (const auto& info : tensors) {
    CHECK(names.insert(info.name).second);
    if (info.role == TensorRole::parameter)
      CHECK(info.offset % ParamLayout::kAlignElements == 0);
  }
}

TEST_CASE("bad specs are refused with a reason") {
  ModelSpec spec;
  spec.num_classes = 0;
  CHECK_THROWS_AS(describe(spec), Error);
  CHECK_THROWS_WITH_AS(parse_stem("resnet"), doctest::Contains("imagenet"), Error);
  spec.num_classes = 10;
  spec.blocks[2] = 0;
  CHECK_THROWS_WITH_AS(describe(spec), doctest::Contains("stage 3"), Error);
}

TEST_CASE("initialisation follows torchvision's rules and is reproducible") {
  ModelSpec spec;
  spec.num_classes = 10;
  ModelState<float> a(spec), b(spec);
  init_torchvision(a, 7);
  init_torchvision(b, 7);
  CHECK(a.params == b.params);
  init_torchvision(b, 8);
  CHECK(a.params != b.params);

  CHECK(a.param("bn1.weight")[0] == 1.0f);
  CHECK(a.param("layer3.1.bn2.bias")[5] == 0.0f);
  CHECK(a.running_stat("layer1.0.bn1.running_var")[3] == 1.0f);
  CHECK(a.running_stat("layer1.0.bn1.running_mean")[3] == 0.0f);

  // kaiming_normal_(fan_out): the sample std of layer4's 3x3 convs is near sqrt(2/(512*9)).
  const TensorInfo& info = a.layout.at("layer4.1.conv1.weight");
  double sum = 0, sum_sq = 0;
  for (size_t i = 0; i < info.numel; ++i) {
    const double v = a.params[info.offset + i];
    sum += v;
    sum_sq += v * v;
  }
  const double mean = sum / info.numel;
  const double stddev = std::sqrt(sum_sq / info.numel - mean * mean);
  CHECK(stddev == doctest::Approx(std::sqrt(2.0 / (512 * 9))).epsilon(0.01));

  const float bound = 1.0f / std::sqrt(512.0f);
  const TensorInfo& fc = a.layout.at("fc.weight");
  for (size_t i = 0; i < fc.numel; ++i) {
    CHECK(std::abs(a.params[fc.offset + i]) <= bound);
  }
}
