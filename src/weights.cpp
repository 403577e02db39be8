#include "resnet_ddp/weights.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <sstream>

#include "resnet_ddp/error.h"

namespace rddp {

namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

bool is_classifier(const std::string& name) { return starts_with(name, "fc."); }

std::string join_ints(const std::array<int, 4>& values) {
  std::ostringstream out;
  for (size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
  return out.str();
}

// Names in torchvision's state_dict order: modules in registration order (conv1, bn1,
// layer1..layer4 with each block's conv1, bn1, conv2, bn2, downsample, then fc), and within a
// BatchNorm its parameters before its buffers.
std::vector<std::string> state_dict_names(const NetDesc& net) {
  std::vector<std::string> names;
  auto conv = [&](const ConvDesc& desc) { names.push_back(desc.name + ".weight"); };
  auto batchnorm = [&](const BatchNormDesc& desc) {
    for (const char* suffix :
         {".weight", ".bias", ".running_mean", ".running_var", ".num_batches_tracked"})
      names.push_back(desc.name + suffix);
  };
  conv(net.stem_conv);
  batchnorm(net.stem_bn);
  for (const BasicBlockDesc& block : net.blocks) {
    conv(block.conv1);
    batchnorm(block.bn1);
    conv(block.conv2);
    batchnorm(block.bn2);
    if (block.has_downsample) {
      conv(block.downsample_conv);
      batchnorm(block.downsample_bn);
    }
  }
  names.push_back(net.fc.name + ".weight");
  names.push_back(net.fc.name + ".bias");
  return names;
}

int parse_int(const TensorFile& file, const std::string& key, const std::string& text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty())
    fail(file.describe_source(), ": metadata ", key, "='", text, "' is not an integer");
  return value;
}

std::array<int, 4> parse_four_ints(const TensorFile& file, const std::string& key,
                                   const std::string& text) {
  std::array<int, 4> values{};
  size_t start = 0;
  for (size_t i = 0; i < 4; ++i) {
    const size_t comma = text.find(',', start);
    const bool last = i == 3;
    if (last != (comma == std::string::npos))
      fail(file.describe_source(), ": metadata ", key, "='", text,
           "' should be four comma-separated integers, e.g. 64,128,256,512");
    values[i] = parse_int(file, key, text.substr(start, last ? std::string::npos : comma - start));
    start = comma + 1;
  }
  return values;
}

const TensorRecord& require_tensor(const TensorFile& file, const std::string& name,
                                   size_t ndim) {
  const TensorRecord* record = file.find(name);
  if (!record)
    fail("cannot tell which model ", file.describe_source(), " holds: it has no tensor '", name,
         "' (is it a torchvision ResNet state_dict?)");
  if (record->shape.size() != ndim)
    fail("cannot tell which model ", file.describe_source(), " holds: '", name, "' has shape ",
         shape_to_string(record->shape), ", expected ", ndim, " dimensions");
  return *record;
}

int dim_as_int(const TensorFile& file, const TensorRecord& record, size_t axis) {
  const int64_t dim = record.shape[axis];
  if (dim < 1 || dim > (1 << 30))
    fail(file.describe_source(), ": '", record.name, "' has an unusable shape ",
         shape_to_string(record.shape));
  return static_cast<int>(dim);
}

bool same_architecture(const ModelSpec& a, const ModelSpec& b) {
  return a.stem == b.stem && a.in_channels == b.in_channels && a.widths == b.widths &&
         a.blocks == b.blocks;
}

// What the user should change so that the model matches the file. The model is built from the
// data (its channels and classes) and the command line (its stem), so each fix names one of
// those, never a setting the command line lacks.
[[noreturn]] void fail_spec_mismatch(const TensorFile& file, const ModelSpec& found,
                                     const ModelSpec& wanted) {
  std::ostringstream message;
  message << file.describe_source() << " holds weights for " << spec_summary(found)
          << ", but the model is " << spec_summary(wanted) << ".";
  if (found.stem != wanted.stem) message << " Use --stem " << to_string(found.stem) << ".";
  if (found.in_channels != wanted.in_channels)
    message << " The data has " << wanted.in_channels << " channel"
            << (wanted.in_channels == 1 ? "" : "s") << " per image and the weights were trained on "
            << found.in_channels << ": use data of " << found.in_channels
            << " channels, or other weights.";
  if (found.num_classes != wanted.num_classes) {
    message << " The data has " << wanted.num_classes << " classes and the weights were trained for "
            << found.num_classes << ": ";
    if (same_architecture(found, wanted))
      message << "add --init-reset-classifier to load everything but the classifier (fc) and "
              << "start a new one for " << wanted.num_classes << " classes.";
    else
      message << "use data of " << found.num_classes << " classes, or other weights.";
  }
  if (found.widths != wanted.widths || found.blocks != wanted.blocks)
    message << " The weights are of another network (widths=" << join_ints(found.widths)
            << " blocks=" << join_ints(found.blocks) << ") than the one built (widths="
            << join_ints(wanted.widths) << " blocks=" << join_ints(wanted.blocks)
            << "): they cannot be loaded into it.";
  throw Error(message.str());
}

// Collects every problem before failing, so one run shows the user all of them.
class Problems {
 public:
  void add(std::string line) { lines_.push_back(std::move(line)); }
  void fail_if_any(const TensorFile& file) const {
    if (lines_.empty()) return;
    constexpr size_t kShown = 12;
    std::ostringstream message;
    message << "cannot load weights from " << file.describe_source() << ":";
    for (size_t i = 0; i < lines_.size() && i < kShown; ++i) message << "\n  " << lines_[i];
    if (lines_.size() > kShown) message << "\n  ... and " << lines_.size() - kShown << " more";
    message << "\nIs it a resnet_ddp weights file for this model? "
            << "scripts/torchvision_to_resnet_ddp.py converts torchvision state_dicts.";
    throw Error(message.str());
  }

