// Writes the seed corpus of the tensor_file harness with the project's own writers, for the
// small model of tensor_target_spec(): the files a user hands to --init and --resume, in each
// form the readers treat differently. Run it again after a change to the file format:
//   build-fuzz/make_tensor_seeds tests/fuzz/corpus/tensor_file
#include <cstdio>
#include <filesystem>
#include <string>

#include "fuzz_targets.h"
#include "resnet_ddp/rng.h"

namespace {

using namespace rddp;
namespace fs = std::filesystem;

ModelState<float> trained_model(const ModelSpec& spec) {
  ModelState<float> model(spec);
  init_torchvision(model, 7);
  // Running statistics and counters as training leaves them, not as initialised.
  Rng rng(11);
  for (float& value : model.running) value = static_cast<float>(rng.uniform(0.1, 2.0));
  for (int64_t& counter : model.counters) counter = 120;
  return model;
}

// As a file from another tool: no model.* metadata, so the loader infers the model from the
// shapes; and f64 values, which it converts.
void write_foreign_weights(const fs::path& path, const ModelState<float>& model) {
  TensorFile file;
  append_model_tensors(model, file);
  for (TensorRecord& record : file.tensors) {
    if (record.dtype != DType::f32) continue;
    const std::vector<float> values = record.values<float>();
    const std::vector<double> wide(values.begin(), values.end());
    record = TensorRecord::from_values(record.name, record.shape, wide.data());
  }
  file.metadata["converted_from"] = "resnet18-tiny.pth";
  write_tensor_file(path.string(), file);
}

OptimizerState optimizer_state(const ModelState<float>& model, bool two_moments) {
  OptimizerState state;
  state.step_count = 240;
  Rng rng(13);
  state.first_moment.resize(model.params.size());
  for (float& value : state.first_moment) value = static_cast<float>(rng.uniform(-1e-2, 1e-2));
  if (two_moments) {
    state.second_moment.resize(model.params.size());
    for (float& value : state.second_moment) value = static_cast<float>(rng.uniform(0, 1e-4));
  }
  return state;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    const fs::path out = argv[1];
    fs::create_directories(out);
    const ModelSpec spec = fuzz::tensor_target_spec();
    const ModelState<float> model = trained_model(spec);
    save_weights((out / "weights.rddp").string(), model);

    ModelSpec other_classes = spec;
    other_classes.num_classes = 3;
    save_weights((out / "weights-3-classes.rddp").string(), trained_model(other_classes));
    write_foreign_weights(out / "weights-converted-f64.rddp", model);

    TrainPosition position;
    position.epoch = 2;
    position.step_in_epoch = 40;
    position.global_step = 240;
    position.world_size = 2;
    position.batch_size = 64;
    position.seed = 5;
    const fs::path scratch = out / "checkpoints.tmp";
    for (const OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::sgd}) {
      OptimizerConfig config;
      config.kind = kind;
      config.momentum = kind == OptimizerKind::sgd ? 0.9 : 0.0;
      const std::string written = save_checkpoint(scratch.string(), model, config,
                                                  optimizer_state(model, kind == OptimizerKind::adamw),
                                                  position, 1);
      fs::rename(written, out / (std::string("checkpoint-") + to_string(kind) + ".rddp"));
    }
    fs::remove_all(scratch);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "make_tensor_seeds: %s\n", error.what());
    return 1;
  }
  return 0;
}
