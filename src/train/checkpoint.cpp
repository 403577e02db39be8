#include "resnet_ddp/train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>

#include "resnet_ddp/error.h"
#include "resnet_ddp/printable.h"
#include "resnet_ddp/tensor_file.h"
#include "resnet_ddp/weights.h"

namespace rddp {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "checkpoint-";
constexpr const char* kSuffix = ".rddp";
constexpr const char* kOptimizerPrefix = "optimizer.";
// fp16 loss scaling: torch.cuda.amp.GradScaler.state_dict()'s names for what resume needs.
constexpr const char* kScaleKey = "grad_scaler.scale";
constexpr const char* kGrowthTrackerKey = "grad_scaler._growth_tracker";

// PyTorch's names for the optimizer state of a parameter.
std::vector<const char*> moment_names(OptimizerKind kind) {
  if (kind == OptimizerKind::adamw) return {"exp_avg", "exp_avg_sq"};
  return {"momentum_buffer"};
}

const std::vector<float>& moment(const OptimizerState& state, size_t which) {
  return which == 0 ? state.first_moment : state.second_moment;
}
std::vector<float>& moment(OptimizerState& state, size_t which) {
  return which == 0 ? state.first_moment : state.second_moment;
}

int64_t parse_step(const std::string& filename) {
  const std::string prefix = kPrefix, suffix = kSuffix;
  if (filename.size() <= prefix.size() + suffix.size() || filename.rfind(prefix, 0) != 0 ||
      filename.compare(filename.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const std::string digits = filename.substr(prefix.size(), filename.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  // Too many digits for a step: some other file (std::stoll would throw).
  int64_t step = -1;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  return error == std::errc() && end == digits.data() + digits.size() ? step : -1;
}

int64_t metadata_int(const TensorFile& file, const std::string& key) {
  const auto it = file.metadata.find(key);
  if (it == file.metadata.end()) fail(file.describe_source(), ": not a checkpoint (no '", key, "')");
  try {
    size_t used = 0;
    const long long value = std::stoll(it->second, &used);
    if (used == it->second.size()) return value;
  } catch (const std::exception&) {
  }
  fail(file.describe_source(), ": metadata '", key, "' is '", it->second, "', not a whole number");
}

// "%.9g" and back: nine significant digits give every float back exactly.
std::string float_text(float value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", static_cast<double>(value));
  return text;
}

float metadata_float(const TensorFile& file, const std::string& key) {
  const auto it = file.metadata.find(key);
  if (it == file.metadata.end()) fail(file.describe_source(), ": no '", key, "'");
  try {
    size_t used = 0;
    const float value = std::stof(it->second, &used);
    if (used == it->second.size()) return value;
  } catch (const std::exception&) {
  }
  fail(file.describe_source(), ": metadata '", key, "' is '", it->second, "', not a number");
}

// A checkpoint this user may not open may well be whole: refused, not passed over.
void require_readable(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return;
  }
  const int err = errno;
  if (err != EACCES && err != EPERM) return;  // read_tensor_file says what else is wrong
  fail("--resume: cannot read '", printable(path), "': ", std::strerror(err),
       ". Give this user read access to it, or move it out of the directory to resume from the "
       "one before (resuming from an older checkpoint now would lose its progress, and this run's "
       "checkpoints would replace it)");
}

}  // namespace

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    const int64_t step = parse_step(entry.path().filename().string());
    if (step >= 0 && entry.is_regular_file(error)) found.emplace_back(step, entry.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> paths;
  for (auto& [step, path] : found) paths.push_back(std::move(path));
  return paths;
}

std::vector<std::string> remove_stale_temporaries(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) == 0 &&
        name.find(std::string(kSuffix) + ".tmp.") != std::string::npos &&
        entry.is_regular_file(error) && fs::remove(entry.path(), error))
      removed.push_back(name);
  }
  return removed;
}

