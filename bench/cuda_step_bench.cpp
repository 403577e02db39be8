// Training throughput of the CUDA engine on synthetic data: images/s, where the step's time goes,
// peak device memory, FLOPs and MFU, as a table and as one JSON line (the record that
// bench/compare_throughput.py sets beside PyTorch's, from bench/pytorch_ddp.py).
//
//   cuda_step_bench [--batch 256] [--size 224] [--stem auto|imagenet|cifar] [--classes 1000]
//                   [--optimizer adamw|sgd] [--precision tf32|fp32|bf16|fp16]
//                   [--memory-format auto|nchw|nhwc]
//                   [--batchnorm cudnn|fused]
//                   [--warmup 15] [--windows 5] [--steps-per-window 30]
//                   [--conv-algorithms timed|heuristic] [--conv-api legacy|graph]
//                   [--deterministic] [--ddp] [--bucket-mb 25]
//                   [--grad-allreduce fp32|bf16] [--cuda-graphs on|off] [--input pixels|float]
//                   [--profile] [--kernel-csv FILE] [--kernel-steps N]
//   cuda_step_bench --describe [same flags]   the model, its FLOPs and parameters (no GPU needed)
//   cuda_step_bench --device-info             the GPU, its known peak FLOP/s, library versions
//   mpirun -np 8 cuda_step_bench [flags]      one rank per GPU of the node, as resnet_ddp runs
//
// One batch of uniformly random uint8 pixels (ImageNet's normalisation) and uniform labels in
// pinned host memory is trained on over and over: no loader, so the GPU is measured, but each
// step copies its batch to the device and normalises it there, as training does (on a copy
// stream, overlapping the previous step). `--input float` uploads normally distributed float
// images instead, as resnet_ddp did before its batches travelled as pixels: four times the
// bytes. `--stem auto` is the cifar stem (3x3/1 convolution, no max pooling) for images up to 64 px, else torchvision's
// imagenet stem, as resnet_ddp chooses. The optimizer has resnet_ddp's defaults (AdamW lr 1e-3,
// weight decay 1e-2; SGD lr 0.1, momentum 0.9, weight decay 1e-4). The warm-up steps are not
// timed; then each window of steps is timed by CUDA events on the compute stream, and the
// median window counts. One process trains alone unless --ddp, which adds the gradient reducer
// over NCCL as in a job of one rank; under an MPI launcher with several ranks the reducer
// always runs, and the total is every rank's images over the slowest rank's window.
// --grad-allreduce bf16 sends the reducer's buckets as bfloat16 (DDP's bf16_compress_hook): it
// halves the bytes, which only pays with more than one rank; with one (--ddp alone) it measures
// what the two cast kernels and NCCL's bf16 pass cost.
// `--memory-format auto` is resnet_ddp's default: nchw at every precision. `--batchnorm fused`
// runs our BatchNorm kernels with ReLU and the residual add folded in (batchnorm_impl.h); its
// records are named resnet_ddp-fusedbn, so that tables set them beside cuDNN's.
// `--kernel-csv FILE` runs --kernel-steps more steps (default: a window's) after the timed ones
// with CUPTI recording every kernel, and writes their durations summed by name to FILE as
// Nsight Systems' kernel summary (bench/kernel_times.h): bench/profile_breakdown.py sets it beside
// PyTorch's (bench/pytorch_ddp.py --kernel-csv) by category. The record names the file; where
// CUPTI cannot be loaded or refuses, it says why and the measurement stands.
// `--conv-api graph` (records named ...-cudnngraph) runs the convolutions through cuDNN's graph
// API, choosing among every engine configuration its heuristics list, as PyTorch does.
// --cuda-graphs on captures the step after the engine's own warm-up steps and replays it, with
// the reducer's allreduces under --ddp or several ranks, and the split's events (events recorded
// inside the graph: bench/step_events.h says how a replayed step is split); the report says how
// many steps were replayed and how many nodes the graph holds.
// --profile switches a profiler started with `nsys profile --capture-range=cudaProfilerApi` on
// for the timed windows only, each an NVTX range ("window 1", ...) around resnet_ddp's own.
// Without a CUDA device it prints SKIPPED and exits 0.
#include <cudnn.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "device_memory.h"
#include "resnet_ddp/json_line.h"
#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/ddp/nccl_check.h"
#include "resnet_ddp/cuda/cuda_engine.h"
#include "resnet_ddp/cuda/device.h"
#include "resnet_ddp/cuda/device_buffer.h"
#include "resnet_ddp/data/normalize.h"
#include "resnet_ddp/ddp/comm.h"
#include "resnet_ddp/ddp/context.h"
#include "resnet_ddp/ddp/fatal.h"
#include "resnet_ddp/ddp/gpu_assignment.h"
#include "resnet_ddp/ddp/launch_checks.h"
#include "resnet_ddp/ddp/reducer.h"
#include "resnet_ddp/ddp/watchdog.h"
#include "resnet_ddp/engine_factory.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/gpu_peaks.h"
#include "resnet_ddp/library_versions.h"
#include "resnet_ddp/model_flops.h"
#include "resnet_ddp/model_spec.h"
#include "resnet_ddp/param_layout.h"
#include "resnet_ddp/profile_range.h"
#include "resnet_ddp/rng.h"
#include "kernel_times.h"
#include "step_events.h"

