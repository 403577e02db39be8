#include "resnet_ddp/train/options.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <sstream>

#include "resnet_ddp/error.h"
#include "resnet_ddp/library_versions.h"
#include "resnet_ddp/version.h"

namespace rddp {

const char* to_string(DeviceChoice choice) {
  switch (choice) {
    case DeviceChoice::automatic: return "auto";
    case DeviceChoice::cpu: return "cpu";
    case DeviceChoice::cuda: return "cuda";
  }
  return "?";
}

const char* to_string(LrSchedule schedule) {
  switch (schedule) {
    case LrSchedule::constant: return "constant";
    case LrSchedule::cosine: return "cosine";
    case LrSchedule::step: return "step";
  }
  return "?";
}

namespace {

// ---- Value parsers: each names the flag and the accepted range when it refuses.

double parse_real(const std::string& flag, const std::string& text, double low, double high) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(value))
    fail(flag, ": '", text, "' is not a number");
  if (value < low || value > high) fail(flag, ": ", text, " is outside the accepted range [", low, ", ", high, "]");
  return value;
}

int64_t parse_integer(const std::string& flag, const std::string& text, int64_t low, int64_t high) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) fail(flag, ": '", text, "' is not a whole number");
  if (value < low || value > high)
    fail(flag, ": ", text, " is outside the accepted range [", low, ", ", high, "]");
  return value;
}

// "A-B" (A <= B) or "A" (that step alone), steps counted from 1.
void parse_step_range(const std::string& flag, const std::string& text, int64_t& first, int64_t& last) {
  const size_t dash = text.find('-');
  const auto digits = [](const std::string& part) {
    return !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!digits(text.substr(0, dash)) || (dash != std::string::npos && !digits(text.substr(dash + 1))))
    fail(flag, ": '", text, "' is not a step range; give FIRST-LAST (global steps from 1), e.g. 100-120");
  const int64_t most = std::numeric_limits<int64_t>::max();
  first = parse_integer(flag, text.substr(0, dash), 1, most);
  last = dash == std::string::npos ? first : parse_integer(flag, text.substr(dash + 1), 1, most);
  if (last < first)
    fail(flag, ": '", text, "' ends before it starts; give FIRST-LAST with FIRST <= LAST, e.g. 100-120");
}

template <typename Enum>
Enum parse_choice(const std::string& flag, const std::string& text,
                  std::initializer_list<std::pair<const char*, Enum>> choices) {
  std::string names;
  for (const auto& [name, value] : choices) {
    if (text == name) return value;
    names += names.empty() ? name : std::string(", ") + name;
  }
  fail(flag, ": '", text, "' is not one of: ", names);
}

// A parser from elsewhere whose message may not name the flag: put the flag in front.
template <typename Parse>
auto with_flag(const std::string& flag, Parse parse) {
  try {
    return parse();
  } catch (const Error& error) {
    const std::string message = error.what();
    if (message.rfind(flag, 0) == 0) throw;
    fail(flag, ": ", message);
  }
}

constexpr int64_t kMaxCount = std::numeric_limits<int32_t>::max();