std::string save_checkpoint(const std::string& dir, const ModelState<float>& model,
                            const OptimizerConfig& optimizer_config, const OptimizerState& optimizer,
                            const TrainPosition& position, int keep) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) fail("--checkpoint-dir '", printable(dir), "': cannot create it: ", error.message());

  TensorFile file;
  file.metadata[metadata_key::kind] = "checkpoint";
  put_model_spec(model.spec, file.metadata);
  file.metadata["optimizer.kind"] = to_string(optimizer_config.kind);
  file.metadata["optimizer.step_count"] = std::to_string(optimizer.step_count);
  if (optimizer.has_loss_scale) {
    file.metadata[kScaleKey] = float_text(optimizer.loss_scale.scale);
    file.metadata[kGrowthTrackerKey] = std::to_string(optimizer.loss_scale.growth_tracker);
  }
  file.metadata["train.epoch"] = std::to_string(position.epoch);
  file.metadata["train.step_in_epoch"] = std::to_string(position.step_in_epoch);
  file.metadata["train.global_step"] = std::to_string(position.global_step);
  file.metadata["train.world_size"] = std::to_string(position.world_size);
  file.metadata["train.batch_size"] = std::to_string(position.batch_size);
  file.metadata["train.seed"] = std::to_string(position.seed);
  file.metadata["train.steps_per_epoch"] = std::to_string(position.steps_per_epoch);
  if (!position.run_settings.empty()) file.metadata["train.settings"] = position.run_settings;
  append_model_tensors(model, file);
  const std::vector<const char*> moments = moment_names(optimizer_config.kind);
  for (size_t which = 0; which < moments.size(); ++which) {
    const std::vector<float>& buffer = moment(optimizer, which);
    if (buffer.empty()) continue;  // SGD without momentum keeps none
    for (const TensorInfo& info : model.layout.tensors())
      if (info.role == TensorRole::parameter)
        file.tensors.push_back(TensorRecord::from_values(std::string(kOptimizerPrefix) + moments[which] + "." + info.name,
                                                         info.shape, buffer.data() + info.offset));
  }

  char name[64];
  std::snprintf(name, sizeof(name), "%s%010lld%s", kPrefix, static_cast<long long>(position.global_step), kSuffix);
  const std::string path = (fs::path(dir) / name).string();
  write_tensor_file(path, file);

  const std::vector<std::string> all = list_checkpoints(dir);
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < all.size(); ++i) fs::remove(all[i], error);
  return path;
}

