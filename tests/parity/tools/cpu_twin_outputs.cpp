// Runs one of our CPU twins on inputs from a file and writes what it computes, so that the
// parity scripts can compare it with PyTorch:
//   cpu_twin_outputs adamw|sgd IN OUT elements=N lrs=a,b,c [weight_decay= beta1= beta2= eps=
//                    momentum= nesterov=0|1 no_decay_chunks=i,j,...]
//     IN: N float32 parameters, then N float32 gradients per learning rate (one step each).
//     OUT: the N parameters after the last step, then each moment buffer the optimizer keeps.
//     no_decay_chunks: the chunks of 64 elements that take no weight decay
//     (include/resnet_ddp/kernel_math/weight_decay.h), as a param group of weight_decay 0 in PyTorch.
//   cpu_twin_outputs xent IN OUT batch=B classes=C smoothing=eps
//     IN: B*C float32 logits, then B int32 labels.
//     OUT: the mean loss (float64), the top-1 and top-5 correct counts (int64), then B*C
//     float32 dlogits.
// Everything is little-endian raw binary, as numpy's tofile/fromfile write and read it.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "resnet_ddp/cpu/softmax_xent.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/optimizer.h"
#include "resnet_ddp/kernel_math/weight_decay.h"

using namespace rddp;

namespace {

struct Settings {
  std::map<std::string, std::string> values;

  const std::string& get(const std::string& key) const {
    const auto found = values.find(key);
    if (found == values.end()) fail("cpu_twin_outputs: missing setting ", key, "=...");
    return found->second;
  }
  double number(const std::string& key, double fallback) const {
    return values.count(key) ? std::stod(values.at(key)) : fallback;
  }
};

class Input {
 public:
  explicit Input(const std::string& path) : in_(path, std::ios::binary) {
    if (!in_) fail("cpu_twin_outputs: cannot open input file ", path);
  }
  template <typename T>
  std::vector<T> read(size_t count) {
    std::vector<T> values(count);
    in_.read(reinterpret_cast<char*>(values.data()),
             static_cast<std::streamsize>(count * sizeof(T)));
    if (!in_) fail("cpu_twin_outputs: input file ends before ", count, " more values");
    return values;
  }

 private:
  std::ifstream in_;
};

template <typename T>
void write(std::ofstream& out, const std::vector<T>& values) {
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(T)));
}

void run_optimizer(OptimizerKind kind, Input& in, std::ofstream& out, const Settings& settings) {
  OptimizerConfig config;
  config.kind = kind;
  config.weight_decay = settings.number("weight_decay", config.weight_decay);
  config.beta1 = settings.number("beta1", config.beta1);
  config.beta2 = settings.number("beta2", config.beta2);
  config.eps = settings.number("eps", config.eps);
  config.momentum = settings.number("momentum", config.momentum);
  config.nesterov = settings.number("nesterov", 0) != 0;
  const auto elements = static_cast<size_t>(std::stoull(settings.get("elements")));
  std::vector<double> lrs;
  std::stringstream list(settings.get("lrs"));
  for (std::string item; std::getline(list, item, ',');) lrs.push_back(std::stod(item));

  std::vector<uint32_t> no_decay;
  if (settings.values.count("no_decay_chunks")) {
    no_decay.assign(weight_decay::mask_words(elements), 0u);
    std::stringstream chunks(settings.get("no_decay_chunks"));
    for (std::string item; std::getline(chunks, item, ',');) {
      const size_t chunk = std::stoull(item);
      if (chunk >= weight_decay::chunks_of(elements)) fail("cpu_twin_outputs: no chunk ", chunk);
      weight_decay::exclude(no_decay, chunk);
    }
  }

  std::vector<float> params = in.read<float>(elements);
  CpuOptimizer<float> optimizer(config, elements, no_decay);
  for (double lr : lrs) optimizer.step(params.data(), in.read<float>(elements).data(), lr);
  write(out, params);
  write(out, optimizer.first_moment());
  write(out, optimizer.second_moment());
}

void run_xent(Input& in, std::ofstream& out, const Settings& settings) {
  const int batch = std::stoi(settings.get("batch"));
  const int classes = std::stoi(settings.get("classes"));
  const auto smoothing = static_cast<float>(settings.number("smoothing", 0.0));
  const std::vector<float> logits = in.read<float>(static_cast<size_t>(batch) * classes);
  const std::vector<int32_t> labels = in.read<int32_t>(batch);
  std::vector<float> dlogits(logits.size());
  const cpu::XentResult result = cpu::softmax_cross_entropy(
      logits.data(), labels.data(), batch, classes, smoothing, dlogits.data());
  write(out, std::vector<double>{result.loss});
  write(out, std::vector<int64_t>{result.correct, result.correct_top5});
  write(out, dlogits);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 4) fail("usage: cpu_twin_outputs adamw|sgd|xent IN OUT key=value...");
    const std::string what = argv[1];
    Input in(argv[2]);
    std::ofstream out(argv[3], std::ios::binary);
    if (!out) fail("cpu_twin_outputs: cannot create output file ", argv[3]);
    Settings settings;
    for (int i = 4; i < argc; ++i) {
      const std::string pair = argv[i];
      const size_t equals = pair.find('=');
      if (equals == std::string::npos) fail("cpu_twin_outputs: expected key=value, got ", pair);
      settings.values[pair.substr(0, equals)] = pair.substr(equals + 1);
    }
    if (what == "xent") {
      run_xent(in, out, settings);
    } else {
      run_optimizer(parse_optimizer(what), in, out, settings);
    }
    if (!out.flush()) fail("cpu_twin_outputs: cannot write ", argv[3]);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
  return 0;
}
