#include <doctest/doctest.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include "resnet_ddp/error.h"
#include "resnet_ddp/model_state.h"
#include "resnet_ddp/rng.h"
#include "resnet_ddp/train/options.h"
#include "resnet_ddp/weights.h"
#include "support/error_text.h"
#include "support/scratch_dir.h"
#include "support/text_contains.h"

using namespace rddp;
using testing::contains;
namespace fs = std::filesystem;
using testing::error_of;

namespace {

fs::path scratch_dir(const std::string& name) {
  return testing::fresh_dir("weights", name);
}

// Whether every --flag the message names is one of resnet_ddp --help.
bool names_real_flags_only(const std::string& message) {
  const std::string help = usage();
  for (size_t at = message.find("--"); at != std::string::npos; at = message.find("--", at + 2)) {
    size_t end = at + 2;
    while (end < message.size() && (std::isalnum(static_cast<unsigned char>(message[end])) || message[end] == '-'))
      ++end;
    const std::string flag = message.substr(at, end - at);
    if (help.find("  " + flag + " ") == std::string::npos && help.find("  " + flag + "\n") == std::string::npos) {
      MESSAGE("the message names ", flag, ", which resnet_ddp --help does not list");
      return false;
    }
  }
  return true;
}

ModelSpec small_spec() {
  ModelSpec spec;
  spec.stem = Stem::cifar;
  spec.in_channels = 1;
  spec.num_classes = 5;
  spec.widths = {4, 8, 8, 8};
  return spec;
}

// Every value random, the BatchNorm buffers and counters included, so that nothing can pass
// by being a default.
void randomise(ModelState<float>& state, uint64_t seed) {
  Rng rng(seed);
  for (const TensorInfo& info : state.layout.tensors()) {
    for (size_t i = 0; i < info.numel; ++i) {
      switch (info.role) {
        case TensorRole::parameter:
          state.params[info.offset + i] = static_cast<float>(rng.normal());
          break;
        case TensorRole::running_stat:
          state.running[info.offset + i] = static_cast<float>(rng.uniform(0.1, 3.0));
          break;
        case TensorRole::batch_counter:
          state.counters[info.offset + i] = static_cast<int64_t>(rng.below(1000000));
          break;
      }
    }
  }
}

TensorFile weights_of(const ModelState<float>& state) {
  TensorFile file;
  file.metadata[metadata_key::kind] = "weights";
  put_model_spec(state.spec, file.metadata);
  append_model_tensors(state, file);
  return file;
}

TensorRecord* find_mutable(TensorFile& file, const std::string& name) {
  for (TensorRecord& record : file.tensors)
    if (record.name == name) return &record;
  return nullptr;
}

void remove_tensor(TensorFile& file, const std::string& name) {
  for (auto it = file.tensors.begin(); it != file.tensors.end(); ++it)
    if (it->name == name) {
      file.tensors.erase(it);
      return;
    }
}

}  // namespace

TEST_CASE("weights survive a round trip bit for bit") {
  const fs::path dir = scratch_dir("round_trip");
  ModelState<float> saved(small_spec());
  randomise(saved, 11);
  const std::string path = (dir / "w.rddp").string();
  save_weights(path, saved, {{"epoch", "3"}});

  ModelState<float> loaded(small_spec());
  const LoadReport report = load_weights(path, loaded);
  CHECK(loaded.params == saved.params);
  CHECK(loaded.running == saved.running);
  CHECK(loaded.counters == saved.counters);
  CHECK(loaded.grads == std::vector<float>(loaded.grads.size(), 0.0f));  // gradients not saved
  CHECK(spec_summary(report.file_spec) == spec_summary(small_spec()));
  CHECK_FALSE(report.classifier_reinitialised);
  REQUIRE(report.actions.size() == 1);
  CHECK(contains(report.actions[0], "loaded 62 parameter tensors and 60 BatchNorm buffers"));

  const TensorFile file = read_tensor_file(path);
  CHECK(file.metadata.at("epoch") == "3");
  CHECK(file.metadata.at("kind") == "weights");
}

