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

  std::string stem = "auto";  // auto: --init's stem, else cifar up to 64 pixels, else imagenet
  DeviceChoice device = DeviceChoice::automatic;
  Precision precision = Precision::tf32;
  // The CUDA engine's own settings (layout, BatchNorm, convolution algorithms, CUDA graphs);
  // the trainer sets device_index.
  CudaEngineOptions cuda;

  int epochs = 10;
  int64_t max_steps = 0;  // stop after this many training steps in all (0: no limit)
  OptimizerConfig optimizer;
  double label_smoothing = 0.0;
  LrSchedule lr_schedule = LrSchedule::constant;
  double warmup_epochs = 0.0;
  std::vector<int> lr_step_epochs = {30, 60, 80};  // --lr-schedule step: multiply by gamma at these
  double lr_gamma = 0.1;
  uint64_t seed = 0;

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
  bool verbose = false;      // the settings table with how the run works, not only what it does
  // Global steps (1-based, as progress lines count them) during which a profiler started with
  // a capture range collects: cudaProfilerStart before the first, cudaProfilerStop after the
  // last (0, 0: none).
  int64_t profile_first_step = 0, profile_last_step = 0;

  double bucket_mb = 25.0;
  ddp::GradAllreduce grad_allreduce = ddp::GradAllreduce::fp32;
  double comm_timeout_s = 600.0;

  // Each flag as the command line gave it, in order: (flag, value), the value empty for a
  // switch. A default may depend on another choice, a flag given where it does not apply is
  // refused, and the ranks compare these with rank 0's before any work (train/rank_settings.h).
  std::vector<std::pair<std::string, std::string>> given_values;
  bool was_given(const std::string& flag) const {
    for (const auto& given : given_values)
      if (given.first == flag) return true;
    return false;
  }
};

// Parses argv. Returns false when --help or --version printed what was asked (exit 0).
// Throws Error for anything wrong, naming the flag; a flag given where it does not apply (to
// the optimizer, the schedule, --eval, --device cpu...) is refused, never ignored.
bool parse_options(int argc, const char* const* argv, TrainOptions& options);

// The same refusal for the flags that apply to GPU training alone, once the run is known to
// train on the CPU (--device auto where no GPU answers); `why` says why, e.g. "auto: no CUDA
// device answers (...)".
void refuse_gpu_flags_on_cpu(const TrainOptions& options, const std::string& why);

// The --help text.
std::string usage();

}  // namespace rddp
