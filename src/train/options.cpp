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
  if (value < low || value > high)
    fail(flag, ": ", text, " is outside the accepted range [", low, ", ", high, "]");
  return value;
}

int64_t parse_integer(const std::string& flag, const std::string& text, int64_t low, int64_t high) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE)
    fail(flag, ": '", text, "' is not a whole number");
  if (value < low || value > high)
    fail(flag, ": ", text, " is outside the accepted range [", low, ", ", high, "]");
  return value;
}

// "A-B" (A <= B) or "A" (that step alone), steps counted from 1.
void parse_step_range(const std::string& flag, const std::string& text, int64_t& first,
                      int64_t& last) {
  const size_t dash = text.find('-');
  const auto digits = [](const std::string& part) {
    return !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!digits(text.substr(0, dash)) ||
      (dash != std::string::npos && !digits(text.substr(dash + 1))))
    fail(flag, ": '", text,
         "' is not a step range; give FIRST-LAST (global steps from 1), e.g. 100-120");
  const int64_t most = std::numeric_limits<int64_t>::max();
  first = parse_integer(flag, text.substr(0, dash), 1, most);
  last = dash == std::string::npos ? first : parse_integer(flag, text.substr(dash + 1), 1, most);
  if (last < first)
    fail(flag, ": '", text,
         "' ends before it starts; give FIRST-LAST with FIRST <= LAST, e.g. 100-120");
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

// What a flag applies to. A flag given where its scope does not hold is refused before any
// work, naming what it applies to and the fix: a flag silently ignored hides a mistake.
enum Scope : unsigned {
  kAlways = 0,
  kTraining = 1u << 0,        // not --eval
  kAdamw = 1u << 1,           // --optimizer adamw
  kSgd = 1u << 2,             // --optimizer sgd
  kStepSchedule = 1u << 3,    // --lr-schedule step
  kGpu = 1u << 4,             // GPU training: not --device cpu, nor where no GPU answers
  kInit = 1u << 5,            // with --init
  kCheckpointDir = 1u << 6,   // with --checkpoint-dir
  kSeeded = 1u << 7,          // training, or the classifier --init-reset-classifier starts
  kCheckpointRead = 1u << 8,  // training, or --eval of the checkpoint --resume reads
};

struct ScopeRule {
  Scope scope;
  const char* applies_to;
  bool (*holds)(const TrainOptions&);
  // Why it does not hold in this run, and what to do instead of dropping the flag.
  std::string (*this_run)(const TrainOptions&);
  const char* instead;
};

std::string default_note(const TrainOptions& o, const char* flag) {
  return o.was_given(flag) ? "" : " (the default)";
}

const std::vector<ScopeRule>& scope_rules() {
  static const std::vector<ScopeRule> rules = {
      {kTraining, "training", [](const TrainOptions& o) { return !o.eval_only; },
       [](const TrainOptions&) { return std::string("--eval trains none"); }, "drop --eval"},
      {kAdamw, "--optimizer adamw",
       [](const TrainOptions& o) { return o.optimizer.kind == OptimizerKind::adamw; },
       [](const TrainOptions& o) {
         return std::string("this run uses --optimizer ") + to_string(o.optimizer.kind);
       },
       "choose --optimizer adamw"},
      {kSgd, "--optimizer sgd",
       [](const TrainOptions& o) { return o.optimizer.kind == OptimizerKind::sgd; },
       [](const TrainOptions& o) {
         return std::string("this run uses --optimizer ") + to_string(o.optimizer.kind) +
                default_note(o, "--optimizer");
       },
       "add --optimizer sgd"},
      {kStepSchedule, "--lr-schedule step",
       [](const TrainOptions& o) { return o.lr_schedule == LrSchedule::step; },
       [](const TrainOptions& o) {
         return std::string("this run uses --lr-schedule ") + to_string(o.lr_schedule) +
                default_note(o, "--lr-schedule");
       },
       "add --lr-schedule step"},
      {kGpu, "GPU training", [](const TrainOptions& o) { return o.device != DeviceChoice::cpu; },
       [](const TrainOptions&) { return std::string("this run trains on the CPU (--device cpu)"); },
       "train on a GPU (--device cuda, or auto where one answers)"},
      {kInit, "--init FILE", [](const TrainOptions& o) { return !o.init_path.empty(); },
       [](const TrainOptions&) { return std::string("this run has no --init"); },
       "add --init FILE"},
      {kCheckpointDir, "--checkpoint-dir DIR",
       [](const TrainOptions& o) { return !o.checkpoint_dir.empty(); },
       [](const TrainOptions&) { return std::string("this run has no --checkpoint-dir"); },
       "add --checkpoint-dir DIR"},
      {kSeeded, "training and the new classifier of --init-reset-classifier",
       [](const TrainOptions& o) { return !o.eval_only || o.init_reset_classifier; },
       [](const TrainOptions&) {
         return std::string("--eval trains none and starts no classifier");
       },
       "drop --eval"},
      {kCheckpointRead, "training and --eval --resume",
       [](const TrainOptions& o) { return !o.eval_only || o.resume; },
       [](const TrainOptions&) {
         return std::string("--eval without --resume reads no checkpoint");
       },
       "add --resume to evaluate the newest checkpoint in DIR"},
  };
  return rules;
}

const ScopeRule& rule_of(Scope scope) {
  for (const ScopeRule& rule : scope_rules())
    if (rule.scope == scope) return rule;
  RDDP_ASSERT(false);
  return scope_rules().front();
}

[[noreturn]] void refuse(const std::string& flag, const ScopeRule& rule,
                         const std::string& this_run, const std::string& instead) {
  fail(flag, " applies to ", rule.applies_to, ", but ", this_run, ": drop ", flag, ", or ",
       instead);
}

// The groups of --help and of docs/flags.md, in this order.
constexpr const char* kData = "data";
constexpr const char* kModel = "model";
constexpr const char* kTrain = "training";
constexpr const char* kOptimizer = "optimizer";
constexpr const char* kSchedule = "schedule";
constexpr const char* kCheckpoints = "checkpoints";
constexpr const char* kOutput = "output";
constexpr const char* kGpuGroup = "GPU";
constexpr const char* kDistributed = "distributed";
constexpr const char* kHelp = "help";

struct Flag {
  const char* group;
  const char* name;
  const char* value;  // placeholder in --help; null for a switch
  const char* help;   // what it does, and its default
  unsigned scope;     // Scope bits that must all hold where the flag is given
  // Null for --help and --version, which parse_options answers itself.
  std::function<void(TrainOptions&, const std::string& flag, const std::string& value)> apply;
};

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {kData, "--data", "DIR",
       "data directory, or a CIFAR .tar.gz as torchvision downloads it; its format is detected "
       "(see --dataset). Required but for --dataset synthetic, which does not read it",
       kAlways, [](TrainOptions& o, auto&, auto& v) { o.data.path = v; }},
      {kData, "--dataset", "KIND",
       "auto (default: detected), cifar10, cifar100, idx, imagefolder, tiny-imagenet, packed, "
       "synthetic (generated images, no --data)",
       kAlways,
       [](TrainOptions& o, auto& f, auto& v) {
         o.data.kind = with_flag(f, [&] { return data::parse_dataset_kind(v); });
       }},
      {kData, "--batch-size", "N",
       "images per rank and step (default 128); the effective batch is N x ranks", kAlways,
       [](TrainOptions& o, auto& f, auto& v) {
         o.data.batch_size = parse_integer(f, v, 1, 1 << 20);
       }},
      {kData, "--num-workers", "N",
       "loader threads per rank (default: SLURM_CPUS_PER_TASK, else the CPU affinity mask, less "
       "one for training)",
       kAlways,
       [](TrainOptions& o, auto& f, auto& v) { o.data.workers = parse_integer(f, v, 1, 1024); }},
      {kData, "--augment", "MODE",
       "training augmentation: auto (default: crop-flip for fixed-size images, resized-crop-flip "
       "for image folders), none, crop-flip, resized-crop-flip",
       kTraining,
       [](TrainOptions& o, auto& f, auto& v) {
         o.data.augment = with_flag(f, [&] { return data::parse_augment_mode(v); });
       }},
      {kData, "--image-size", "N",
       "training and evaluation image size (default: the data set's, 224 for image folders)",
       kAlways,
       [](TrainOptions& o, auto& f, auto& v) { o.data.image_size = parse_integer(f, v, 1, 4096); }},
      {kData, "--val-split", "FRACTION",
       "hold out this fraction (0 < f < 1) of the training set for validation (default: the data "
       "set's own validation split)",
       kAlways,
       [](TrainOptions& o, auto& f, auto& v) {
         o.data.val_fraction = parse_real(f, v, 1e-6, 0.999999);
       }},
      {kData, "--limit-train", "N", "train on the first N training samples only (default: all)",
       kTraining,
       [](TrainOptions& o, auto& f, auto& v) {
         o.data.limit_train = parse_integer(f, v, 1, kMaxCount);
       }},
      {kData, "--limit-val", "N", "evaluate on the first N validation samples only (default: all)",
       kAlways,
       [](TrainOptions& o, auto& f, auto& v) {
         o.data.limit_val = parse_integer(f, v, 1, kMaxCount);
       }},
      {kData, "--no-shuffle", nullptr,
       "keep the training order: rank r takes samples r, r + ranks, ... as "
       "DistributedSampler(shuffle=False) (default: a new order each epoch, from --seed)",
       kTraining, [](TrainOptions& o, auto&, auto&) { o.data.shuffle = false; }},

      {kModel, "--stem", "KIND",
       "auto (default: the --init file's stem, else cifar for images up to 64 px, else "
       "imagenet), imagenet (7x7/2 conv + maxpool) or cifar (3x3/1 conv)",
       kAlways,
       [](TrainOptions& o, auto& f, auto& v) {
         if (v != "auto" && v != "imagenet" && v != "cifar")
           fail(f, ": '", v, "' is not one of: auto, imagenet, cifar");
         o.stem = v;
       }},
      {kModel, "--init", "FILE",
       "start from these weights (a resnet_ddp weights file, e.g. converted from torchvision; "
       "default: torchvision's initialisation from --seed)",
       kAlways, [](TrainOptions& o, auto&, auto& v) { o.init_path = v; }},
      {kModel, "--init-reset-classifier", nullptr,
       "with --init: when the file's class count differs from the data's, load everything but "
       "fc and start a new fc",
       kInit, [](TrainOptions& o, auto&, auto&) { o.init_reset_classifier = true; }},

      {kTrain, "--device", "KIND", "auto (default: a GPU when one answers), cpu or cuda", kAlways,
       [](TrainOptions& o, auto& f, auto& v) {
         o.device = parse_choice<DeviceChoice>(f, v,
                                               {{"auto", DeviceChoice::automatic},
                                                {"cpu", DeviceChoice::cpu},
                                                {"cuda", DeviceChoice::cuda}});
       }},
      {kTrain, "--precision", "KIND",
       "tf32 (default: TF32 tensor cores, as PyTorch's cuDNN), fp32 (strict), bf16 (GPU: mixed "
       "precision as torch.autocast(bfloat16), float32 master weights) or fp16 (GPU: the same in "
       "float16 with GradScaler's dynamic loss scaling; a step with Inf/NaN gradients is skipped "
       "and reported). The CPU computes in float32",
       kAlways,
       [](TrainOptions& o, auto& f, auto& v) {
         o.precision = parse_choice<Precision>(f, v,
                                               {{"tf32", Precision::tf32},
                                                {"fp32", Precision::fp32},
                                                {"bf16", Precision::bf16},
                                                {"fp16", Precision::fp16}});
       }},
      {kTrain, "--epochs", "N", "training epochs (default 10)", kTraining,
       [](TrainOptions& o, auto& f, auto& v) { o.epochs = parse_integer(f, v, 1, 100000); }},
      {kTrain, "--max-steps", "N", "stop after N training steps in all (default: no limit)",
       kTraining,
       [](TrainOptions& o, auto& f, auto& v) {
         o.max_steps = parse_integer(f, v, 1, std::numeric_limits<int64_t>::max());
       }},
      {kTrain, "--label-smoothing", "EPS", "cross-entropy label smoothing in [0, 1) (default 0)",
       kAlways,
       [](TrainOptions& o, auto& f, auto& v) {
         o.label_smoothing = parse_real(f, v, 0, 0.999999);
       }},
      {kTrain, "--seed", "N", "seed of initialisation, shuffling and augmentation (default 0)",
       kSeeded,
       [](TrainOptions& o, auto& f, auto& v) {
         o.seed = parse_integer(f, v, 0, std::numeric_limits<int64_t>::max());
       }},
      {kTrain, "--eval", nullptr,
       "evaluate the weights of --init or --resume, no training (default off)", kAlways,
       [](TrainOptions& o, auto&, auto&) { o.eval_only = true; }},

      {kOptimizer, "--optimizer", "KIND", "adamw (default) or sgd", kTraining,
       [](TrainOptions& o, auto& f, auto& v) {
         o.optimizer.kind = with_flag(f, [&] { return parse_optimizer(v); });
       }},
      {kOptimizer, "--lr", "RATE", "learning rate (default: 1e-3 for adamw, 0.1 for sgd)",
       kTraining,
       [](TrainOptions& o, auto& f, auto& v) { o.optimizer.lr = parse_real(f, v, 1e-12, 1e3); }},
      {kOptimizer, "--weight-decay", "WD",
       "weight decay (default: 1e-2 for adamw, decoupled; 1e-4 for sgd)", kTraining,
       [](TrainOptions& o, auto& f, auto& v) {
         o.optimizer.weight_decay = parse_real(f, v, 0, 10);
       }},
      {kOptimizer, "--no-decay-norm-bias", nullptr,
       "no weight decay on BatchNorm weights and biases and fc.bias (every 1-D parameter), as "
       "a param group of weight_decay 0 (default: every parameter decays, as torch.optim)",
       kTraining, [](TrainOptions& o, auto&, auto&) { o.optimizer.decay_norm_and_bias = false; }},
      {kOptimizer, "--momentum", "M", "SGD momentum (default 0.9)", kTraining | kSgd,
       [](TrainOptions& o, auto& f, auto& v) {
         o.optimizer.momentum = parse_real(f, v, 0, 0.999999);
       }},
      {kOptimizer, "--nesterov", nullptr, "SGD with Nesterov momentum (default off)",
       kTraining | kSgd, [](TrainOptions& o, auto&, auto&) { o.optimizer.nesterov = true; }},
      {kOptimizer, "--beta1", "B", "AdamW beta1 (default 0.9)", kTraining | kAdamw,
       [](TrainOptions& o, auto& f, auto& v) {
         o.optimizer.beta1 = parse_real(f, v, 0, 0.999999);
       }},
      {kOptimizer, "--beta2", "B", "AdamW beta2 (default 0.999)", kTraining | kAdamw,
       [](TrainOptions& o, auto& f, auto& v) {
         o.optimizer.beta2 = parse_real(f, v, 0, 0.999999);
       }},
      {kOptimizer, "--eps", "EPS", "AdamW epsilon (default 1e-8)", kTraining | kAdamw,
       [](TrainOptions& o, auto& f, auto& v) { o.optimizer.eps = parse_real(f, v, 1e-30, 1); }},

      {kSchedule, "--lr-schedule", "KIND",
       "constant (default), cosine (to 0 at the last step) or step", kTraining,
       [](TrainOptions& o, auto& f, auto& v) {
         o.lr_schedule = parse_choice<LrSchedule>(f, v,
                                                  {{"constant", LrSchedule::constant},
                                                   {"cosine", LrSchedule::cosine},
                                                   {"step", LrSchedule::step}});
       }},
      {kSchedule, "--warmup-epochs", "E",
       "linear warm-up from 0 over E epochs, fractions allowed, before any schedule (default 0)",
       kTraining,
       [](TrainOptions& o, auto& f, auto& v) { o.warmup_epochs = parse_real(f, v, 0, 1e5); }},
      {kSchedule, "--lr-step-epochs", "E1,E2,..",
       "multiply the rate by --lr-gamma at these epochs (default 30,60,80)",
       kTraining | kStepSchedule,
       [](TrainOptions& o, auto& f, auto& v) {
         o.lr_step_epochs.clear();
         std::stringstream list(v);
         for (std::string item; std::getline(list, item, ',');)
           o.lr_step_epochs.push_back(static_cast<int>(parse_integer(f, item, 1, 100000)));
         for (size_t i = 1; i < o.lr_step_epochs.size(); ++i)
           if (o.lr_step_epochs[i] <= o.lr_step_epochs[i - 1])
             fail(f, ": epochs must increase, got '", v, "'");
       }},
      {kSchedule, "--lr-gamma", "G", "the factor of --lr-step-epochs (default 0.1)",
       kTraining | kStepSchedule,
       [](TrainOptions& o, auto& f, auto& v) { o.lr_gamma = parse_real(f, v, 1e-6, 1); }},

      {kCheckpoints, "--checkpoint-dir", "DIR",
       "write a checkpoint here (rank 0) at every epoch's end, and where training stops (default: "
       "none)",
       kCheckpointRead, [](TrainOptions& o, auto&, auto& v) { o.checkpoint_dir = v; }},
      {kCheckpoints, "--checkpoint-every", "N",
       "also checkpoint every N steps (default: at epoch ends only)", kTraining | kCheckpointDir,
       [](TrainOptions& o, auto& f, auto& v) {
         o.checkpoint_every = parse_integer(f, v, 1, kMaxCount);
       }},
      {kCheckpoints, "--keep-checkpoints", "K",
       "keep the newest K checkpoints, delete older ones (default 3)", kTraining | kCheckpointDir,
       [](TrainOptions& o, auto& f, auto& v) {
         o.keep_checkpoints = parse_integer(f, v, 1, 1000);
       }},
      {kCheckpoints, "--resume", nullptr,
       "continue from the newest valid checkpoint in --checkpoint-dir, or start afresh when it "
       "holds none (default off)",
       kCheckpointDir, [](TrainOptions& o, auto&, auto&) { o.resume = true; }},
      {kCheckpoints, "--save-weights", "FILE",
       "write the final weights here (rank 0; every rank when FILE holds {rank}; default: none)",
       kTraining, [](TrainOptions& o, auto&, auto& v) { o.save_weights = v; }},

      {kOutput, "--log-json", "FILE",
       "append one JSON object per progress line, per epoch and per evaluation (rank 0; "
       "default: none)",
       kAlways, [](TrainOptions& o, auto&, auto& v) { o.log_json = v; }},
      {kOutput, "--print-every", "N",
       "steps between progress lines when stdout is not a terminal (default 50)", kTraining,
       [](TrainOptions& o, auto& f, auto& v) {
         o.print_every = parse_integer(f, v, 1, kMaxCount);
       }},
      {kOutput, "--verbose", nullptr,
       "the settings table also shows how the run works: buffers, memory tuning, communication "
       "(default off)",
       kAlways, [](TrainOptions& o, auto&, auto&) { o.verbose = true; }},
      {kOutput, "--profile-steps", "A-B",
       "profile global steps A to B: cudaProfilerStart before step A, cudaProfilerStop after B "
       "(nsys profile --capture-range=cudaProfilerApi; default: none)",
       kTraining,
       [](TrainOptions& o, auto& f, auto& v) {
         parse_step_range(f, v, o.profile_first_step, o.profile_last_step);
       }},

      {kGpuGroup, "--memory-format", "KIND",
       "activations' layout: nchw (default) or nhwc (torch.channels_last)", kGpu,
       [](TrainOptions& o, auto& f, auto& v) {
         o.cuda.memory_format = parse_choice<MemoryFormat>(
             f, v, {{"nchw", MemoryFormat::nchw}, {"nhwc", MemoryFormat::nhwc}});
       }},
      {kGpuGroup, "--batchnorm", "KIND",
       "BatchNorm kernels: cudnn (default) or fused (ours, with the ReLU and the residual add "
       "folded in)",
       kGpu,
       [](TrainOptions& o, auto& f, auto& v) { o.cuda.batchnorm = parse_batchnorm_impl(f, v); }},
      {kGpuGroup, "--deterministic", nullptr,
       "the same bits every run: only deterministic cuDNN algorithms, chosen by heuristic rather "
       "than by timing (default off)",
       kGpu, [](TrainOptions& o, auto&, auto&) { o.cuda.deterministic = true; }},
      {kGpuGroup, "--conv-algorithms", "HOW",
       "how convolution algorithms are chosen: timed (default, as cudnn.benchmark) or heuristic",
       kGpu,
       [](TrainOptions& o, auto& f, auto& v) {
         o.cuda.conv_search = parse_choice<cuda::ConvAlgorithmSearch>(
             f, v,
             {{"timed", cuda::ConvAlgorithmSearch::timed},
              {"heuristic", cuda::ConvAlgorithmSearch::heuristic}});
       }},
      {kGpuGroup, "--conv-api", "API",
       "legacy (default: cuDNN's convolution algorithms) or graph (every engine configuration of "
       "cuDNN's graph API, as PyTorch)",
       kGpu,
       [](TrainOptions& o, auto& f, auto& v) {
         o.cuda.conv_api = parse_choice<cuda::ConvApi>(
             f, v, {{"legacy", cuda::ConvApi::legacy}, {"graph", cuda::ConvApi::graph}});
       }},
      {kGpuGroup, "--cuda-graphs", "on|off",
       "capture the training step, with its gradient allreduces on several ranks, once and "
       "replay it as a CUDA graph, saving ~200 kernel launches a step (default off)",
       kGpu | kTraining,
       [](TrainOptions& o, auto& f, auto& v) {
         o.cuda.cuda_graphs = parse_choice<bool>(f, v, {{"on", true}, {"off", false}});
       }},

      {kDistributed, "--bucket-mb", "MB",
       "gradient allreduce bucket size in MiB (default 25; the first bucket is 1 MiB)", kTraining,
       [](TrainOptions& o, auto& f, auto& v) { o.bucket_mb = parse_real(f, v, 0.01, 4096); }},
      {kDistributed, "--grad-allreduce", "TYPE",
       "fp32 (default) or bf16: gradients sent and summed as bfloat16, half the bytes (DDP's "
       "bf16_compress_hook)",
       kTraining,
       [](TrainOptions& o, auto& f, auto& v) {
         o.grad_allreduce = ddp::parse_grad_allreduce(f, v);
       }},
      {kDistributed, "--comm-timeout", "SECONDS",
       "end the job when a collective takes longer (default 600)", kAlways,
       [](TrainOptions& o, auto& f, auto& v) { o.comm_timeout_s = parse_real(f, v, 1, 86400); }},

      {kHelp, "--help", nullptr, "this text", kAlways, nullptr},
      {kHelp, "--version", nullptr, "the version, and those of the libraries it runs with", kAlways,
       nullptr},
  };
  return table;
}

