// Checkpoints carry fp16's loss scale and growth tracker (GradScaler's "scale" and
// "_growth_tracker") exactly, leave them out for the other precisions, and refuse values no run
// writes. The CUDA engine's save_state/load_state around them is covered by the GPU tests.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <unistd.h>

#include "resnet_ddp/error.h"
#include "resnet_ddp/train/checkpoint.h"

using namespace rddp;
namespace fs = std::filesystem;

namespace {

ModelSpec small_spec() {
  ModelSpec spec;
  spec.stem = Stem::cifar;
  spec.in_channels = 1;
  spec.num_classes = 3;
  spec.widths = {2, 2, 2, 2};
  return spec;
}

// A fresh directory per test, removed afterwards.
struct ScratchDir {
  explicit ScratchDir(const std::string& name)
      : path((fs::temp_directory_path() /
              ("rddp_ckpt_scale_" + name + "_" + std::to_string(::getpid())))
                 .string()) {
    fs::remove_all(path);
  }
  ~ScratchDir() { fs::remove_all(path); }
  std::string path;
};

// Saves an AdamW checkpoint of a fresh small model with `saved`, loads it back.
OptimizerState round_trip(const std::string& dir, const OptimizerState& saved) {
  const ModelSpec spec = small_spec();
  ModelState<float> model(spec);
  OptimizerConfig config;  // AdamW
  TrainPosition position;
  position.global_step = saved.step_count;
  position.batch_size = 2;
  save_checkpoint(dir, model, config, saved, position, 1);
  ModelState<float> loaded_model(spec);
  OptimizerState loaded;
  load_latest_checkpoint(dir, loaded_model, config, loaded);
  return loaded;
}

OptimizerState adamw_state(const ModelSpec& spec, int64_t step_count) {
  const ModelState<float> model(spec);
  OptimizerState state;
  state.step_count = step_count;
  state.first_moment.assign(model.layout.parameter_elements(), 0.25f);
  state.second_moment.assign(model.layout.parameter_elements(), 0.5f);
  return state;
}

}  // namespace

TEST_CASE("a checkpoint keeps the loss scale and its growth tracker bit for bit") {
  ScratchDir dir("exact");
  // A power of two as dynamic scaling makes them, and values that need all nine digits.
  for (const float scale : {32768.0f, 0.1f, 3.0517578125e-05f, 1.17549435e-38f, 3.40282347e+38f}) {
    CAPTURE(scale);
    OptimizerState saved = adamw_state(small_spec(), 42);
    saved.has_loss_scale = true;
    saved.loss_scale = {scale, 1999};
    const OptimizerState loaded = round_trip(dir.path, saved);
    CHECK(loaded.has_loss_scale);
    CHECK(loaded.loss_scale.scale == scale);
    CHECK(loaded.loss_scale.growth_tracker == 1999);
    CHECK(loaded.step_count == 42);
  }
}

TEST_CASE("a checkpoint of another precision carries no loss scale") {
  ScratchDir dir("absent");
  const OptimizerState loaded = round_trip(dir.path, adamw_state(small_spec(), 7));
  CHECK_FALSE(loaded.has_loss_scale);
  CHECK(loaded.step_count == 7);
}

TEST_CASE("a loss scale no run writes makes the checkpoint unusable, with the reason") {
  for (const loss_scale::State bad : {loss_scale::State{0.0f, 0}, loss_scale::State{-2.0f, 0},
                                      loss_scale::State{1.0f / 0.0f, 0},
                                      loss_scale::State{1024.0f, -1}}) {
    CAPTURE(bad.scale);
    CAPTURE(bad.growth_tracker);
    ScratchDir dir("bad");
    OptimizerState saved = adamw_state(small_spec(), 3);
    saved.has_loss_scale = true;
    saved.loss_scale = bad;
    CHECK_THROWS_WITH_AS(round_trip(dir.path, saved), doctest::Contains("its loss scale"), Error);
  }
}