struct Flag {
  const char* name;
  const char* value;  // placeholder in --help; null for a switch
  const char* help;
  std::function<void(TrainOptions&, const std::string& flag, const std::string& value)> apply;
};

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      // Data
      {"--data", "DIR",
       "data directory, or a CIFAR .tar.gz as torchvision downloads it; its format is detected "
       "(see --dataset)",
       [](TrainOptions& o, auto&, auto& v) { o.data.path = v; }},
      {"--dataset", "KIND", "auto (detected), cifar10, cifar100, idx, imagefolder, tiny-imagenet, synthetic",
       [](TrainOptions& o, auto& f, auto& v) { o.data.kind = with_flag(f, [&] { return data::parse_dataset_kind(v); }); }},
      {"--batch-size", "N", "images per rank and step (default 128); the effective batch is N x ranks",
       [](TrainOptions& o, auto& f, auto& v) { o.data.batch_size = parse_integer(f, v, 1, 1 << 20); }},
      {"--num-workers", "N", "loader threads per rank (default: SLURM_CPUS_PER_TASK, else the CPU affinity mask)",
       [](TrainOptions& o, auto& f, auto& v) { o.data.workers = parse_integer(f, v, 1, 1024); }},
      {"--augment", "MODE", "auto, none, crop-flip (small images), resized-crop-flip (image folders)",
       [](TrainOptions& o, auto& f, auto& v) { o.data.augment = with_flag(f, [&] { return data::parse_augment_mode(v); }); }},
      {"--image-size", "N", "training/evaluation image size (default: the data set's, 224 for image folders)",
       [](TrainOptions& o, auto& f, auto& v) { o.data.image_size = parse_integer(f, v, 1, 4096); }},
      {"--val-split", "FRACTION", "hold out this fraction of the training set for validation (0 < f < 1)",
       [](TrainOptions& o, auto& f, auto& v) { o.data.val_fraction = parse_real(f, v, 1e-6, 0.999999); }},
      {"--limit-train", "N", "use only the first N training samples",
       [](TrainOptions& o, auto& f, auto& v) { o.data.limit_train = parse_integer(f, v, 1, kMaxCount); }},
      {"--limit-val", "N", "use only the first N validation samples",
       [](TrainOptions& o, auto& f, auto& v) { o.data.limit_val = parse_integer(f, v, 1, kMaxCount); }},
      {"--no-shuffle", nullptr, "keep the training order (DistributedSampler(shuffle=False))",
       [](TrainOptions& o, auto&, auto&) { o.shuffle = false; }},
      // Model and device
      {"--stem", "KIND", "auto (cifar for images up to 64 px), imagenet (7x7/2 + maxpool) or cifar (3x3/1)",
       [](TrainOptions& o, auto& f, auto& v) {
         if (v != "auto" && v != "imagenet" && v != "cifar") fail(f, ": '", v, "' is not one of: auto, imagenet, cifar");
         o.stem = v;
       }},
      {"--device", "KIND", "auto (a GPU when one answers), cpu or cuda",
       [](TrainOptions& o, auto& f, auto& v) {
         o.device = parse_choice<DeviceChoice>(f, v, {{"auto", DeviceChoice::automatic},
                                                     {"cpu", DeviceChoice::cpu}, {"cuda", DeviceChoice::cuda}});
       }},
      {"--precision", "KIND",
       "tf32 (default: TF32 tensor cores, as PyTorch's cuDNN), fp32 (strict), bf16 (GPU: mixed "
       "precision as torch.autocast(bfloat16), float32 master weights) or fp16 (GPU: the same in "
       "float16 with GradScaler's dynamic loss scaling; a step with Inf/NaN gradients is skipped "
       "and reported)",
       [](TrainOptions& o, auto& f, auto& v) {
         o.precision = parse_choice<Precision>(f, v,
                                               {{"tf32", Precision::tf32},
                                                {"fp32", Precision::fp32},
                                                {"bf16", Precision::bf16},
                                                {"fp16", Precision::fp16}});
       }},
      {"--memory-format", "KIND",
       "GPU activations' layout: nchw (default) or nhwc (torch.channels_last)",
       [](TrainOptions& o, auto& f, auto& v) {
         o.cuda.memory_format =
             parse_choice<MemoryFormat>(f, v, {{"nchw", MemoryFormat::nchw}, {"nhwc", MemoryFormat::nhwc}});
         o.memory_format_given = true;
       }},
      {"--batchnorm", "KIND",
       "GPU BatchNorm kernels: cudnn (default) or fused (ours, with the ReLU and the residual add "
       "folded in; fast in nhwc)",
       [](TrainOptions& o, auto& f, auto& v) {
         o.cuda.batchnorm = parse_batchnorm_impl(f, v);
       }},
      {"--deterministic", nullptr,
       "GPU: the same bits every run: only deterministic cuDNN algorithms, chosen by heuristic "
       "rather than by timing (slower)",
       [](TrainOptions& o, auto&, auto&) { o.cuda.deterministic = true; }},
      {"--conv-algorithms", "HOW", "GPU: timed (default, as cudnn.benchmark) or heuristic",
       [](TrainOptions& o, auto& f, auto& v) {
         o.cuda.conv_search = parse_choice<cuda::ConvAlgorithmSearch>(
             f, v, {{"timed", cuda::ConvAlgorithmSearch::timed},
                    {"heuristic", cuda::ConvAlgorithmSearch::heuristic}});
         o.conv_algorithms_given = true;
       }},
      {"--conv-api", "API",
       "GPU: legacy (default: cuDNN's convolution algorithms) or graph (every engine "
       "configuration of cuDNN's graph API, as PyTorch)",
       [](TrainOptions& o, auto& f, auto& v) {
         o.cuda.conv_api = parse_choice<cuda::ConvApi>(
             f, v, {{"legacy", cuda::ConvApi::legacy}, {"graph", cuda::ConvApi::graph}});
       }},
      {"--cuda-graphs", "on|off",
       "GPU: capture the whole training step, with its gradient allreduces on several ranks, "
       "once and replay it as a CUDA graph, saving ~200 kernel launches a step (default off "
       "until measured on a GPU)",
       [](TrainOptions& o, auto& f, auto& v) {
         o.cuda.cuda_graphs = parse_choice<bool>(f, v, {{"on", true}, {"off", false}});
       }},
      // Optimisation
      {"--epochs", "N", "training epochs (default 10)",
       [](TrainOptions& o, auto& f, auto& v) { o.epochs = parse_integer(f, v, 1, 100000); }},
      {"--max-steps", "N", "stop after N training steps in all",
       [](TrainOptions& o, auto& f, auto& v) { o.max_steps = parse_integer(f, v, 1, std::numeric_limits<int64_t>::max()); }},
      {"--optimizer", "KIND", "adamw (default) or sgd",
       [](TrainOptions& o, auto& f, auto& v) { o.optimizer.kind = with_flag(f, [&] { return parse_optimizer(v); }); }},
      {"--lr", "RATE", "learning rate (default: 1e-3 for adamw, 0.1 for sgd)",
       [](TrainOptions& o, auto& f, auto& v) { o.optimizer.lr = parse_real(f, v, 1e-12, 1e3); o.lr_given = true; }},
      {"--weight-decay", "WD", "weight decay (default: 1e-2 for adamw, decoupled; 1e-4 for sgd)",
       [](TrainOptions& o, auto& f, auto& v) { o.optimizer.weight_decay = parse_real(f, v, 0, 10); o.weight_decay_given = true; }},
      {"--no-decay-norm-bias", nullptr,
       "no weight decay on BatchNorm weights and biases and fc.bias (every 1-D parameter), as "
       "a param group of weight_decay 0 (default: every parameter decays, as torch.optim)",
       [](TrainOptions& o, auto&, auto&) { o.optimizer.decay_norm_and_bias = false; }},
      {"--momentum", "M", "SGD momentum (default 0.9)",
       [](TrainOptions& o, auto& f, auto& v) { o.optimizer.momentum = parse_real(f, v, 0, 0.999999); o.momentum_given = true; }},
      {"--nesterov", nullptr, "SGD with Nesterov momentum",
       [](TrainOptions& o, auto&, auto&) { o.optimizer.nesterov = true; }},
      {"--beta1", "B", "AdamW beta1 (default 0.9)",
       [](TrainOptions& o, auto& f, auto& v) { o.optimizer.beta1 = parse_real(f, v, 0, 0.999999); }},
      {"--beta2", "B", "AdamW beta2 (default 0.999)",
       [](TrainOptions& o, auto& f, auto& v) { o.optimizer.beta2 = parse_real(f, v, 0, 0.999999); }},
      {"--eps", "EPS", "AdamW epsilon (default 1e-8)",
       [](TrainOptions& o, auto& f, auto& v) { o.optimizer.eps = parse_real(f, v, 1e-30, 1); }},
      {"--label-smoothing", "EPS", "cross-entropy label smoothing in [0, 1) (default 0)",
       [](TrainOptions& o, auto& f, auto& v) { o.label_smoothing = parse_real(f, v, 0, 0.999999); }},
      {"--lr-schedule", "KIND", "constant (default), cosine (to 0 at the last step) or step",
       [](TrainOptions& o, auto& f, auto& v) {
         o.lr_schedule = parse_choice<LrSchedule>(f, v, {{"constant", LrSchedule::constant},
                                                         {"cosine", LrSchedule::cosine}, {"step", LrSchedule::step}});
       }},
      {"--warmup-epochs", "E", "linear warm-up from 0 over E epochs (fractions allowed)",
       [](TrainOptions& o, auto& f, auto& v) { o.warmup_epochs = parse_real(f, v, 0, 1e5); }},
      {"--lr-step-epochs", "E1,E2,..", "--lr-schedule step: multiply the rate by --lr-gamma at these epochs (default 30,60,80)",
       [](TrainOptions& o, auto& f, auto& v) {
         o.lr_step_epochs.clear();
         std::stringstream list(v);
         for (std::string item; std::getline(list, item, ',');)
           o.lr_step_epochs.push_back(static_cast<int>(parse_integer(f, item, 1, 100000)));
         for (size_t i = 1; i < o.lr_step_epochs.size(); ++i)
           if (o.lr_step_epochs[i] <= o.lr_step_epochs[i - 1]) fail(f, ": epochs must increase, got '", v, "'");
       }},
      {"--lr-gamma", "G", "--lr-schedule step: the factor (default 0.1)",
       [](TrainOptions& o, auto& f, auto& v) { o.lr_gamma = parse_real(f, v, 1e-6, 1); }},
      {"--seed", "N", "seed of initialisation, shuffling and augmentation (default 0)",
       [](TrainOptions& o, auto& f, auto& v) { o.seed = parse_integer(f, v, 0, std::numeric_limits<int64_t>::max()); }},
      // Weights, checkpoints, logs
      {"--eval", nullptr, "evaluate only (with --init or --resume), no training",
       [](TrainOptions& o, auto&, auto&) { o.eval_only = true; }},
      {"--init", "FILE", "start from these weights (a resnet_ddp weights file, e.g. converted from torchvision)",
       [](TrainOptions& o, auto&, auto& v) { o.init_path = v; }},
      {"--init-reset-classifier", nullptr, "with --init: re-initialise fc when the class count differs",
       [](TrainOptions& o, auto&, auto&) { o.init_reset_classifier = true; }},
      {"--save-weights", "FILE", "write the final weights here (rank 0; every rank when FILE holds {rank})",
       [](TrainOptions& o, auto&, auto& v) { o.save_weights = v; }},
      {"--checkpoint-dir", "DIR", "write checkpoints here (rank 0), every epoch",
       [](TrainOptions& o, auto&, auto& v) { o.checkpoint_dir = v; }},
      {"--checkpoint-every", "N", "also checkpoint every N steps",
       [](TrainOptions& o, auto& f, auto& v) { o.checkpoint_every = parse_integer(f, v, 1, kMaxCount); }},
      {"--keep-checkpoints", "K", "keep the newest K checkpoints (default 3)",
       [](TrainOptions& o, auto& f, auto& v) { o.keep_checkpoints = parse_integer(f, v, 1, 1000); }},
      {"--resume", nullptr, "continue from the newest valid checkpoint in --checkpoint-dir",
       [](TrainOptions& o, auto&, auto&) { o.resume = true; }},
      {"--log-json", "FILE", "append one JSON object per step window and per epoch (rank 0)",
       [](TrainOptions& o, auto&, auto& v) { o.log_json = v; }},
      {"--print-every", "N", "steps between progress lines when stdout is not a terminal (default 50)",
       [](TrainOptions& o, auto& f, auto& v) { o.print_every = parse_integer(f, v, 1, kMaxCount); }},
      {"--profile-steps", "A-B", "profile global steps A to B: cudaProfilerStart before step A, cudaProfilerStop "
                                 "after B (nsys profile --capture-range=cudaProfilerApi)",
       [](TrainOptions& o, auto& f, auto& v) { parse_step_range(f, v, o.profile_first_step, o.profile_last_step); }},
      // Distributed
      {"--bucket-mb", "MB", "gradient allreduce bucket size in MiB (default 25; the first bucket is 1 MiB)",
       [](TrainOptions& o, auto& f, auto& v) { o.bucket_mb = parse_real(f, v, 0.01, 4096); }},
      {"--grad-allreduce", "TYPE", "fp32 (default) or bf16: gradients sent and summed as bfloat16, half the bytes "
                                   "(DDP's bf16_compress_hook; only matters with more than one rank)",
       [](TrainOptions& o, auto& f, auto& v) { o.grad_allreduce = ddp::parse_grad_allreduce(f, v); }},
      {"--comm-timeout", "SECONDS", "abort the job when a collective takes longer (default 600)",
       [](TrainOptions& o, auto& f, auto& v) { o.comm_timeout_s = parse_real(f, v, 1, 86400); }},
  };
  return table;
}