using namespace rddp;


namespace {

constexpr const char* kProgram = "cuda_step_bench";
// Collectives of a benchmark complete in milliseconds; one that takes this long hangs.
constexpr std::chrono::seconds kCommTimeout{300};

enum class Mode { measure, describe, device_info };

struct Settings {
  Mode mode = Mode::measure;
  int batch = 256, size = 224, classes = 1000;
  std::string stem = "auto";
  OptimizerKind optimizer = OptimizerKind::adamw;
  std::string precision = "tf32";
  std::string memory_format = "auto";  // resolved by parse(): nchw or nhwc
  BatchNormImpl batchnorm = BatchNormImpl::cudnn;
  int warmup = 15, windows = 5, steps_per_window = 30;
  bool timed_search = true, deterministic = false, ddp = false, cuda_graphs = false;
  bool conv_graph_api = false;
  bool profile = false;  // profiler collects the timed windows only (cudaProfilerStart/Stop)
  std::string kernel_csv;  // --kernel-csv: the kernels of kernel_steps more steps, by name
  int kernel_steps = 0;    // 0: a window's steps
  double bucket_mb = 25.0;
  ddp::GradAllreduce grad_allreduce = ddp::GradAllreduce::fp32;
  BatchInput input = BatchInput::pixels;
};

int parse_int(const std::string& flag, const char* text, int low, int high) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < low || value > high)
    fail(flag, " needs an integer in [", low, ", ", high, "], got '", text, "'");
  return static_cast<int>(value);
}

// One of a flag's two values, and what the refusal says of it beside its name.
struct Choice {
  const char* name;
  const char* note = "";
};

// `text`, the value of `flag`, refused unless it names `first` or `second`.
std::string one_of(const std::string& flag, const std::string& text, Choice first,
                   Choice second) {
  if (text != first.name && text != second.name)
    fail(flag, " must be '", first.name, "'", first.note, " or '", second.name, "'", second.note,
         ", got '", text, "'");
  return text;
}

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(flag, " needs a value");
      return argv[++i];
    };
    if (flag == "--describe") s.mode = Mode::describe;
    else if (flag == "--device-info") s.mode = Mode::device_info;
    else if (flag == "--batch") s.batch = parse_int(flag, value().c_str(), 2, 1 << 16);
    else if (flag == "--size") s.size = parse_int(flag, value().c_str(), 1, 4096);
    else if (flag == "--classes") s.classes = parse_int(flag, value().c_str(), 1, 1 << 20);
    else if (flag == "--stem") s.stem = value();
    else if (flag == "--optimizer") s.optimizer = parse_optimizer(value());
    else if (flag == "--precision") s.precision = value();
    else if (flag == "--memory-format") s.memory_format = value();
    else if (flag == "--batchnorm") s.batchnorm = parse_batchnorm_impl(flag, value());
    else if (flag == "--warmup") s.warmup = parse_int(flag, value().c_str(), 1, 100000);
    else if (flag == "--windows") s.windows = parse_int(flag, value().c_str(), 1, 1000);
    else if (flag == "--steps-per-window")
      s.steps_per_window = parse_int(flag, value().c_str(), 1, 100000);
    else if (flag == "--conv-algorithms")
      s.timed_search =
          one_of(flag, value(), {"timed", " (as cudnn.benchmark)"}, {"heuristic"}) == "timed";
    else if (flag == "--conv-api")
      s.conv_graph_api = one_of(flag, value(), {"legacy"}, {"graph"}) == "graph";
    else if (flag == "--deterministic") s.deterministic = true;
    else if (flag == "--ddp") s.ddp = true;
    else if (flag == "--profile") s.profile = true;
    else if (flag == "--kernel-csv") s.kernel_csv = value();
    else if (flag == "--kernel-steps") s.kernel_steps = parse_int(flag, value().c_str(), 1, 100000);
    else if (flag == "--cuda-graphs")
      s.cuda_graphs = one_of(flag, value(), {"on"}, {"off"}) == "on";
    else if (flag == "--bucket-mb") {
      const std::string text = value();
      char* end = nullptr;
      s.bucket_mb = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !(s.bucket_mb > 0) || !std::isfinite(s.bucket_mb))
        fail("--bucket-mb needs a positive number of MiB, got '", text, "'");
    } else if (flag == "--grad-allreduce") {
      s.grad_allreduce = ddp::parse_grad_allreduce(flag, value());
    } else if (flag == "--input") {
      const std::string how =
          one_of(flag, value(), {"pixels", " (uint8, normalised on the GPU, as resnet_ddp trains)"},
                 {"float", " (normalised float images)"});
      s.input = how == "pixels" ? BatchInput::pixels : BatchInput::normalized_float;
    } else {
      fail("unknown flag '", flag, "'; the flags are listed at the top of bench/", kProgram,
           ".cpp");
    }
  }
  if (s.stem != "auto") parse_stem(s.stem);  // refuses an unknown stem now
  if (s.precision != "tf32" && s.precision != "fp32" && s.precision != "bf16" &&
      s.precision != "fp16")
    fail("--precision must be tf32, fp32, bf16 or fp16, got '", s.precision, "'");
  if (s.memory_format != "auto" && s.memory_format != "nchw" && s.memory_format != "nhwc")
    fail("--memory-format must be auto, nchw or nhwc, got '", s.memory_format, "'");
  // As resnet_ddp's default (include/resnet_ddp/train/options.h says why).
  if (s.memory_format == "auto") s.memory_format = "nchw";
  return s;
}