 private:
  std::vector<std::string> lines_;
};

}  // namespace

std::string spec_summary(const ModelSpec& spec) {
  std::ostringstream out;
  out << "stem=" << to_string(spec.stem) << " in_channels=" << spec.in_channels
      << " num_classes=" << spec.num_classes << " widths=" << join_ints(spec.widths)
      << " blocks=" << join_ints(spec.blocks);
  return out.str();
}

void put_model_spec(const ModelSpec& spec, std::map<std::string, std::string>& metadata) {
  metadata[metadata_key::stem] = to_string(spec.stem);
  metadata[metadata_key::in_channels] = std::to_string(spec.in_channels);
  metadata[metadata_key::num_classes] = std::to_string(spec.num_classes);
  metadata[metadata_key::widths] = join_ints(spec.widths);
  metadata[metadata_key::blocks] = join_ints(spec.blocks);
}

std::optional<ModelSpec> stored_model_spec(const TensorFile& file) {
  const char* keys[] = {metadata_key::stem, metadata_key::in_channels, metadata_key::num_classes,
                        metadata_key::widths, metadata_key::blocks};
  size_t present = 0;
  for (const char* key : keys) present += file.metadata.count(key);
  if (present == 0) return std::nullopt;
  for (const char* key : keys)
    if (!file.metadata.count(key))
      fail(file.describe_source(), ": its metadata describes the model but lacks ", key,
           "; re-save or re-convert the file");
  ModelSpec spec;
  try {
    spec.stem = parse_stem(file.metadata.at(metadata_key::stem));
  } catch (const Error& error) {
    fail(file.describe_source(), ": metadata ", metadata_key::stem, ": ", error.what());
  }
  spec.in_channels =
      parse_int(file, metadata_key::in_channels, file.metadata.at(metadata_key::in_channels));
  spec.num_classes =
      parse_int(file, metadata_key::num_classes, file.metadata.at(metadata_key::num_classes));
  spec.widths = parse_four_ints(file, metadata_key::widths, file.metadata.at(metadata_key::widths));
  spec.blocks = parse_four_ints(file, metadata_key::blocks, file.metadata.at(metadata_key::blocks));
  try {
    spec.validate();
  } catch (const Error& error) {
    fail(file.describe_source(), ": its metadata describes an impossible model: ", error.what());
  }
  return spec;
}