// Timing picks whichever deterministic algorithm won this run's race, and a close race can go
// the other way next run: different algorithms round differently. The same bits every run
// therefore need the heuristic's choice, which depends only on the shapes, the GPU and cuDNN.
void apply_determinism(TrainOptions& options) {
  if (!options.cuda.deterministic) return;
  if (options.conv_algorithms_given &&
      options.cuda.conv_search == cuda::ConvAlgorithmSearch::timed)
    fail("--deterministic and --conv-algorithms timed contradict each other: timing may choose "
         "other algorithms next run, and they round differently; drop --conv-algorithms timed");
  options.cuda.conv_search = cuda::ConvAlgorithmSearch::heuristic;
}

void apply_optimizer_defaults(TrainOptions& options) {
  // torch.optim.AdamW's defaults (already in OptimizerConfig), or the PyTorch ImageNet
  // example's SGD recipe.
  if (options.optimizer.kind == OptimizerKind::sgd) {
    if (!options.lr_given) options.optimizer.lr = 0.1;
    if (!options.weight_decay_given) options.optimizer.weight_decay = 1e-4;
    if (!options.momentum_given) options.optimizer.momentum = 0.9;
  } else if (options.momentum_given || options.optimizer.nesterov) {
    fail("--momentum and --nesterov are SGD settings: add --optimizer sgd, or drop them for AdamW");
  }
}