Stem stem_of(const Settings& s) {
  if (s.stem == "auto") return s.size <= 64 ? Stem::cifar : Stem::imagenet;
  return parse_stem(s.stem);
}

EngineConfig engine_config(const Settings& s) {
  EngineConfig config;
  config.spec.stem = stem_of(s);
  config.spec.num_classes = s.classes;
  config.max_batch = s.batch;
  config.height = config.width = s.size;
  config.optimizer.kind = s.optimizer;
  if (s.optimizer == OptimizerKind::sgd) {
    // resnet_ddp's SGD defaults, the PyTorch ImageNet recipe.
    config.optimizer.lr = 0.1;
    config.optimizer.weight_decay = 1e-4;
    config.optimizer.momentum = 0.9;
  }
  config.precision = s.precision == "bf16"   ? Precision::bf16
                     : s.precision == "fp16" ? Precision::fp16
                     : s.precision == "fp32" ? Precision::fp32
                                             : Precision::tf32;
  config.input = s.input;
  // torchvision's ImageNet normalisation (any would do: the values do not change the speed).
  const data::Normalization imagenet = data::normalization_preset("imagenet", 3);
  config.pixel_mean = imagenet.mean;
  config.pixel_stddev = imagenet.stddev;
  return config;
}

CudaEngineOptions cuda_options(const Settings& s) {
  CudaEngineOptions options;
  options.memory_format = s.memory_format == "nhwc" ? MemoryFormat::nhwc : MemoryFormat::nchw;
  options.batchnorm = s.batchnorm;
  options.deterministic = s.deterministic;
  options.conv_search =
      s.timed_search ? cuda::ConvAlgorithmSearch::timed : cuda::ConvAlgorithmSearch::heuristic;
  options.conv_api = s.conv_graph_api ? cuda::ConvApi::graph : cuda::ConvApi::legacy;
  options.cuda_graphs = s.cuda_graphs;
  return options;
}

std::string optimizer_text(const OptimizerConfig& o) {
  char text[128];
  if (o.kind == OptimizerKind::adamw)
    std::snprintf(text, sizeof text, "adamw lr %g, betas %g/%g, eps %g, weight decay %g", o.lr,
                  o.beta1, o.beta2, o.eps, o.weight_decay);
  else
    std::snprintf(text, sizeof text, "sgd lr %g, momentum %g, weight decay %g", o.lr, o.momentum,
                  o.weight_decay);
  return text;
}

// The implementation's name in the tables: resnet_ddp, then what it runs beyond the defaults.
std::string impl_name(const Settings& s) {
  std::string name = "resnet_ddp";
  if (s.batchnorm == BatchNormImpl::fused) name += "-fusedbn";
  if (s.conv_graph_api) name += "-cudnngraph";
  if (s.cuda_graphs) name += "-graphs";
  if (s.input == BatchInput::normalized_float) name += "-floatinput";
  return name;
}