const Flag* find_flag(const std::string& name) {
  for (const Flag& flag : flags())
    if (name == flag.name) return &flag;
  return nullptr;
}

// Each flag given, in the order given, against each scope it declares.
void refuse_flags_out_of_scope(const TrainOptions& options, const std::vector<const Flag*>& given) {
  for (const Flag* flag : given)
    for (const ScopeRule& rule : scope_rules())
      if ((flag->scope & rule.scope) != 0 && !rule.holds(options))
        refuse(flag->name, rule, rule.this_run(options), rule.instead);
}

// Timing picks whichever deterministic algorithm won this run's race, and a close race can go
// the other way next run: different algorithms round differently. The same bits every run
// therefore need the heuristic's choice, which depends only on the shapes, the GPU and cuDNN.
void apply_determinism(TrainOptions& options) {
  if (!options.cuda.deterministic) return;
  if (options.was_given("--conv-algorithms") &&
      options.cuda.conv_search == cuda::ConvAlgorithmSearch::timed)
    fail(
        "--deterministic and --conv-algorithms timed contradict each other: timing may choose "
        "other algorithms next run, and they round differently; drop --conv-algorithms timed");
  options.cuda.conv_search = cuda::ConvAlgorithmSearch::heuristic;
}

// torch.optim.AdamW's defaults (already in OptimizerConfig), or the PyTorch ImageNet example's
// SGD recipe.
void apply_optimizer_defaults(TrainOptions& options) {
  if (options.optimizer.kind != OptimizerKind::sgd) return;
  if (!options.was_given("--lr")) options.optimizer.lr = 0.1;
  if (!options.was_given("--weight-decay")) options.optimizer.weight_decay = 1e-4;
  if (!options.was_given("--momentum")) options.optimizer.momentum = 0.9;
}