void check_combinations(const TrainOptions& o) {
  if (o.data.path.empty() && o.data.kind != data::DatasetKind::synthetic)
    fail("--data DIR is required (or --dataset synthetic for generated images)");
  if (o.resume && o.checkpoint_dir.empty()) fail("--resume needs --checkpoint-dir DIR");
  if (o.checkpoint_every > 0 && o.checkpoint_dir.empty()) fail("--checkpoint-every needs --checkpoint-dir DIR");
  if (o.eval_only && o.profile_first_step > 0)
    fail("--profile-steps marks training steps, and --eval trains none: drop one of the two");
  if (o.eval_only && o.init_path.empty() && !o.resume)
    fail("--eval needs weights to evaluate: --init FILE, or --resume with --checkpoint-dir");
  if (o.init_reset_classifier && o.init_path.empty()) fail("--init-reset-classifier goes with --init FILE");
  if (!o.init_path.empty() && o.resume) fail("--init and --resume both choose the starting weights: use one");
  if (o.warmup_epochs > o.epochs) fail("--warmup-epochs ", o.warmup_epochs, " is longer than --epochs ", o.epochs);
  if (o.cuda.batchnorm != BatchNormImpl::cudnn && o.device == DeviceChoice::cpu)
    fail("--batchnorm ", to_string(o.cuda.batchnorm), " chooses GPU kernels, but --device cpu trains on the CPU, "
         "which has one BatchNorm: drop one of the two");
  if (o.cuda.memory_format == MemoryFormat::nhwc && o.device == DeviceChoice::cpu)
    fail("--memory-format nhwc lays out GPU activations, but --device cpu trains on the CPU, whose "
         "layers are NCHW only: drop one of the two");
  if (o.cuda.conv_api == cuda::ConvApi::graph && o.device == DeviceChoice::cpu)
    fail("--conv-api graph chooses how cuDNN runs the convolutions, but --device cpu trains on the CPU: drop one "
         "of the two");
  if (o.cuda.cuda_graphs && o.device == DeviceChoice::cpu)
    fail("--cuda-graphs on replays CUDA work and needs the CUDA engine: drop --device cpu, or use "
         "--cuda-graphs off");
  o.optimizer.validate();
}

}  // namespace