// The settings that make two records comparable, shared by every record.
JsonLine config_json(const char* record, const Settings& s, const EngineConfig& config,
                     const ParamLayout& layout) {
  JsonLine json;
  json.string("record", record)
      .string("impl", impl_name(s))
      .string("stem", to_string(config.spec.stem))
      .integer("image_size", s.size)
      .integer("batch_per_gpu", s.batch)
      .integer("classes", s.classes)
      .string("optimizer", to_string(s.optimizer))
      .string("precision", s.precision)
      .string("grad_allreduce", ddp::to_string(s.grad_allreduce))
      .string("memory_format", s.memory_format)
      .boolean("cuda_graphs", s.cuda_graphs)
      .string("batchnorm", to_string(s.batchnorm))
      .string("input", s.input == BatchInput::pixels ? "uint8 pixels" : "float")
      .integer("params", static_cast<long long>(layout.parameter_count()))
      .number("flops_per_image", training_flops_per_image(describe(config.spec), s.size))
      .string("flops_formula", kTrainingFlopsFormula);
  return json;
}

int describe_model(const Settings& s) {
  const EngineConfig config = engine_config(s);
  const NetDesc net = describe(config.spec);
  const ParamLayout layout(net);
  std::printf("model            resnet18 (torchvision), %s stem, %d classes, %zu parameters\n",
              to_string(config.spec.stem), s.classes, layout.parameter_count());
  std::printf("images           3x%dx%d\n", s.size, s.size);
  std::printf("forward MACs     %.4g per image\n", forward_macs(net, s.size));
  std::printf("training FLOPs   %.4g per image = %s\n",
              training_flops_per_image(net, s.size), kTrainingFlopsFormula);
  std::printf("%s\n", config_json("describe", s, config, layout).text().c_str());
  return 0;
}

// What the benchmark reports about its device, and the peaks MFU is taken against.
struct DeviceFacts {
  std::string name;
  int major = 0, minor = 0, sms = 0, clock_mhz = 0;
  size_t memory_bytes = 0;
  const KnownGpu* known = nullptr;
};

DeviceFacts query_device(int device) {
  cudaDeviceProp p;
  RDDP_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  int clock_khz = 0;
  RDDP_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
  DeviceFacts facts;
  facts.name = p.name;
  facts.major = p.major;
  facts.minor = p.minor;
  facts.sms = p.multiProcessorCount;
  facts.clock_mhz = clock_khz / 1000;
  facts.memory_bytes = p.totalGlobalMem;
  facts.known = recognise_gpu(facts.name, facts.major, facts.minor, facts.sms);
  return facts;
}

JsonLine versions_json() {
  int runtime = 0, driver = 0, nccl = 0;
  RDDP_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  RDDP_CUDA_CHECK(cudaDriverGetVersion(&driver));
  RDDP_NCCL_CHECK(ncclGetVersion(&nccl));
  JsonLine json;
  json.string("cuda_runtime", cuda_version_text(runtime))
      .string("cuda_driver_api", cuda_version_text(driver))
      .string("cudnn", triple_version_text(static_cast<int>(cudnnGetVersion())))
      .string("nccl", triple_version_text(nccl));
  return json;
}

std::string peak_text(const DeviceFacts& d, const std::string& precision) {
  return device_peak(d.name, d.major, d.minor, d.sms, precision).basis;
}

