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
  const OptimizerConfig& opt = f.options.optimizer;
  const std::string optimizer =
      std::string(to_string(opt.kind)) + ", lr " + general(opt.lr) + ", weight decay " + general(opt.weight_decay) +
      (opt.decay_norm_and_bias ? "" : " (not on BatchNorm and biases)") +
      (opt.kind == OptimizerKind::sgd
           ? ", momentum " + general(opt.momentum) + (opt.nesterov ? " (nesterov)" : "")
           : ", betas " + general(opt.beta1) + "/" + general(opt.beta2) + ", eps " + general(opt.eps));
  std::vector<std::pair<std::string, std::string>> rows = {
      {"world size", std::to_string(f.world_size) + (f.world_size > 1 ? " ranks" : " rank")},
      {"device", std::string(to_string(f.device)) + " (" + f.device_name +
                     (f.device == DeviceKind::cpu ? std::string(", ") + cpu::to_string(cpu::gemm_kernel()) + " GEMM"
                                                 : "") +
                     "; " + f.device_reason + ")"},
      {"data", f.data.train->description()},
      {"validation", f.data.val ? f.data.val->description() : "none"},
      {"model", "ResNet-18, " + spec_summary(f.engine.spec) + ", " +
                    std::to_string(f.parameters) + " parameters"},
      {"MFU", f.device == DeviceKind::cuda
                  ? (f.peak.tflops > 0 ? "against " : "") + f.peak.basis + "; " + fixed(f.flops_per_image / 1e9, 2) +
                        " GFLOP per training image (3 x 2 x forward multiply-adds)"
                  : std::string("not reported on the CPU")},
      {"start", f.start},
      {"train transform", data::to_string(f.data.train_transform)},
      {"eval transform", data::to_string(f.data.eval_transform)},
      {"normalisation", f.data.normalization.name +
                            (f.engine.input == BatchInput::pixels
                                 ? " (on the GPU, from the batch's uint8 pixels)"
                                 : " (by the loader's threads)")},
      {"batch size", std::to_string(f.data_config.batch_size) + " per rank, " +
                         std::to_string(f.data_config.batch_size * f.world_size) + " effective"},
      {"steps", std::to_string(f.steps_per_epoch) + " per epoch x " + std::to_string(f.options.epochs) + " epochs" +
                    (f.options.max_steps ? ", at most " + std::to_string(f.options.max_steps) : "")},
      {"optimizer", optimizer},
      {"lr schedule", std::string(to_string(f.options.lr_schedule)) +
                          (f.options.warmup_epochs > 0 ? ", warm-up " + general(f.options.warmup_epochs) + " epochs" : "")},
      {"label smoothing", general(f.options.label_smoothing)},
      {"precision", (f.precision_meaning.empty() ? std::string(to_string(f.options.precision))
                                                : f.precision_meaning) +
                        (f.device == DeviceKind::cuda
                             ? std::string(", ") + (f.options.cuda.deterministic ? "deterministic" : "fastest") +
                                   " cuDNN algorithms, " + (f.options.cuda.conv_search == cuda::ConvAlgorithmSearch::timed ? "timed" : "heuristic") +
                                   " choice" + (f.options.cuda.conv_api == cuda::ConvApi::graph ? " among the graph API's plans" : "")
                             : std::string(" (the CPU always computes in float32)"))},
      {"memory format", f.device == DeviceKind::cuda
                            ? std::string(to_string(f.options.cuda.memory_format)) +
                                  (f.options.memory_format_given ? "" : " (the default)")
                            : std::string("nchw (the CPU engine's only layout)")},
      {"batchnorm", f.device == DeviceKind::cuda ? std::string(to_string(f.options.cuda.batchnorm)) +
                                                      batchnorm_description(f.options.cuda.batchnorm)
                                                : std::string("the CPU engine's")},
      {"cuda graphs", f.options.cuda.cuda_graphs
                          ? "on: the training step captured after " +
                                std::to_string(cuda::GraphStepPolicy::kWarmupSteps) +
                                " eager steps and replayed; smaller batches and evaluation eager"
                          : std::string("off")},
      {"loader", std::to_string(f.loader_workers) + " worker thread(s) per rank, " +
                     f.batch_buffers + " batch buffers, " +
                     data::keep_freed_image_memory()},
      {"communication", f.communication},
      {"grad allreduce", f.options.grad_allreduce == ddp::GradAllreduce::bf16
                                 ? std::string("bf16: sent and summed as bfloat16, half the bytes of fp32 "
                                               "(DDP's bf16_compress_hook)") +
                                       (f.world_size > 1 ? "" : "; with one rank it only rounds the gradients")
                                 : std::string("fp32")},
      {"checkpoints", f.options.checkpoint_dir.empty() ? "none" : f.options.checkpoint_dir},
      {"replica check", f.world_size > 1 ? "every rank's weights and optimizer state against rank 0's "
                                            "(CRC-32) after every epoch and before every checkpoint"
                                          : "none (one rank)"},
      {"profiling", "NVTX ranges in domain resnet_ddp" +
                        (f.options.profile_first_step == 0
                             ? std::string()
                             : "; profiler collects global steps " + std::to_string(f.options.profile_first_step) +
                                   " to " + std::to_string(f.options.profile_last_step) +
                                   (f.device == DeviceKind::cuda ? " (cudaProfilerStart/Stop)"
                                                                : " (the \"profiled steps\" range)"))},
  };
  const std::string faster = faster_flags(f.options);
  if (f.device == DeviceKind::cuda && !faster.empty())
    rows.push_back({"speed", "faster with " + faster + " (README: Results)"});
  return rows;
}


}  // namespace rddp
