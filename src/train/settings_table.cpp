#include "resnet_ddp/train/settings_table.h"

#include "resnet_ddp/cpu/gemm.h"
#include "resnet_ddp/cuda/graph_step_policy.h"
#include "resnet_ddp/data/malloc_tuning.h"
#include "resnet_ddp/train/run_text.h"
#include "resnet_ddp/weights.h"

namespace rddp {

namespace {

// What the settings table says of each BatchNorm implementation.
const char* batchnorm_description(BatchNormImpl impl) {
  switch (impl) {
    case BatchNormImpl::fused: return " (our kernels, ReLU and residual add folded in)";
    case BatchNormImpl::cudnn: break;
  }
  return " (cuDNN)";
}

// The flags of our fastest measured step (fused BatchNorm in NHWC replayed from a CUDA graph:
// about three times the images/s of cuDNN's BatchNorm in NCHW at 224x224 bf16 on an H100,
// bench/results/2026-11-28-H100-fa60b96) that this run leaves out, space-separated; empty when
// it uses them all. They are not the defaults until a whole GPU training run with them has been
// compared with PyTorch's, so the settings table names them rather than leaving a user to find
// them in the README.
}  // namespace

std::string faster_flags(const TrainOptions& options) {
  std::string flags;
  const auto add = [&](bool left_out, const char* flag) {
    if (left_out) flags += (flags.empty() ? "" : " ") + std::string(flag);
  };
  add(options.cuda.batchnorm != BatchNormImpl::fused, "--batchnorm fused");
  add(options.cuda.memory_format != MemoryFormat::nhwc, "--memory-format nhwc");
  add(!options.cuda.cuda_graphs, "--cuda-graphs on");
  return flags;
}


std::vector<std::pair<std::string, std::string>> settings_rows(const SettingsFacts& f) {
  const TrainOptions& o = f.options;
  const bool gpu = f.device == DeviceKind::cuda, ranks = f.world_size > 1;
  const OptimizerConfig& opt = o.optimizer;
  const std::string optimizer =
      std::string(to_string(opt.kind)) + ", lr " + general(opt.lr) + ", weight decay " +
      general(opt.weight_decay) +
      (opt.decay_norm_and_bias ? "" : " (not on BatchNorm and biases)") +
      (opt.kind == OptimizerKind::sgd
           ? ", momentum " + general(opt.momentum) + (opt.nesterov ? " (nesterov)" : "")
           : ", betas " + general(opt.beta1) + "/" + general(opt.beta2) + ", eps " +
                 general(opt.eps));
  std::string precision =
      f.precision_meaning.empty() ? std::string(to_string(o.precision)) : f.precision_meaning;
  if (gpu) {
    precision += std::string(", ") + (o.cuda.deterministic ? "deterministic" : "fastest") +
                 " cuDNN algorithms, " +
                 (o.cuda.conv_search == cuda::ConvAlgorithmSearch::timed ? "timed" : "heuristic") +
                 " choice" +
                 (o.cuda.conv_api == cuda::ConvApi::graph ? " among the graph API's plans" : "");
  } else {
    precision += " (the CPU always computes in float32)";
  }
  std::string profiling = "NVTX ranges in domain resnet_ddp";
  if (o.profile_first_step != 0)
    profiling += "; profiler collects global steps " + std::to_string(o.profile_first_step) +
                 " to " + std::to_string(o.profile_last_step) +
                 (gpu ? " (cudaProfilerStart/Stop)" : " (the \"profiled steps\" range)");

  std::vector<std::pair<std::string, std::string>> rows;
  // What the user chose or can change; a row marked detail shows only with --verbose.
  const auto row = [&](const char* key, std::string value, bool detail = false) {
    if (!detail || o.verbose) rows.emplace_back(key, std::move(value));
  };
  row("world size", std::to_string(f.world_size) + (ranks ? " ranks" : " rank"));
  row("nodes", std::to_string(f.nodes));
  const std::string gemm =
      !gpu && o.verbose ? std::string(", ") + cpu::to_string(cpu::gemm_kernel()) + " GEMM" : "";
  row("device", std::string(to_string(f.device)) + " (" + f.device_name + gemm + "; " +
                    f.device_reason + ")");
  row("data", f.data.train->description());
  row("validation", f.data.val ? f.data.val->description() : "none");
  row("model", "ResNet-18, " + spec_summary(f.engine.spec) + ", " +
                   std::to_string(f.parameters) + " parameters");
  row("MFU",
      gpu ? (f.peak.tflops > 0 ? "against " : "") + f.peak.basis + "; " +
                fixed(f.flops_per_image / 1e9, 2) +
                " GFLOP per training image (3 x 2 x forward multiply-adds)"
          : std::string("not reported on the CPU"),
      !gpu);
  row("start", f.start);
  row("train transform", data::to_string(f.data.train_transform));
  row("eval transform", data::to_string(f.data.eval_transform));
  row("normalisation", f.data.normalization.name +
                           (f.engine.input == BatchInput::pixels
                                ? " (on the GPU, from the batch's uint8 pixels)"
                                : " (by the loader's threads)"));
  row("batch size", std::to_string(f.data_config.batch_size) + " per rank, " +
                        std::to_string(f.data_config.batch_size * f.world_size) + " effective");
  row("steps", std::to_string(f.steps_per_epoch) + " per epoch x " + std::to_string(o.epochs) +
                   " epochs" + (o.max_steps ? ", at most " + std::to_string(o.max_steps) : ""));
  row("optimizer", optimizer);
  row("lr schedule",
      std::string(to_string(o.lr_schedule)) +
          (o.warmup_epochs > 0 ? ", warm-up " + general(o.warmup_epochs) + " epochs" : ""));
  row("label smoothing", general(o.label_smoothing));
  row("precision", precision);
  row("memory format", gpu ? std::string(to_string(o.cuda.memory_format)) +
                                 (o.was_given("--memory-format") ? "" : " (the default)")
                           : std::string("nchw (the CPU engine's only layout)"));
  row("batchnorm",
      gpu ? std::string(to_string(o.cuda.batchnorm)) + batchnorm_description(o.cuda.batchnorm)
          : std::string("the CPU engine's"),
      !gpu);
  row("cuda graphs",
      o.cuda.cuda_graphs ? "on: the training step captured after " +
                               std::to_string(cuda::GraphStepPolicy::kWarmupSteps) +
                               " eager steps and replayed; smaller batches and evaluation eager"
                         : std::string("off"),
      !gpu);
  row("loader", std::to_string(f.loader_workers) + " worker thread(s) per rank" +
                    (o.verbose ? ", " + f.batch_buffers + " batch buffers, " +
                                     data::keep_freed_image_memory()
                               : std::string()));
  row("communication", f.communication, true);
  const bool bf16 = o.grad_allreduce == ddp::GradAllreduce::bf16;
  row("grad allreduce",
      bf16 ? std::string("bf16: sent and summed as bfloat16, half the bytes of fp32 "
                         "(DDP's bf16_compress_hook)") +
                 (ranks ? "" : "; with one rank it only rounds the gradients")
           : std::string("fp32"),
      !ranks && !bf16);
  row("checkpoints", o.checkpoint_dir.empty() ? "none" : o.checkpoint_dir);
  row("replica check",
      ranks ? "every rank's weights and optimizer state against rank 0's (CRC-32) after every "
              "epoch and before every checkpoint"
            : "none (one rank)",
      !ranks);
  row("profiling", profiling, o.profile_first_step == 0);
  const std::string faster = faster_flags(o);
  if (gpu && !faster.empty()) row("speed", "faster with " + faster + " (docs/performance.md)");
  return rows;
}

}  // namespace rddp