std::string usage() {
  std::ostringstream out;
  out << "usage: resnet_ddp --data DIR [options]\n"
         "       srun resnet_ddp --data DIR [options]      (one task per GPU)\n"
         "       mpirun -np N resnet_ddp --data DIR [options]\n\n"
         "Trains torchvision's ResNet-18, data-parallel over every rank of the job.\n\noptions:\n";
  for (const Flag& flag : flags()) {
    std::string left = std::string("  ") + flag.name + (flag.value ? std::string(" ") + flag.value : "");
    out << left << std::string(left.size() < 28 ? 28 - left.size() : 1, ' ') << flag.help << "\n";
  }
  out << "  --help                    this text\n"
         "  --version                 the version, and those of the libraries it runs with\n";
  return out.str();
}

bool parse_options(int argc, const char* const* argv, TrainOptions& options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage().c_str(), stdout);
      return false;
    }
    if (arg == "--version") {
      std::printf("resnet_ddp %s\n", kVersion);
      for (const auto& [library, version] : library_versions())
        std::printf("  %-13s %s\n", library.c_str(), version.c_str());
      return false;
    }
    std::string value;
    bool inline_value = false;
    if (const size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inline_value = true;
    }
    const Flag* flag = nullptr;
    for (const Flag& candidate : flags())
      if (arg == candidate.name) flag = &candidate;
    if (!flag) fail("unknown option '", argv[i], "' (resnet_ddp --help lists the options)");
    if (flag->value && !inline_value) {
      if (i + 1 >= argc) fail(arg, " needs a value: ", arg, " ", flag->value);
      value = argv[++i];
    } else if (!flag->value && inline_value) {
      fail(arg, " takes no value");
    }
    flag->apply(options, arg, value);
    options.given.emplace_back(arg, value);
  }
  apply_optimizer_defaults(options);
  apply_determinism(options);
  check_combinations(options);
  return true;
}

}  // namespace rddp
