#pragma once
// Everything the command line sets, with PyTorch-example defaults. parse_options() rejects a
// wrong value before any work is done, naming the flag and the accepted range.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "resnet_ddp/data/data_config.h"
#include "resnet_ddp/ddp/grad_allreduce.h"
#include "resnet_ddp/cuda/engine_options.h"
#include "resnet_ddp/engine.h"
#include "resnet_ddp/optimizer.h"

namespace rddp {

enum class DeviceChoice { automatic, cpu, cuda };
enum class LrSchedule { constant, cosine, step };

const char* to_string(DeviceChoice choice);
const char* to_string(LrSchedule schedule);

struct TrainOptions {
  data::DataConfig data;

  std::string stem = "auto";  // auto: cifar for images up to 64 pixels, else imagenet
  DeviceChoice device = DeviceChoice::automatic;
  Precision precision = Precision::tf32;
  // The CUDA engine's own settings (layout, BatchNorm, convolution algorithms, CUDA graphs);
  // the trainer sets device_index. Their defaults stay the conservative ones until a whole GPU
  // training run with the fastest has been compared with PyTorch's (docs/performance.md).
  CudaEngineOptions cuda;
  bool memory_format_given = false;
  bool conv_algorithms_given = false;  // --deterministic turns timing off unless this is set

  int epochs = 10;
  int64_t max_steps = 0;  // stop after this many training steps in all (0: no limit)
  OptimizerConfig optimizer;
  bool lr_given = false, weight_decay_given = false, momentum_given = false;
  double label_smoothing = 0.0;
  LrSchedule lr_schedule = LrSchedule::constant;
  double warmup_epochs = 0.0;
  std::vector<int> lr_step_epochs = {30, 60, 80};  // --lr-schedule step: multiply by gamma at these
  double lr_gamma = 0.1;
  uint64_t seed = 0;
  bool shuffle = true;

  bool eval_only = false;
  std::string init_path;
  bool init_reset_classifier = false;
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;  // also every this many steps (0: at epoch ends only)
  int keep_checkpoints = 3;
  bool resume = false;
  std::string log_json;
  std::string save_weights;  // final weights file, written by rank 0
  int print_every = 50;      // steps between plain progress lines when stdout is no terminal
  // Global steps (1-based, as progress lines count them) during which a profiler started with
  // a capture range collects: cudaProfilerStart before the first, cudaProfilerStop after the
  // last (0, 0: none).
  int64_t profile_first_step = 0, profile_last_step = 0;

  double bucket_mb = 25.0;
  ddp::GradAllreduce grad_allreduce = ddp::GradAllreduce::fp32;
  double comm_timeout_s = 600.0;

  // Each flag as the command line gave it, in order: (flag, value), the value empty for a
  // switch. The ranks compare these with rank 0's before any work (train/rank_settings.h).
  std::vector<std::pair<std::string, std::string>> given;
};

// Parses argv. Returns false when --help or --version printed what was asked (exit 0).
// Throws Error for anything wrong, naming the flag.
bool parse_options(int argc, const char* const* argv, TrainOptions& options);

// The --help text.
std::string usage();

}  // namespace rddp