TEST_CASE("a weights file holds torchvision's state_dict: names, order, shapes, dtypes, spec") {
  ModelState<float> state(small_spec());
  randomise(state, 12);
  const TensorFile file = weights_of(state);
  CHECK(file.tensors.size() == state.layout.tensors().size());

  // torchvision registers conv1, bn1, layer1..4 (each BasicBlock: conv1, bn1, conv2, bn2,
  // downsample), then fc; a BatchNorm's parameters come before its buffers.
  const std::vector<std::string> head = {
      "conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var",
      "bn1.num_batches_tracked", "layer1.0.conv1.weight", "layer1.0.bn1.weight"};
  for (size_t i = 0; i < head.size(); ++i) CHECK(file.tensors[i].name == head[i]);
  size_t block_start = 0;
  while (file.tensors[block_start].name != "layer2.0.bn2.num_batches_tracked") ++block_start;
  CHECK(file.tensors[block_start + 1].name == "layer2.0.downsample.0.weight");
  CHECK(file.tensors[block_start + 2].name == "layer2.0.downsample.1.weight");
  CHECK(file.tensors[block_start + 7].name == "layer2.1.conv1.weight");
  CHECK(file.tensors[file.tensors.size() - 2].name == "fc.weight");
  CHECK(file.tensors.back().name == "fc.bias");

  const TensorRecord* conv1 = file.find("conv1.weight");
  CHECK(conv1->shape == std::vector<int64_t>{4, 1, 3, 3});
  CHECK(conv1->dtype == DType::f32);
  CHECK(file.find("fc.weight")->shape == std::vector<int64_t>{5, 8});
  const TensorRecord* counter = file.find("layer3.1.bn2.num_batches_tracked");
  CHECK(counter->dtype == DType::i64);
  CHECK(counter->shape.empty());
  CHECK(counter->values<int64_t>()[0] == state.counter("layer3.1.bn2.num_batches_tracked"));
  CHECK(file.find("layer1.0.bn1.running_var")->values<float>()[2] ==
        state.running_stat("layer1.0.bn1.running_var")[2]);

  CHECK(file.metadata.at("model.stem") == "cifar");
  CHECK(file.metadata.at("model.in_channels") == "1");
  CHECK(file.metadata.at("model.num_classes") == "5");
  CHECK(file.metadata.at("model.widths") == "4,8,8,8");
  CHECK(file.metadata.at("model.blocks") == "2,2,2,2");
}

// Other readers check themselves against this file: tests/parity/test_converters.py runs this
// test case with RDDP_SAMPLE_OUT set to a directory and compares the file with what its own
// converter makes of the same values. Without the variable it goes to the scratch directory.
// The model is stem=cifar in_channels=1 num_classes=3 widths=4,8,8,8 blocks=2,2,2,2. In the
// t-th tensor of torchvision's state_dict order (t from 0), element i of a float tensor is
// t + (i % 256) / 256, and num_batches_tracked is 1000 + t; all exact in f32.
TEST_CASE("weights writes a sample file for other readers") {
  const char* out_dir = std::getenv("RDDP_SAMPLE_OUT");
  const fs::path dir = out_dir ? fs::path(out_dir) : scratch_dir("sample");
  const std::string path = (dir / "sample_weights.rddp").string();

  ModelSpec spec = small_spec();
  spec.num_classes = 3;
  ModelState<float> state(spec);
  TensorFile order;
  append_model_tensors(state, order);
  for (size_t t = 0; t < order.tensors.size(); ++t) {
    const TensorInfo& info = state.layout.at(order.tensors[t].name);
    if (info.role == TensorRole::batch_counter) {
      state.counters[info.offset] = 1000 + static_cast<int64_t>(t);
      continue;
    }
    float* values = (info.role == TensorRole::parameter ? state.params.data()
                                                        : state.running.data()) + info.offset;
    for (size_t i = 0; i < info.numel; ++i)
      values[i] = static_cast<float>(t) + static_cast<float>(i % 256) / 256.0f;
  }
  save_weights(path, state);

  ModelState<float> loaded(spec);
  load_weights(path, loaded);
  CHECK(loaded.params == state.params);
  CHECK(loaded.running == state.running);
  CHECK(loaded.counters == state.counters);
}

