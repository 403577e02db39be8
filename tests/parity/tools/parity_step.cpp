// Runs one training step of the CPU executor on a case written by test_resnet_parity.py and
// writes everything PyTorch is compared on: logits, loss, every gradient, the BatchNorm
// buffers after the step, and the parameters after one AdamW and one SGD step.
//   parity_step CASE OUT float|double
#include <cstdio>
#include <string>
#include <vector>

#include "resnet_ddp/cpu/executor.h"
#include "resnet_ddp/cpu/softmax_xent.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/optimizer.h"
#include "resnet_ddp/tensor_file.h"

using namespace rddp;

namespace {

const std::string& meta(const TensorFile& file, const std::string& key) {
  auto it = file.metadata.find(key);
  if (it == file.metadata.end()) fail(file.describe_source(), ": no metadata '", key, "'");
  return it->second;
}

const TensorRecord& tensor(const TensorFile& file, const std::string& name) {
  const TensorRecord* record = file.find(name);
  if (!record) fail(file.describe_source(), ": no tensor '", name, "'");
  return *record;
}

template <typename T>
std::vector<T> as(const TensorRecord& record) {
  std::vector<T> out;
  if (record.dtype == DType::f32) {
    for (float v : record.values<float>()) out.push_back(static_cast<T>(v));
  } else if (record.dtype == DType::i64) {
    for (int64_t v : record.values<int64_t>()) out.push_back(static_cast<T>(v));
  } else {
    fail("tensor '", record.name, "' holds ", to_string(record.dtype), ", expected f32 or i64");
  }
  return out;
}

template <typename T>
void add_output(TensorFile& out, const std::string& name, std::vector<int64_t> shape, const T* values) {
  // Written as f64 whatever T is, so the comparison sees our values exactly.
  std::vector<double> wide(values, values + shape_numel(shape));
  out.tensors.push_back(TensorRecord::from_values(name, std::move(shape), wide.data()));
}

template <typename T>
int run(const TensorFile& case_file, const std::string& out_path) {
  ModelSpec spec;
  spec.stem = parse_stem(meta(case_file, "stem"));
  spec.in_channels = std::stoi(meta(case_file, "in_channels"));
  spec.num_classes = std::stoi(meta(case_file, "num_classes"));
  ModelState<T> state(spec);
  for (const TensorInfo& info : state.layout.tensors()) {
    const std::vector<T> values = as<T>(tensor(case_file, info.name));
    if (values.size() != info.numel) fail("tensor '", info.name, "' has the wrong size");
    if (info.role == TensorRole::parameter)
      std::copy(values.begin(), values.end(), state.params.begin() + info.offset);
    else if (info.role == TensorRole::running_stat)
      std::copy(values.begin(), values.end(), state.running.begin() + info.offset);
    else
      state.counters[info.offset] = static_cast<int64_t>(values[0]);
  }

  const TensorRecord& input_record = tensor(case_file, "input");
  const int batch = static_cast<int>(input_record.shape.at(0));
  const int height = static_cast<int>(input_record.shape.at(2));
  const int width = static_cast<int>(input_record.shape.at(3));
  const std::vector<T> input = as<T>(input_record);
  std::vector<int32_t> labels;
  for (int64_t label : tensor(case_file, "labels").values<int64_t>())
    labels.push_back(static_cast<int32_t>(label));
  const T smoothing = static_cast<T>(std::stod(meta(case_file, "label_smoothing")));

  cpu::Executor<T> executor(state, batch, height, width);
  const T* logits = executor.forward(input.data(), batch, true);
  std::vector<T> dlogits(static_cast<size_t>(batch) * spec.num_classes);
  const cpu::XentResult loss = cpu::softmax_cross_entropy(logits, labels.data(), batch,
                                                          spec.num_classes, smoothing, dlogits.data());

  TensorFile out;
  add_output(out, "logits", {batch, spec.num_classes}, logits);
  add_output(out, "loss", {}, &loss.loss);
  executor.backward(dlogits.data());
  for (const TensorInfo& info : state.layout.tensors()) {
    if (info.role == TensorRole::parameter) {
      add_output(out, "grad." + info.name, info.shape, state.grads.data() + info.offset);
    } else if (info.role == TensorRole::running_stat) {
      add_output(out, "buffer." + info.name, info.shape, state.running.data() + info.offset);
    } else {
      add_output(out, "buffer." + info.name, info.shape, &state.counters[info.offset]);
    }
  }

  OptimizerConfig adamw;
  adamw.kind = OptimizerKind::adamw;
  adamw.lr = std::stod(meta(case_file, "adamw.lr"));
  adamw.beta1 = std::stod(meta(case_file, "adamw.beta1"));
  adamw.beta2 = std::stod(meta(case_file, "adamw.beta2"));
  adamw.eps = std::stod(meta(case_file, "adamw.eps"));
  adamw.weight_decay = std::stod(meta(case_file, "adamw.weight_decay"));
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::sgd;
  sgd.lr = std::stod(meta(case_file, "sgd.lr"));
  sgd.momentum = std::stod(meta(case_file, "sgd.momentum"));
  sgd.nesterov = meta(case_file, "sgd.nesterov") == "1";
  sgd.weight_decay = std::stod(meta(case_file, "sgd.weight_decay"));
  for (const auto& [label, config] : {std::pair{"adamw", adamw}, std::pair{"sgd", sgd}}) {
    std::vector<T> params = state.params;
    CpuOptimizer<T> optimizer(config, params.size());
    optimizer.step(params.data(), state.grads.data(), config.lr);
    for (const TensorInfo& info : state.layout.tensors())
      if (info.role == TensorRole::parameter)
        add_output(out, std::string(label) + "." + info.name, info.shape, params.data() + info.offset);
  }
  write_tensor_file(out_path, out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: parity_step CASE OUT float|double\n");
    return 2;
  }
  try {
    const TensorFile case_file = read_tensor_file(argv[1]);
    const std::string precision = argv[3];
    if (precision == "double") return run<double>(case_file, argv[2]);
    if (precision == "float") return run<float>(case_file, argv[2]);
    fail("precision must be float or double, got '", precision, "'");
  } catch (const Error& error) {
    std::fprintf(stderr, "parity_step: %s\n", error.what());
    return 1;
  }
}