void check_combinations(const TrainOptions& o) {
  if (o.data.path.empty() && o.data.kind != data::DatasetKind::synthetic)
    fail("--data DIR is required (or --dataset synthetic for generated images)");
  if (o.eval_only && o.init_path.empty() && !o.resume)
    fail("--eval needs weights to evaluate: --init FILE, or --resume with --checkpoint-dir");
  if (!o.init_path.empty() && o.resume)
    fail("--init and --resume both choose the starting weights: use one");
  if (o.warmup_epochs > o.epochs)
    fail("--warmup-epochs ", o.warmup_epochs, " is longer than --epochs ", o.epochs);
  o.optimizer.validate();
}

// Wraps `text` to lines of at most `width` columns, the first after `first` columns of the
// line, the others after `indent` spaces.
std::string wrapped(const std::string& text, size_t first, size_t indent, size_t width) {
  std::string out, word;
  size_t column = first;
  std::istringstream words(text);
  bool line_start = true;
  while (words >> word) {
    if (!line_start && column + 1 + word.size() > width) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
      line_start = true;
    }
    if (!line_start) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    line_start = false;
  }
  return out;
}

}  // namespace

std::string usage() {
  constexpr size_t kColumn = 28, kWidth = 100;
  std::ostringstream out;
  out << "usage: resnet_ddp --data DIR [options]\n"
         "       srun resnet_ddp --data DIR [options]      (one task per GPU)\n"
         "       mpirun -np N resnet_ddp --data DIR [options]\n\n"
         "Trains torchvision's ResNet-18, data-parallel over every rank of the job.\n"
         "docs/flags.md says what each option applies to.\n";
  std::string group;
  for (const Flag& flag : flags()) {
    if (flag.group != group) {
      group = flag.group;
      out << "\n" << group << ":\n";
    }
    std::string left =
        std::string("  ") + flag.name + (flag.value ? std::string(" ") + flag.value : "");
    left += std::string(left.size() < kColumn ? kColumn - left.size() : 1, ' ');
    out << left << wrapped(flag.help, left.size(), kColumn, kWidth) << "\n";
  }
  return out.str();
}

bool parse_options(int argc, const char* const* argv, TrainOptions& options) {
  std::vector<const Flag*> given;
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
    const Flag* flag = find_flag(arg);
    if (!flag || !flag->apply)
      fail("unknown option '", argv[i], "' (resnet_ddp --help lists the options)");
    if (flag->value && !inline_value) {
      if (i + 1 >= argc) fail(arg, " needs a value: ", arg, " ", flag->value);
      value = argv[++i];
    } else if (!flag->value && inline_value) {
      fail(arg, " takes no value");
    }
    flag->apply(options, arg, value);
    if (!options.was_given(arg)) given.push_back(flag);
    options.given_values.emplace_back(arg, value);
  }
  apply_optimizer_defaults(options);
  refuse_flags_out_of_scope(options, given);
  apply_determinism(options);
  check_combinations(options);
  return true;
}

void refuse_gpu_flags_on_cpu(const TrainOptions& options, const std::string& why) {
  const ScopeRule& gpu = rule_of(kGpu);
  for (const Flag& flag : flags())
    if ((flag.scope & kGpu) != 0 && options.was_given(flag.name))
      refuse(flag.name, gpu, "this run trains on the CPU (" + why + ")", "run where a GPU answers");
}

}  // namespace rddp