TEST_CASE("a model of another stem, class count or channel count is refused with the fix") {
  const fs::path dir = scratch_dir("spec_mismatch");
  const std::string path = (dir / "weights.rddp").string();
  ModelSpec saved_spec;
  saved_spec.stem = Stem::cifar;
  saved_spec.num_classes = 10;
  saved_spec.widths = {4, 8, 8, 8};
  ModelState<float> saved(saved_spec);
  init_torchvision(saved, 1);
  save_weights(path, saved);

  ModelSpec other = saved_spec;
  other.stem = Stem::imagenet;
  other.num_classes = 100;
  ModelState<float> imagenet(other);
  const std::string stem = error_of([&] { load_weights(path, imagenet); });
  CHECK(contains(stem, path));
  CHECK(contains(stem, "holds weights for stem=cifar in_channels=3 num_classes=10"));
  CHECK(contains(stem, "Use --stem cifar."));
  CHECK(contains(stem, "The data has 100 classes and the weights were trained for 10: use data of 10 "
                       "classes, or other weights."));
  CHECK_FALSE(contains(stem, "--init-reset-classifier"));  // it cannot help here
  CHECK(names_real_flags_only(stem));

  other = saved_spec;
  other.num_classes = 7;
  ModelState<float> seven(other);
  const std::string classes = error_of([&] { load_weights(path, seven); });
  CHECK(contains(classes, "The data has 7 classes and the weights were trained for 10: add "
                          "--init-reset-classifier to load everything but the classifier (fc) and start "
                          "a new one for 7 classes."));
  CHECK(names_real_flags_only(classes));

  other = saved_spec;
  other.in_channels = 1;
  ModelState<float> gray(other);
  const std::string channels = error_of([&] { load_weights(path, gray); });
  CHECK(contains(channels, "The data has 1 channel per image and the weights were trained on 3: use "
                           "data of 3 channels, or other weights."));
  CHECK(names_real_flags_only(channels));

  other = saved_spec;
  other.widths = {8, 8, 8, 8};
  other.blocks = {3, 4, 6, 3};
  ModelState<float> wider(other);
  const std::string network = error_of([&] { load_weights(path, wider); });
  CHECK(contains(network, "The weights are of another network (widths=4,8,8,8 blocks=2,2,2,2) than the "
                          "one built (widths=8,8,8,8 blocks=3,4,6,3)"));
  CHECK(names_real_flags_only(network));

  // None of the refused loads touched the models.
  CHECK(seven.params == std::vector<float>(seven.params.size(), 0.0f));
}