int device_info() {
  std::string reason;
  if (cuda::cuda_device_count_or_zero(&reason) == 0) {
    std::printf("SKIPPED: %s: no CUDA device answers (%s)\n", kProgram, reason.c_str());
    return 0;
  }
  const DeviceFacts d = query_device(0);
  std::printf("device           %s, compute capability %d.%d, %d SMs, max clock %d MHz, %.1f GiB\n",
              d.name.c_str(), d.major, d.minor, d.sms, d.clock_mhz,
              static_cast<double>(d.memory_bytes) / (1 << 30));
  for (const char* precision : {"fp32", "tf32", "bf16", "fp16"})
    std::printf("peak %s        %s\n", precision, peak_text(d, precision).c_str());
  if (d.known != nullptr && d.clock_mhz < d.known->boost_mhz)
    std::printf("note             the device's max clock is below the %s's boost clock the peaks "
                "assume: MFU is against the datasheet, not this part's capped clock\n",
                d.known->sku);
  const JsonLine versions = versions_json();
  std::printf("versions         %s\n", versions.text().c_str());
  JsonLine json;
  json.string("record", "device")
      .string("gpu", d.name)
      .string("compute_capability", std::to_string(d.major) + "." + std::to_string(d.minor))
      .integer("sms", d.sms)
      .integer("max_clock_mhz", d.clock_mhz)
      .integer("memory_bytes", static_cast<long long>(d.memory_bytes));
  if (d.known != nullptr) {
    JsonLine peaks;
    peaks.number("fp32", d.known->peak.fp32)
        .number("tf32", d.known->peak.tf32 > 0 ? d.known->peak.tf32 : NAN)
        .number("bf16", d.known->peak.bf16 > 0 ? d.known->peak.bf16 : NAN)
        .number("fp16", d.known->peak.fp16 > 0 ? d.known->peak.fp16 : NAN);
    json.string("sku", d.known->sku)
        .integer("sku_boost_mhz", d.known->boost_mhz)
        .object("peak_tflops", peaks)
        .string("peak_source", d.known->source);
  } else {
    json.null("sku").null("peak_tflops").null("peak_source");
  }
  json.object("versions", versions);
  std::printf("%s\n", json.text().c_str());
  return 0;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// What one rank measured; reduced over the ranks before rank 0 reports it.
struct Measurement {
  std::vector<double> window_ms;  // slowest rank's, once reduced
  bench::StepSplit split;         // means over windows (and ranks)
  double peak_bytes = 0, end_bytes = 0;  // largest rank's
  double build_s = 0, warmup_s = 0;
  double last_loss = 0;
  bench::KernelTotals kernels;  // --kernel-csv: this rank's
  int kernel_steps = 0;         // the steps they cover (0: none collected)
  std::string kernel_error;     // why none were
};

// The kernels of `steps` more steps, after the timed ones: tracing cannot disturb what was timed.
void collect_kernel_times(int steps, const std::function<void(int)>& step, Measurement& m) {
  try {
    bench::KernelTimes times;
    RDDP_CUDA_CHECK(cudaDeviceSynchronize());  // earlier steps' kernels stay out
    times.start();
    for (int i = 0; i < steps; ++i) step(i);
    RDDP_CUDA_CHECK(cudaDeviceSynchronize());
    m.kernels = times.stop();
    m.kernel_steps = steps;
    if (m.kernels.launches() == 0) {
      m.kernel_steps = 0;
      m.kernel_error = "CUPTI recorded no kernel";
    }
  } catch (const std::exception& error) {
    m.kernel_error = error.what();
  }
}

// Trains and times the windows. The memory sampler runs until the warm-up ends (its readings
// must not disturb the timed steps) and takes one more reading at the end.
Measurement train_and_time(const Settings& s, Engine& engine, StepHooks* reducer,
                           bench::DeviceMemoryPeak& memory) {
  const EngineConfig config = engine_config(s);
  const size_t values = static_cast<size_t>(s.batch) * config.spec.in_channels * s.size * s.size;
  const bool as_pixels = config.input == BatchInput::pixels;
  cuda::PinnedBuffer<float> images(as_pixels ? 0 : values);
  cuda::PinnedBuffer<uint8_t> pixels(as_pixels ? values : 0);
  cuda::PinnedBuffer<int32_t> labels(static_cast<size_t>(s.batch));
  Rng rng(1);
  for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<float>(rng.normal());
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(rng.below(256));
  for (int i = 0; i < s.batch; ++i) labels[i] = static_cast<int32_t>(rng.below(s.classes));
  const HostBatch batch{s.batch,      config.spec.in_channels, s.size,      s.size,
                        images.get(), labels.get(),            pixels.get()};
  const double lr = config.optimizer.lr;
  bench::StepEvents events(s.steps_per_window,
                           static_cast<cudaStream_t>(engine.compute_stream()), reducer);
  auto step = [&](int index) {
    events.begin_step(index);
    engine.train_step(batch, lr, &events);
    events.end_step();
  };

  Measurement m;
  const auto warmup_start = std::chrono::steady_clock::now();
  for (int i = 0; i < s.warmup; ++i) step(i % s.steps_per_window);
  engine.take_metrics();
  m.warmup_s = seconds_since(warmup_start);
  memory.stop();

  if (s.profile) engine.profiler_capture(true);
  for (int w = 0; w < s.windows; ++w) {
    const ProfileRange range("window " + std::to_string(w + 1));
    for (int i = 0; i < s.steps_per_window; ++i) step(i);
    m.window_ms.push_back(events.window_ms());
    const bench::StepSplit split = events.split();
    m.split.data += split.data / s.windows;
    m.split.forward_backward += split.forward_backward / s.windows;
    m.split.exposed_comm += split.exposed_comm / s.windows;
    m.split.optimizer += split.optimizer / s.windows;
    m.split.idle += split.idle / s.windows;
    const Metrics metrics = engine.take_metrics();
    m.last_loss = metrics.loss_sum / static_cast<double>(metrics.count);
    // A diverged run computes on NaNs, whose speed says nothing about training.
    if (!std::isfinite(m.last_loss))
      fail("the training loss became ", m.last_loss, " in window ", w + 1,
           ": the figures would not be those of training; check the optimizer settings");
  }
  if (s.profile) engine.profiler_capture(false);
  memory.sample();
  if (!s.kernel_csv.empty())
    collect_kernel_times(s.kernel_steps > 0 ? s.kernel_steps : s.steps_per_window,
                         [&](int i) { step(i % s.steps_per_window); }, m);
  m.peak_bytes = static_cast<double>(memory.peak_bytes());
  m.end_bytes = static_cast<double>(memory.latest_bytes());
  return m;
}

// Rank 0's figures: the slowest rank's window times, the largest memory, the mean split.
void reduce_over_ranks(ddp::Comm& host, Measurement& m) {
  if (host.size() == 1) return;
  host.allreduce(m.window_ms.data(), m.window_ms.size(), ddp::DataType::f64, ddp::Reduction::max,
                 "maximum of the window times");
  double memory[2] = {m.peak_bytes, m.end_bytes};
  host.allreduce(memory, 2, ddp::DataType::f64, ddp::Reduction::max, "maximum of the memory");
  m.peak_bytes = memory[0];
  m.end_bytes = memory[1];
  double split[5] = {m.split.data, m.split.forward_backward, m.split.exposed_comm,
                     m.split.optimizer, m.split.idle};
  host.allreduce(split, 5, ddp::DataType::f64, ddp::Reduction::average, "mean of the split");
  m.split = {split[0], split[1], split[2], split[3], split[4]};
}

void report(const Settings& s, const DeviceFacts& d, const Engine& engine, int world, bool ddp,
            const std::string& reducer_text, const Measurement& m) {
  const EngineConfig config = engine_config(s);
  const NetDesc net = describe(config.spec);
  const double images_per_window = static_cast<double>(world) * s.batch * s.steps_per_window;
  std::vector<double> total_rates;
  for (const double ms : m.window_ms) total_rates.push_back(images_per_window / (ms / 1e3));
  const double total = median(total_rates), per_gpu = total / world;
  const double flops = training_flops_per_image(net, s.size);
  const double achieved_tflops = per_gpu * flops / 1e12;
  const DevicePeak peak = device_peak(d.name, d.major, d.minor, d.sms, s.precision);
  const double mfu = model_flop_utilisation(per_gpu, flops, peak.tflops);
  const double gib = 1 << 30;
  const bench::StepSplit& t = m.split;
  const double step_ms = median(m.window_ms) / s.steps_per_window;
  char mfu_text[32] = "unknown";
  if (std::isfinite(mfu)) std::snprintf(mfu_text, sizeof mfu_text, "%.1f%%", 100.0 * mfu);

  std::printf("resnet_ddp training throughput: CUDA engine, synthetic batches in pinned host memory\n");
  std::printf("device           %s, %d SMs, cc %d.%d, max clock %d MHz\n",
              engine.device_name().c_str(), d.sms, d.major, d.minor, d.clock_mhz);
  std::printf("ranks            %d%s\n", world,
              ddp ? (", gradients averaged: " + reducer_text).c_str()
                  : " (one process, no gradient reducer)");
  std::printf("model            resnet18 (torchvision), %s stem, %d classes, %zu parameters\n",
              to_string(config.spec.stem), s.classes, engine.layout().parameter_count());
  std::printf("batch            %d images of 3x%dx%d per GPU, uploaded as %s\n", s.batch,
              s.size, s.size,
              s.input == BatchInput::pixels ? "uint8 pixels and normalised on the GPU"
                                            : "normalised float images");
  std::printf("maths            %s, %s activations, %s BatchNorm, %s convolution %s%s\n",
              s.precision.c_str(), s.memory_format.c_str(), to_string(s.batchnorm),
              s.timed_search ? "timed-search" : "heuristic",
              s.conv_graph_api ? "plans of cuDNN's graph API" : "algorithms",
              s.deterministic ? ", deterministic" : "");
  std::printf("optimizer        %s\n", optimizer_text(config.optimizer).c_str());
  std::printf("steps            %d warm-up (%.1f s), then %d windows of %d timed by CUDA events\n",
              s.warmup, m.warmup_s, s.windows, s.steps_per_window);
  std::printf("engine built in  %.1f s (with the convolution algorithm search)\n", m.build_s);
  const cuda::ConvAlgorithmCache::ApiUse api_use = cuda_conv_api_use(engine);
  if (s.conv_graph_api) {
    std::printf("convolutions     %zu on plans of cuDNN's graph API, %zu on legacy "
                "algorithms%s%s%s\n",
                api_use.graph_plans, api_use.legacy_algorithms,
                api_use.first_fallback.empty() ? "" : " (the first: ",
                api_use.first_fallback.c_str(), api_use.first_fallback.empty() ? "" : ")");
  }
  std::printf("images/s per GPU %.0f (median window; windows %.0f..%.0f)\n", per_gpu,
              *std::min_element(total_rates.begin(), total_rates.end()) / world,
              *std::max_element(total_rates.begin(), total_rates.end()) / world);
  std::printf("images/s total   %.0f\n", total);
  std::printf("step             %.2f ms: data wait %.2f, forward+backward %.2f, exposed "
              "communication %.2f, optimizer %.2f, GPU idle between steps %.2f%s\n",
              step_ms, t.data, t.forward_backward, t.exposed_comm, t.optimizer, t.idle,
              s.cuda_graphs ? " (inside the graph: the communication and optimizer of each "
                              "window's last replay)"
                            : "");
  std::printf("FLOPs per image  %.3f G = %s\n", flops / 1e9, kTrainingFlopsFormula);
  std::printf("achieved         %.1f TFLOP/s per GPU\n", achieved_tflops);
  std::printf("MFU              %s against %s\n", mfu_text, peak.basis.c_str());
  std::printf("peak memory      %.2f GiB (%.2f GiB after the timed steps): cudaMemGetInfo in use "
              "beyond the fresh CUDA context, sampled every ms while the engine was built and "
              "warmed up, and after the windows\n",
              m.peak_bytes / gib, m.end_bytes / gib);
  const CudaMemoryPlan plan = cuda_memory_plan(engine);
  std::printf("memory plan      %.2f GiB model and optimizer state, %.2f GiB activations and their "
              "gradients, %.2f GiB more for the convolutions' workspaces (one arena, laid out by "
              "when each buffer is in use), %.2f GiB for the batch's upload slots; the timed "
              "search held %.2f GiB more while the engine was built\n",
              plan.model_bytes / gib, plan.activation_bytes / gib,
              plan.conv_workspace_bytes / gib, plan.input_bytes / gib,
              plan.search_workspace_bytes / gib);
  std::printf("last loss        %.4f\n", m.last_loss);
  const CudaGraphStats graphs = cuda_graph_stats(engine);
  if (s.cuda_graphs)
    std::printf("cuda graphs      %lld steps replayed from a graph of %zu nodes, %lld eager%s%s\n",
                static_cast<long long>(graphs.replays), graphs.graph_nodes,
                static_cast<long long>(graphs.eager_steps),
                graphs.capture_failure.empty() ? "" : "; the capture failed: ",
                graphs.capture_failure.c_str());

  std::string kernel_error = m.kernel_error;
  if (!s.kernel_csv.empty() && m.kernel_steps > 0) {
    std::ofstream out(s.kernel_csv, std::ios::binary | std::ios::trunc);
    out << bench::kernel_summary_csv(m.kernels);
    out.close();
    if (!out)
      kernel_error = "cannot write " + s.kernel_csv + ": check that its directory exists and is "
                     "writable";
    else
      std::printf("kernel times     %lld launches of %zu kernels over %d steps (CUPTI), %.2f ms "
                  "of kernel time a step: %s\n",
                  static_cast<long long>(m.kernels.launches()), m.kernels.distinct(),
                  m.kernel_steps, m.kernels.total_ns() / 1e6 / m.kernel_steps,
                  s.kernel_csv.c_str());
  }
  if (!s.kernel_csv.empty() && !kernel_error.empty())
    std::printf("kernel times     not collected: %s\n", kernel_error.c_str());

  JsonLine split;
  split.number("data", t.data)
      .number("forward_backward", t.forward_backward)
      .number("comm_exposed", t.exposed_comm)
      .number("optimizer", t.optimizer)
      .number("idle", t.idle);
  JsonLine json = config_json("throughput", s, config, engine.layout());
  json.string("status", "ok")
      .string("gpu", d.name)
      .integer("world_size", world)
      .boolean("ddp", ddp)
      .string("conv_algorithms", s.timed_search ? "timed" : "heuristic")
      .string("conv_api", s.conv_graph_api ? "graph" : "legacy")
      .integer("conv_graph_plans", static_cast<long long>(api_use.graph_plans))
      .integer("conv_legacy_algorithms", static_cast<long long>(api_use.legacy_algorithms))
      .string("conv_graph_fallback", api_use.first_fallback)
      .integer("warmup_steps", s.warmup)
      .integer("windows", s.windows)
      .integer("steps_per_window", s.steps_per_window)
      .number("images_per_s_per_gpu", per_gpu)
      .number("images_per_s_total", total)
      .numbers("window_images_per_s_total", total_rates)
      .number("step_ms", step_ms)
      .object("split_ms", split)
      .number("tflops_per_gpu", achieved_tflops)
      .number("peak_tflops", peak.tflops > 0 ? peak.tflops : NAN)
      .number("mfu", mfu)
      .number("device_mem_peak_bytes", m.peak_bytes)
      .number("device_mem_end_bytes", m.end_bytes)
      .number("model_bytes", static_cast<double>(plan.model_bytes))
      .number("activation_bytes", static_cast<double>(plan.activation_bytes))
      .number("conv_workspace_bytes", static_cast<double>(plan.conv_workspace_bytes))
      .number("search_workspace_bytes", static_cast<double>(plan.search_workspace_bytes))
      .number("input_bytes", static_cast<double>(plan.input_bytes))
      .number("setup_s", m.build_s)
      .number("warmup_s", m.warmup_s)
      .number("last_loss", m.last_loss)
      .integer("graph_replays", static_cast<long long>(graphs.replays))
      .integer("graph_nodes", static_cast<long long>(graphs.graph_nodes))
      .object("versions", versions_json());
  if (!s.kernel_csv.empty() && kernel_error.empty())
    json.string("kernel_csv", s.kernel_csv).integer("kernel_steps", m.kernel_steps);
  else if (!s.kernel_csv.empty())
    json.string("kernel_times_error", kernel_error);
  std::printf("%s\n", json.text().c_str());
}

int measure(const Settings& s, ddp::DistributedContext& context) {
  std::string reason;
  const int device = ddp::select_device(context.local_rank(),
                                         cuda::cuda_device_count_or_zero(&reason));
  ddp::check_one_rank_per_gpu(context, device);
  RDDP_CUDA_CHECK(cudaFree(nullptr));  // the context exists before the memory baseline
  bench::DeviceMemoryPeak memory;
  memory.start();

  ddp::Watchdog watchdog(kCommTimeout);
  const auto host = ddp::make_comm(DeviceKind::cpu, context, {&watchdog, 0, nullptr});
  const EngineConfig config = engine_config(s);
  CudaEngineOptions options = cuda_options(s);
  options.device_index = device;
  const auto build_start = std::chrono::steady_clock::now();
  const auto engine = make_engine(DeviceKind::cuda, config, options, 1);
  const double build_s = seconds_since(build_start);

  const bool ddp = s.ddp || context.world_size() > 1;
  if (!ddp && s.grad_allreduce != ddp::GradAllreduce::fp32)
    fail("--grad-allreduce ", ddp::to_string(s.grad_allreduce),
         " acts in the gradient reducer, which one process does not run: add --ddp (or start several ranks)");
  std::unique_ptr<ddp::Comm> nccl;
  std::unique_ptr<ddp::Reducer> reducer;
  if (ddp) {
    nccl = ddp::make_comm(DeviceKind::cuda, context, {&watchdog, device, engine->compute_stream()});
    ddp::ReducerOptions options;
    options.bucket_mb = s.bucket_mb;
    options.grad_allreduce = s.grad_allreduce;
    reducer = std::make_unique<ddp::Reducer>(*nccl, *engine, options);
  }

  Measurement m = train_and_time(s, *engine, reducer.get(), memory);
  m.build_s = build_s;
  reduce_over_ranks(*host, m);
  if (context.rank() == 0)
    report(s, query_device(device), *engine, context.world_size(), ddp,
           reducer ? reducer->describe() : std::string(), m);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  try {
    settings = parse(argc, argv);
    if (settings.mode == Mode::describe) return describe_model(settings);
    if (settings.mode == Mode::device_info) return device_info();
  } catch (const Error& error) {
    std::fprintf(stderr, "%s: %s\n", kProgram, error.what());
    return 2;
  }
  std::string reason;
  if (cuda::cuda_device_count_or_zero(&reason) == 0) {
    std::printf("SKIPPED: %s: no CUDA device answers (%s)\n", kProgram, reason.c_str());
    return 0;
  }
  std::unique_ptr<ddp::DistributedContext> context;
  try {
    context = std::make_unique<ddp::DistributedContext>(&argc, &argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s %s: %s\n", ddp::rank_prefix().c_str(), kProgram, error.what());
    return 1;
  }
  try {
    return measure(settings, *context);
  } catch (const ddp::AllRanksError& error) {
    std::fprintf(stderr, "%s %s: %s\n", context->prefix().c_str(), kProgram, error.what());
    return 1;
  } catch (const std::exception& error) {
    if (context->world_size() == 1) {
      std::fprintf(stderr, "%s %s: %s\n", context->prefix().c_str(), kProgram, error.what());
      return 1;
    }
    // The other ranks may wait in a collective this rank will never join: end the job.
    ddp::fatal_abort(std::string(kProgram) + ": " + error.what());
  }
}