ResumedCheckpoint load_latest_checkpoint(const std::string& dir, ModelState<float>& model,
                                         const OptimizerConfig& optimizer_config, OptimizerState& optimizer) {
  if (!fs::is_directory(dir))
    fail("--resume: checkpoint directory '", printable(dir), "' does not exist");
  ResumedCheckpoint result;
  for (const std::string& path : list_checkpoints(dir)) {
    require_readable(path);
    try {
      const TensorFile file = read_tensor_file(path);
      // Another model's checkpoint would first fail on the size of an optimizer tensor, which
      // says nothing of the cause: the models are compared before any tensor is read.
      const std::string differs = spec_differences(file_model_spec(file), model.spec);
      if (!differs.empty())
        fail(path, " belongs to another model (", differs, "): resume with the data and --stem it ",
             "was written with, or give this run another --checkpoint-dir");
      const auto kind = file.metadata.find("optimizer.kind");
      if (kind == file.metadata.end() || kind->second != to_string(optimizer_config.kind))
        fail(printable(path), " belongs to another optimizer: it was written with --optimizer ",
             kind == file.metadata.end() ? std::string("?") : kind->second,
             ", this run uses --optimizer ", to_string(optimizer_config.kind),
             ": resume with the optimizer it was written with, or give this run another ",
             "--checkpoint-dir");
      TrainPosition position;
      position.epoch = metadata_int(file, "train.epoch");
      position.step_in_epoch = metadata_int(file, "train.step_in_epoch");
      position.global_step = metadata_int(file, "train.global_step");
      position.world_size = metadata_int(file, "train.world_size");
      position.batch_size = metadata_int(file, "train.batch_size");
      position.seed = static_cast<uint64_t>(metadata_int(file, "train.seed"));
      if (file.metadata.count("train.steps_per_epoch") != 0)
        position.steps_per_epoch = metadata_int(file, "train.steps_per_epoch");
      if (const auto settings = file.metadata.find("train.settings");
          settings != file.metadata.end())
        position.run_settings = settings->second;

      OptimizerState loaded;
      loaded.step_count = metadata_int(file, "optimizer.step_count");
      // Training resumes counting from these: values no run writes would start it at a
      // negative step, or describe a job of no ranks.
      if (position.epoch < 0 || position.step_in_epoch < 0 || position.global_step < 0 ||
          position.world_size < 1 || position.batch_size < 1 || loaded.step_count < 0 ||
          position.steps_per_epoch < 0)
        fail(printable(path), ": its position in training cannot be: epoch ", position.epoch,
             ", step ", position.step_in_epoch, " of it, global step ", position.global_step, ", ",
             position.world_size, " rank(s) of batch ", position.batch_size, ", optimizer step ",
             loaded.step_count, ". It was not written by resnet_ddp, or edited since");
      // Written by fp16 runs only; the other precisions ignore it, and an fp16 run resumed from
      // a checkpoint without it starts the scale afresh.
      if (file.metadata.count(kScaleKey) != 0) {
        loaded.has_loss_scale = true;
        loaded.loss_scale.scale = metadata_float(file, kScaleKey);
        const int64_t tracker = metadata_int(file, kGrowthTrackerKey);
        if (!(loaded.loss_scale.scale > 0.0f) || !std::isfinite(loaded.loss_scale.scale) || tracker < 0 ||
            tracker > std::numeric_limits<int32_t>::max())
          fail(printable(path), ": its loss scale ", loaded.loss_scale.scale,
               " with growth tracker ", tracker,
               " cannot be (the scale is finite and > 0, the tracker a count >= 0). It was not "
               "written by "
               "resnet_ddp, or edited since");
        loaded.loss_scale.growth_tracker = static_cast<int32_t>(tracker);
      }
      const std::vector<const char*> moments = moment_names(optimizer_config.kind);
      const bool keeps_moments = optimizer_config.kind == OptimizerKind::adamw || optimizer_config.momentum != 0;
      for (size_t which = 0; keeps_moments && which < moments.size(); ++which) {
        std::vector<float>& buffer = moment(loaded, which);
        buffer.assign(model.layout.parameter_elements(), 0.0f);
        for (const TensorInfo& info : model.layout.tensors()) {
          if (info.role != TensorRole::parameter) continue;
          const std::string name = std::string(kOptimizerPrefix) + moments[which] + "." + info.name;
          const TensorRecord* record = file.find(name);
          if (!record) fail(printable(path), ": no optimizer tensor '", name, "'");
          const std::vector<float> values = record->values<float>();
          if (values.size() != info.numel)
            fail(printable(path), ": optimizer tensor '", name, "' has the wrong size");
          std::copy(values.begin(), values.end(), buffer.begin() + info.offset);
        }
      }
      LoadOptions options;
      options.skip_prefixes = {kOptimizerPrefix};
      load_weights(file, model, options);  // checks everything before it changes the model
      optimizer = std::move(loaded);
      result.path = path;
      result.position = position;
      return result;
    } catch (const TensorFileTooNew& newer) {
      fail("--resume: ", printable(newer.what()),
           " (resuming from an older checkpoint now would lose its "
           "progress, and this run's checkpoints would replace it)");
    } catch (const Error& error) {
      result.notes.push_back("passed over " + printable(path) + ": " + printable(error.what()));
    }
  }
  std::string tried;
  for (const std::string& note : result.notes) tried += "\n  " + note;
  fail("--resume: no usable checkpoint in '", printable(dir), "'",
       tried.empty() ? " (it holds none)" : ":" + tried);
}

}  // namespace rddp