TEST_CASE("missing, unexpected, misshapen and mistyped tensors are each named") {
  const fs::path dir = scratch_dir("tensor_mismatch");
  const std::string path = (dir / "w.rddp").string();
  ModelState<float> saved(small_spec());
  randomise(saved, 13);

  TensorFile file = weights_of(saved);
  remove_tensor(file, "layer3.0.bn1.running_mean");
  TensorRecord* conv = find_mutable(file, "layer1.1.conv2.weight");
  conv->shape = {8, 4, 3, 1};
  conv->bytes.resize(8 * 4 * 3 * 4);
  TensorRecord* counter = find_mutable(file, "bn1.num_batches_tracked");
  const float not_an_integer = 1.0f;
  *counter = TensorRecord::from_values("bn1.num_batches_tracked", {}, &not_an_integer);
  std::vector<float> extra(3, 0.0f);
  file.tensors.push_back(TensorRecord::from_values("head.weight", {3}, extra.data()));
  write_tensor_file(path, file);

  ModelState<float> target(small_spec());
  randomise(target, 14);
  const ModelState<float> before = target;
  const std::string message = error_of([&] { load_weights(path, target); });
  CHECK(contains(message, "cannot load weights from '" + path + "'"));
  CHECK(contains(message, "missing tensor 'layer3.0.bn1.running_mean' [8]"));
  CHECK(contains(message, "tensor 'layer1.1.conv2.weight' has shape [8, 4, 3, 1], but the model "
                          "expects [4, 4, 3, 3]"));
  CHECK(contains(message, "tensor 'bn1.num_batches_tracked' is stored as f32, but the model "
                          "reads i64"));
  CHECK(contains(message, "unexpected tensor 'head.weight' [3]"));
  CHECK(target.params == before.params);
  CHECK(target.running == before.running);
  CHECK(target.counters == before.counters);

  // Tensors under a skipped prefix belong to someone else and are let through.
  TensorFile with_optimizer = weights_of(saved);
  with_optimizer.tensors.push_back(TensorRecord::from_values("optimizer.step", {3}, extra.data()));
  CHECK_THROWS_WITH_AS(load_weights(with_optimizer, target), doctest::Contains("optimizer.step"),
                       Error);
  LoadOptions options;
  options.skip_prefixes = {"optimizer."};
  load_weights(with_optimizer, target, options);
  CHECK(target.params == saved.params);
}

TEST_CASE("f64 weights are converted to f32") {
  ModelState<float> saved(small_spec());
  randomise(saved, 15);
  TensorFile file = weights_of(saved);
  for (TensorRecord& record : file.tensors) {
    if (record.dtype != DType::f32) continue;
    const std::vector<float> values = record.values<float>();
    std::vector<double> widened(values.size());
    // A relative change far below half an f32 ulp: converting back must give the f32 value.
    for (size_t i = 0; i < values.size(); ++i) widened[i] = values[i] * (1.0 + 1e-12);
    record = TensorRecord::from_values(record.name, record.shape, widened.data());
  }
  ModelState<float> loaded(small_spec());
  const LoadReport report = load_weights(file, loaded);
  CHECK(loaded.params == saved.params);
  CHECK(loaded.running == saved.running);
  REQUIRE(report.actions.size() == 2);
  CHECK(report.actions[1] == "converted 102 tensors from f64 to f32");
}

TEST_CASE("the classifier can be re-initialised for another class count") {
  const fs::path dir = scratch_dir("reinit");
  const std::string path = (dir / "w.rddp").string();
  ModelSpec ten = small_spec();
  ten.num_classes = 10;
  ModelState<float> saved(ten);
  randomise(saved, 16);
  save_weights(path, saved);

  ModelSpec seven = small_spec();
  seven.num_classes = 7;
  ModelState<float> loaded(seven);
  LoadOptions options;
  options.reinit_classifier_on_mismatch = true;
  options.reinit_seed = 99;
  const LoadReport report = load_weights(path, loaded, options);
  CHECK(report.classifier_reinitialised);
  CHECK(report.file_spec.num_classes == 10);
  REQUIRE(report.actions.size() == 2);
  CHECK(contains(report.actions[1], "re-initialised the classifier for 7 classes (the file's has "
                                    "10)"));
  CHECK(contains(report.actions[1], "seed 99"));

  // The classifier is what a freshly initialised model with that seed has, and lies in
  // torchvision's U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = 8 features.
  ModelState<float> fresh(seven);
  init_torchvision(fresh, 99);
  const double bound = 1.0 / std::sqrt(8.0);
  for (const char* name : {"fc.weight", "fc.bias"}) {
    const TensorInfo& info = loaded.layout.at(name);
    for (size_t i = 0; i < info.numel; ++i) {
      CHECK(loaded.params[info.offset + i] == fresh.params[info.offset + i]);
      CHECK(std::abs(loaded.params[info.offset + i]) <= bound);
    }
  }
  // Everything else comes from the file.
  for (const TensorInfo& info : loaded.layout.tensors()) {
    if (info.name.rfind("fc.", 0) == 0) continue;
    const TensorInfo& source = saved.layout.at(info.name);
    CAPTURE(info.name);
    for (size_t i = 0; i < info.numel; ++i) {
      if (info.role == TensorRole::parameter)
        CHECK(loaded.params[info.offset + i] == saved.params[source.offset + i]);
      if (info.role == TensorRole::running_stat)
        CHECK(loaded.running[info.offset + i] == saved.running[source.offset + i]);
      if (info.role == TensorRole::batch_counter)
        CHECK(loaded.counters[info.offset + i] == saved.counters[source.offset + i]);
    }
  }
}