ModelSpec infer_spec(const TensorFile& file) {
  ModelSpec spec;
  const TensorRecord& stem_conv = require_tensor(file, "conv1.weight", 4);
  const int64_t kernel = stem_conv.shape[2];
  if (kernel == 7 && stem_conv.shape[3] == 7) {
    spec.stem = Stem::imagenet;
  } else if (kernel == 3 && stem_conv.shape[3] == 3) {
    spec.stem = Stem::cifar;
  } else {
    fail(file.describe_source(), ": conv1.weight has shape ", shape_to_string(stem_conv.shape),
         "; resnet_ddp builds 7x7 (imagenet) and 3x3 (cifar) stem convolutions");
  }
  spec.in_channels = dim_as_int(file, stem_conv, 1);
  if (file.find("layer1.0.conv3.weight"))
    fail(file.describe_source(), " holds a Bottleneck ResNet (ResNet-50/101/152); resnet_ddp ",
         "builds BasicBlock ResNets (ResNet-18/34)");
  for (int stage = 0; stage < 4; ++stage) {
    const std::string layer = "layer" + std::to_string(stage + 1) + ".";
    const TensorRecord& first = require_tensor(file, layer + "0.conv1.weight", 4);
    spec.widths[stage] = dim_as_int(file, first, 0);
    int blocks = 0;
    while (file.find(layer + std::to_string(blocks) + ".conv1.weight")) ++blocks;
    spec.blocks[stage] = blocks;
  }
  spec.num_classes = dim_as_int(file, require_tensor(file, "fc.weight", 2), 0);
  return spec;
}

ModelSpec file_model_spec(const TensorFile& file) {
  const std::optional<ModelSpec> stored = stored_model_spec(file);
  return stored ? *stored : infer_spec(file);
}

void append_model_tensors(const ModelState<float>& state, TensorFile& file) {
  for (const std::string& name : state_dict_names(state.net)) {
    const TensorInfo& info = state.layout.at(name);
    switch (info.role) {
      case TensorRole::parameter:
        file.tensors.push_back(
            TensorRecord::from_values(name, info.shape, state.params.data() + info.offset));
        break;
      case TensorRole::running_stat:
        file.tensors.push_back(
            TensorRecord::from_values(name, info.shape, state.running.data() + info.offset));
        break;
      case TensorRole::batch_counter:
        file.tensors.push_back(
            TensorRecord::from_values(name, info.shape, state.counters.data() + info.offset));
        break;
    }
  }
}

void save_weights(const std::string& path, const ModelState<float>& state,
                  const std::map<std::string, std::string>& extra_metadata) {
  TensorFile file;
  file.metadata[metadata_key::kind] = "weights";
  put_model_spec(state.spec, file.metadata);
  for (const auto& [key, value] : extra_metadata)
    if (!file.metadata.emplace(key, value).second)
      fail("cannot save weights to '", path, "': metadata key '", key,
           "' is written by save_weights itself");
  append_model_tensors(state, file);
  write_tensor_file(path, file);
}

LoadReport load_weights(const std::string& path, ModelState<float>& state,
                        const LoadOptions& options) {
  return load_weights(read_tensor_file(path), state, options);
}

std::string spec_differences(const ModelSpec& file, const ModelSpec& model) {
  std::ostringstream out;
  const auto differ = [&](const char* what, const std::string& in_file, const std::string& in_model) {
    if (in_file == in_model) return;
    out << (out.tellp() > 0 ? ", " : "") << what << " " << in_file << " in the file, " << in_model
        << " here";
  };
  differ("stem", to_string(file.stem), to_string(model.stem));
  differ("in_channels", std::to_string(file.in_channels), std::to_string(model.in_channels));
  differ("num_classes", std::to_string(file.num_classes), std::to_string(model.num_classes));
  differ("widths", join_ints(file.widths), join_ints(model.widths));
  differ("blocks", join_ints(file.blocks), join_ints(model.blocks));
  return out.str();
}