TEST_CASE("without metadata, the model is inferred from the tensor shapes") {
  for (Stem stem : {Stem::imagenet, Stem::cifar}) {
    ModelSpec spec;
    spec.stem = stem;
    spec.in_channels = stem == Stem::cifar ? 1 : 4;
    spec.num_classes = 17;
    spec.widths = {4, 6, 8, 10};
    spec.blocks = {3, 4, 6, 3};
    ModelState<float> state(spec);
    randomise(state, 17);
    TensorFile file;
    append_model_tensors(state, file);  // no metadata
    CHECK_FALSE(stored_model_spec(file).has_value());
    CHECK(spec_summary(infer_spec(file)) == spec_summary(spec));

    ModelState<float> loaded(spec);
    const LoadReport report = load_weights(file, loaded);
    CHECK(loaded.params == state.params);
    CHECK(spec_summary(report.file_spec) == spec_summary(spec));
  }

  // torchvision's own resnet18.
  ModelState<float> resnet18{ModelSpec{}};
  TensorFile file;
  append_model_tensors(resnet18, file);
  CHECK(spec_summary(infer_spec(file)) ==
        "stem=imagenet in_channels=3 num_classes=1000 widths=64,128,256,512 blocks=2,2,2,2");
}

TEST_CASE("what cannot be inferred or parsed is explained") {
  ModelState<float> state(small_spec());
  TensorFile file;
  append_model_tensors(state, file);

  TensorFile no_stem = file;
  remove_tensor(no_stem, "conv1.weight");
  CHECK_THROWS_WITH_AS(infer_spec(no_stem), doctest::Contains("no tensor 'conv1.weight'"), Error);

  TensorFile five_by_five = file;
  find_mutable(five_by_five, "conv1.weight")->shape = {4, 1, 5, 5};
  CHECK_THROWS_WITH_AS(infer_spec(five_by_five), doctest::Contains("7x7 (imagenet) and 3x3"),
                       Error);

  TensorFile bottleneck = file;
  const float value = 0.0f;
  bottleneck.tensors.push_back(TensorRecord::from_values("layer1.0.conv3.weight", {}, &value));
  CHECK_THROWS_WITH_AS(infer_spec(bottleneck), doctest::Contains("Bottleneck"), Error);

  TensorFile bad_metadata = weights_of(state);
  bad_metadata.metadata["model.widths"] = "4,8,8";
  CHECK_THROWS_WITH_AS(stored_model_spec(bad_metadata),
                       doctest::Contains("model.widths='4,8,8' should be four"), Error);
  bad_metadata.metadata["model.widths"] = "4,8,8,x";
  CHECK_THROWS_WITH_AS(stored_model_spec(bad_metadata), doctest::Contains("not an integer"), Error);
  bad_metadata.metadata.erase("model.widths");
  CHECK_THROWS_WITH_AS(stored_model_spec(bad_metadata), doctest::Contains("lacks model.widths"),
                       Error);
}

TEST_CASE("save_weights keeps its own metadata keys") {
  const fs::path dir = scratch_dir("extra");
  ModelState<float> state(small_spec());
  const std::string path = (dir / "w.rddp").string();
  CHECK_THROWS_WITH_AS(save_weights(path, state, {{"model.stem", "imagenet"}}),
                       doctest::Contains("'model.stem' is written by save_weights"), Error);
  CHECK_FALSE(fs::exists(path));
}