LoadReport load_weights(const TensorFile& file, ModelState<float>& state,
                        const LoadOptions& options) {
  LoadReport report;
  report.file_spec = file_model_spec(file);
  const ModelSpec& wanted = state.spec;
  const bool classes_differ = report.file_spec.num_classes != wanted.num_classes;
  if (!same_architecture(report.file_spec, wanted) ||
      (classes_differ && !options.reinit_classifier_on_mismatch))
    fail_spec_mismatch(file, report.file_spec, wanted);
  const bool reinit = classes_differ;

  auto skipped = [&](const std::string& name) {
    for (const std::string& prefix : options.skip_prefixes)
      if (starts_with(name, prefix)) return true;
    return reinit && is_classifier(name);
  };

  // First check everything, so that a failed load leaves the model as it was.
  Problems problems;
  for (const TensorRecord& record : file.tensors)
    if (!skipped(record.name) && !state.layout.find(record.name))
      problems.add("unexpected tensor '" + record.name + "' " + shape_to_string(record.shape) +
                   ": this model has no tensor of that name");
  std::vector<std::pair<const TensorInfo*, const TensorRecord*>> matched;
  for (const TensorInfo& info : state.layout.tensors()) {
    if (skipped(info.name)) continue;
    const TensorRecord* record = file.find(info.name);
    if (!record) {
      problems.add("missing tensor '" + info.name + "' " + shape_to_string(info.shape));
      continue;
    }
    if (record->shape != info.shape) {
      problems.add("tensor '" + info.name + "' has shape " + shape_to_string(record->shape) +
                   ", but the model expects " + shape_to_string(info.shape));
      continue;
    }
    const bool counter = info.role == TensorRole::batch_counter;
    const bool dtype_ok = counter ? record->dtype == DType::i64
                                  : record->dtype == DType::f32 || record->dtype == DType::f64;
    if (!dtype_ok) {
      problems.add("tensor '" + info.name + "' is stored as " + to_string(record->dtype) +
                   ", but the model reads " + (counter ? "i64" : "f32 or f64") + " there");
      continue;
    }
    matched.emplace_back(&info, record);
  }
  problems.fail_if_any(file);

  size_t converted = 0, parameters = 0, buffers = 0;
  for (const auto& [info, record] : matched) {
    if (info->role == TensorRole::batch_counter) {
      ++buffers;
      std::memcpy(state.counters.data() + info->offset, record->bytes.data(), sizeof(int64_t));
      continue;
    }
    float* target;
    if (info->role == TensorRole::parameter) {
      ++parameters;
      target = state.params.data() + info->offset;
    } else {
      ++buffers;
      target = state.running.data() + info->offset;
    }
    if (record->dtype == DType::f32) {
      std::memcpy(target, record->bytes.data(), record->bytes.size());
    } else {
      ++converted;
      const std::vector<double> values = record->values<double>();
      for (size_t i = 0; i < values.size(); ++i) target[i] = static_cast<float>(values[i]);
    }
  }
  report.actions.push_back("loaded " + std::to_string(parameters) + " parameter tensors and " +
                           std::to_string(buffers) + " BatchNorm buffers from " +
                           file.describe_source() + " (" + spec_summary(report.file_spec) + ")");
  if (converted > 0)
    report.actions.push_back("converted " + std::to_string(converted) +
                             " tensors from f64 to f32");

  if (reinit) {
    // The same values init_torchvision(state, seed) gives these tensors: it draws each tensor
    // from its own (seed, name) stream, so a fresh model initialised with the seed has them.
    ModelState<float> fresh(wanted);
    init_torchvision(fresh, options.reinit_seed);
    for (const char* name : {"fc.weight", "fc.bias"}) {
      const TensorInfo& info = state.layout.at(name);
      std::copy_n(fresh.params.begin() + info.offset, info.numel,
                  state.params.begin() + info.offset);
    }
    report.classifier_reinitialised = true;
    std::ostringstream line;
    line << "re-initialised the classifier for " << wanted.num_classes
         << " classes (the file's has " << report.file_spec.num_classes
         << "): fc.weight and fc.bias drawn from U(-b, b), b = 1/sqrt("
         << state.net.fc.in_features << "), seed " << options.reinit_seed;
    report.actions.push_back(line.str());
  }
  return report;
}

}  // namespace rddp
