#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "resnet_ddp/error.h"
#include "resnet_ddp/train/lr_schedule.h"
#include "resnet_ddp/train/options.h"

using namespace rddp;

namespace {

TrainOptions parse(std::vector<std::string> args) {
  std::vector<const char*> argv = {"resnet_ddp"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  TrainOptions options;
  // Not REQUIRE: the Error must reach the caller's CHECK_THROWS.
  const bool proceed = parse_options(static_cast<int>(argv.size()), argv.data(), options);
  CHECK(proceed);
  return options;
}

void refused(std::vector<std::string> args, const std::string& says) {
  CAPTURE(says);
  CHECK_THROWS_WITH_AS(parse(std::move(args)), doctest::Contains(says.c_str()), Error);
}

}  // namespace

TEST_CASE("options parse in both --flag value and --flag=value forms") {
  const TrainOptions o = parse({"--data", "/d", "--batch-size=64", "--epochs", "3", "--lr", "0.01",
                                "--optimizer", "sgd", "--nesterov", "--stem", "cifar", "--device", "cpu",
                                "--lr-schedule", "cosine", "--warmup-epochs", "0.5", "--seed", "7"});
  CHECK(o.data.path == "/d");
  CHECK(o.data.batch_size == 64);
  CHECK(o.epochs == 3);
  CHECK(o.optimizer.kind == OptimizerKind::sgd);
  CHECK(o.optimizer.lr == 0.01);
  CHECK(o.optimizer.momentum == 0.9);        // the SGD recipe's default
  CHECK(o.optimizer.weight_decay == 1e-4);   // likewise
  CHECK(o.optimizer.nesterov);
  CHECK(o.stem == "cifar");
  CHECK(o.device == DeviceChoice::cpu);
  CHECK(o.lr_schedule == LrSchedule::cosine);
  CHECK(o.seed == 7);
}

TEST_CASE("--no-decay-norm-bias keeps BatchNorm and biases out of weight decay; by default all decay") {
  CHECK(parse({"--data", "/d"}).optimizer.decay_norm_and_bias);
  CHECK_FALSE(parse({"--data", "/d", "--no-decay-norm-bias"}).optimizer.decay_norm_and_bias);
  CHECK_FALSE(parse({"--data", "/d", "--optimizer", "sgd", "--no-decay-norm-bias"})
                  .optimizer.decay_norm_and_bias);
  refused({"--data", "/d", "--no-decay-norm-bias=yes"}, "--no-decay-norm-bias takes no value");
}

TEST_CASE("--precision: tf32 by default, fp32, bf16 and fp16 on request, anything else refused") {
  CHECK(parse({"--data", "/d"}).precision == Precision::tf32);
  CHECK(parse({"--data", "/d", "--precision", "fp32"}).precision == Precision::fp32);
  CHECK(parse({"--data", "/d", "--precision=bf16"}).precision == Precision::bf16);
  CHECK(parse({"--data", "/d", "--precision", "fp16"}).precision == Precision::fp16);
  CHECK(std::string(to_string(Precision::bf16)) == "bf16");
  CHECK(std::string(to_string(Precision::fp16)) == "fp16");
  refused({"--data", "/d", "--precision", "fp8"}, "--precision: 'fp8' is not one of: tf32, fp32, bf16, fp16");
}

TEST_CASE("--memory-format: nchw by default at every precision, nhwc on request") {
  const TrainOptions plain = parse({"--data", "/d"});
  CHECK(plain.cuda.memory_format == MemoryFormat::nchw);
  CHECK_FALSE(plain.was_given("--memory-format"));
  CHECK(parse({"--data", "/d", "--precision", "fp32"}).cuda.memory_format == MemoryFormat::nchw);
  const TrainOptions bf16 = parse({"--data", "/d", "--precision", "bf16"});
  CHECK(bf16.cuda.memory_format == MemoryFormat::nchw);
  CHECK_FALSE(bf16.was_given("--memory-format"));
  // An explicit choice wins over the precision's default, whichever flag comes first.
  const TrainOptions bf16_nchw = parse({"--data", "/d", "--memory-format", "nchw", "--precision", "bf16"});
  CHECK(bf16_nchw.cuda.memory_format == MemoryFormat::nchw);
  CHECK(bf16_nchw.was_given("--memory-format"));
  CHECK(parse({"--data", "/d", "--precision", "bf16", "--memory-format=nchw"}).cuda.memory_format ==
        MemoryFormat::nchw);
  CHECK(parse({"--data", "/d", "--memory-format", "nhwc"}).cuda.memory_format == MemoryFormat::nhwc);
  CHECK(parse({"--data", "/d", "--precision", "fp16"}).cuda.memory_format == MemoryFormat::nchw);
  CHECK(parse({"--data", "/d", "--precision", "bf16", "--memory-format", "nhwc"}).cuda.memory_format ==
        MemoryFormat::nhwc);
  CHECK(parse({"--data", "/d", "--precision", "tf32", "--memory-format", "nhwc"}).cuda.memory_format ==
        MemoryFormat::nhwc);
  CHECK(std::string(to_string(MemoryFormat::nhwc)) == "nhwc");
  CHECK(std::string(to_string(MemoryFormat::nchw)) == "nchw");
  refused({"--data", "/d", "--memory-format", "channels_last"},
          "--memory-format: 'channels_last' is not one of: nchw, nhwc");
  refused({"--data", "/d", "--memory-format"}, "--memory-format needs a value");
  CHECK(usage().find("--memory-format") != std::string::npos);
}

TEST_CASE("--deterministic chooses convolution algorithms by heuristic, never by timing") {
  const TrainOptions plain = parse({"--data", "/d"});
  CHECK_FALSE(plain.cuda.deterministic);
  CHECK(plain.cuda.conv_search == cuda::ConvAlgorithmSearch::timed);
  const TrainOptions exact = parse({"--data", "/d", "--deterministic"});
  CHECK(exact.cuda.deterministic);
  CHECK(exact.cuda.conv_search == cuda::ConvAlgorithmSearch::heuristic);
  const TrainOptions stated = parse({"--data", "/d", "--conv-algorithms", "heuristic", "--deterministic"});
  CHECK(stated.cuda.conv_search == cuda::ConvAlgorithmSearch::heuristic);
  CHECK(parse({"--data", "/d", "--conv-algorithms", "heuristic"}).cuda.conv_search ==
        cuda::ConvAlgorithmSearch::heuristic);
  refused({"--data", "/d", "--deterministic", "--conv-algorithms", "timed"},
          "--deterministic and --conv-algorithms timed contradict each other");
}

TEST_CASE("--conv-api chooses cuDNN's legacy convolution API (the default) or its graph API") {
  CHECK(parse({"--data", "/d"}).cuda.conv_api == cuda::ConvApi::legacy);
  CHECK(parse({"--data", "/d", "--conv-api", "legacy"}).cuda.conv_api == cuda::ConvApi::legacy);
  CHECK(parse({"--data", "/d", "--conv-api", "graph"}).cuda.conv_api == cuda::ConvApi::graph);
  refused({"--data", "/d", "--conv-api", "frontend"}, "--conv-api: 'frontend' is not one of: legacy, graph");
  refused({"--data", "/d", "--conv-api", "graph", "--device", "cpu"},
          "--conv-api applies to GPU training, but this run trains on the CPU (--device cpu)");
}

TEST_CASE("AdamW keeps torch.optim.AdamW's defaults") {
  const TrainOptions o = parse({"--data", "/d"});
  CHECK(o.optimizer.kind == OptimizerKind::adamw);
  CHECK(o.optimizer.lr == 1e-3);
  CHECK(o.optimizer.weight_decay == 1e-2);
  CHECK(o.optimizer.beta1 == 0.9);
  CHECK(o.optimizer.beta2 == 0.999);
  CHECK(o.optimizer.eps == 1e-8);
}

TEST_CASE("wrong values are refused naming the flag and the accepted range") {
  refused({"--data", "/d", "--batch-size", "0"}, "--batch-size: 0 is outside the accepted range [1, ");
  refused({"--data", "/d", "--batch-size", "12x"}, "--batch-size: '12x' is not a whole number");
  refused({"--data", "/d", "--lr", "-1"}, "--lr: -1 is outside the accepted range");
  refused({"--data", "/d", "--lr", "fast"}, "--lr: 'fast' is not a number");
  refused({"--data", "/d", "--label-smoothing", "1"}, "--label-smoothing: 1 is outside");
  refused({"--data", "/d", "--device", "tpu"}, "--device: 'tpu' is not one of: auto, cpu, cuda");
  refused({"--data", "/d", "--stem", "big"}, "--stem: 'big' is not one of");
  refused({"--data", "/d", "--optimizer", "adam"}, "--optimizer");
  refused({"--data", "/d", "--dataset", "mnist"}, "--dataset: unknown data format 'mnist': choose one of auto, cifar10");
  refused({"--data", "/d", "--augment", "flip"}, "--augment: unknown augmentation 'flip'");
  refused({"--data", "/d", "--frobnicate"}, "unknown option '--frobnicate'");
  refused({"--data"}, "--data needs a value");
  refused({"--data", "/d", "--nesterov=1"}, "--nesterov takes no value");
  refused({"--data", "/d", "--lr-step-epochs", "30,20"}, "epochs must increase");
}

TEST_CASE("inconsistent combinations are refused with the fix") {
  refused({}, "--data DIR is required");
  refused({"--data", "/d", "--resume"}, "--resume applies to --checkpoint-dir DIR");
  refused({"--data", "/d", "--eval"}, "--eval needs weights");
  refused({"--data", "/d", "--momentum", "0.5"}, "add --optimizer sgd");
  refused({"--data", "/d", "--init", "w", "--resume", "--checkpoint-dir", "c"}, "use one");
  refused({"--data", "/d", "--epochs", "2", "--warmup-epochs", "3"}, "longer than --epochs");
  CHECK_NOTHROW(parse({"--dataset", "synthetic"}));
}

TEST_CASE("--help lists the flags in groups") {
  const std::string text = usage();
  for (const char* flag : {"--data", "--dataset", "--epochs", "--batch-size", "--lr", "--weight-decay",
                           "--optimizer", "--momentum", "--label-smoothing", "--lr-schedule",
                           "--warmup-epochs", "--num-workers", "--seed", "--no-shuffle", "--augment",
                           "--stem", "--device", "--precision", "--val-split", "--max-steps",
                           "--limit-train", "--eval", "--init", "--checkpoint-dir", "--resume",
                           "--log-json", "--bucket-mb", "--comm-timeout"}) {
    CAPTURE(flag);
    CHECK(text.find(flag) != std::string::npos);
  }
  for (const char* group : {"\ndata:\n", "\nmodel:\n", "\ntraining:\n", "\noptimizer:\n",
                            "\nschedule:\n", "\ncheckpoints:\n", "\noutput:\n", "\nGPU:\n",
                            "\ndistributed:\n"}) {
    CAPTURE(group);
    CHECK(text.find(group) != std::string::npos);
  }
  CHECK(text.find("--no-shuffle") < text.find("\nmodel:\n"));
  CHECK(text.find("--cuda-graphs") > text.find("\nGPU:\n"));
}

TEST_CASE("learning-rate schedules") {
  TrainOptions o = parse({"--data", "/d", "--lr", "0.4", "--epochs", "10"});
  LrScheduleFn constant(o, 100);
  CHECK(constant.at(0) == 0.4);
  CHECK(constant.at(999) == 0.4);

  o.warmup_epochs = 1;
  o.lr_schedule = LrSchedule::cosine;
  LrScheduleFn cosine(o, 100);
  CHECK(cosine.at(0) == doctest::Approx(0.004));   // 1/100 of the way up
  CHECK(cosine.at(99) == doctest::Approx(0.4));    // warm-up ends at the base rate
  CHECK(cosine.at(100) == doctest::Approx(0.4));   // cosine starts at the base rate
  CHECK(cosine.at(550) == doctest::Approx(0.2));   // half-way through the decay
  CHECK(cosine.at(1000) == doctest::Approx(0.0));

  o.warmup_epochs = 0;
  o.lr_schedule = LrSchedule::step;
  o.lr_step_epochs = {3, 6};
  LrScheduleFn step(o, 10);
  CHECK(step.at(29) == doctest::Approx(0.4));
  CHECK(step.at(30) == doctest::Approx(0.04));
  CHECK(step.at(60) == doctest::Approx(0.004));
}

TEST_CASE("--grad-allreduce chooses the type gradients travel as") {
  CHECK(parse({"--data", "/d"}).grad_allreduce == ddp::GradAllreduce::fp32);
  CHECK(parse({"--data", "/d", "--grad-allreduce", "bf16"}).grad_allreduce == ddp::GradAllreduce::bf16);
  CHECK(parse({"--data", "/d", "--grad-allreduce", "fp32"}).grad_allreduce == ddp::GradAllreduce::fp32);
  CHECK_THROWS_WITH_AS(parse({"--data", "/d", "--grad-allreduce", "fp16"}),
                       "--grad-allreduce: 'fp16' is not one of: fp32, bf16", Error);
  CHECK(usage().find("--grad-allreduce TYPE") != std::string::npos);
}

TEST_CASE("--batchnorm: cuDNN's by default, our fused kernels on request, never with --device cpu") {
  CHECK(parse({"--dataset", "synthetic"}).cuda.batchnorm == BatchNormImpl::cudnn);
  CHECK(parse({"--dataset", "synthetic", "--batchnorm", "fused"}).cuda.batchnorm == BatchNormImpl::fused);
  CHECK(parse({"--dataset", "synthetic", "--batchnorm=cudnn", "--device", "cuda"}).cuda.batchnorm ==
        BatchNormImpl::cudnn);
  refused({"--dataset", "synthetic", "--batchnorm", "native"},
          "--batchnorm: 'native' is not one of: cudnn, fused");
  refused({"--dataset", "synthetic", "--batchnorm", "cudnn-persistent"},
          "--batchnorm: 'cudnn-persistent' is not one of: cudnn, fused");
  refused({"--dataset", "synthetic", "--batchnorm", "fused", "--device", "cpu"},
          "--batchnorm applies to GPU training, but this run trains on the CPU (--device cpu): drop "
          "--batchnorm, or train on a GPU");
  refused({"--dataset", "synthetic", "--batchnorm", "cudnn", "--device", "cpu"},
          "--batchnorm applies to GPU training");
  CHECK(std::string(to_string(BatchNormImpl::fused)) == "fused");
  CHECK(usage().find("--batchnorm") != std::string::npos);
}

TEST_CASE("--cuda-graphs: off by default, on or off on request, never with --device cpu or --eval") {
  CHECK_FALSE(parse({"--dataset", "synthetic"}).cuda.cuda_graphs);
  CHECK(parse({"--dataset", "synthetic", "--cuda-graphs", "on"}).cuda.cuda_graphs);
  CHECK(parse({"--dataset", "synthetic", "--cuda-graphs=on", "--device", "cuda"}).cuda.cuda_graphs);
  CHECK_FALSE(parse({"--dataset", "synthetic", "--cuda-graphs", "off"}).cuda.cuda_graphs);
  refused({"--dataset", "synthetic", "--cuda-graphs", "yes"}, "--cuda-graphs");
  refused({"--dataset", "synthetic", "--cuda-graphs", "on", "--device", "cpu"},
          "--cuda-graphs applies to GPU training, but this run trains on the CPU (--device cpu)");
  refused({"--dataset", "synthetic", "--cuda-graphs", "off", "--device", "cpu"},
          "--cuda-graphs applies to GPU training");
  refused({"--dataset", "synthetic", "--init", "w", "--eval", "--cuda-graphs", "on"},
          "--cuda-graphs applies to training, but --eval trains none: drop --cuda-graphs, or drop --eval");
  CHECK(usage().find("--cuda-graphs") != std::string::npos);
}

TEST_CASE("a flag given where it does not apply is refused, naming what it applies to and the fix") {
  const std::vector<std::string> cpu = {"--dataset", "synthetic", "--device", "cpu"};
  const auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = cpu;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  // The optimizer's.
  for (const char* flag : {"--beta1", "--beta2", "--eps"}) {
    CAPTURE(flag);
    refused(with({"--optimizer", "sgd", flag, "0.5"}),
            std::string(flag) + " applies to --optimizer adamw, but this run uses --optimizer sgd: drop " + flag +
                ", or choose --optimizer adamw");
    CHECK_NOTHROW(parse(with({flag, "0.5"})));
  }
  refused(with({"--momentum", "0.5"}),
          "--momentum applies to --optimizer sgd, but this run uses --optimizer adamw (the default): drop "
          "--momentum, or add --optimizer sgd");
  refused(with({"--optimizer", "adamw", "--nesterov"}),
          "--nesterov applies to --optimizer sgd, but this run uses --optimizer adamw: drop --nesterov");
  CHECK(parse(with({"--optimizer", "sgd", "--momentum", "0.5", "--nesterov"})).optimizer.momentum == 0.5);
  // The schedule's.
  refused(with({"--lr-gamma", "0.5"}),
          "--lr-gamma applies to --lr-schedule step, but this run uses --lr-schedule constant (the default): "
          "drop --lr-gamma, or add --lr-schedule step");
  refused(with({"--lr-schedule", "cosine", "--lr-step-epochs", "2,4"}),
          "--lr-step-epochs applies to --lr-schedule step, but this run uses --lr-schedule cosine: drop");
  CHECK(parse(with({"--lr-schedule", "step", "--lr-gamma", "0.5"})).lr_gamma == 0.5);
  // The GPU's, with --device cpu at once, and with --device auto once the run finds no GPU.
  for (const std::vector<std::string>& gpu :
       std::vector<std::vector<std::string>>{{"--memory-format", "nhwc"}, {"--batchnorm", "cudnn"},
                                             {"--deterministic"}, {"--conv-algorithms", "timed"},
                                             {"--conv-api", "legacy"}, {"--cuda-graphs", "off"}}) {
    CAPTURE(gpu[0]);
    refused(with(gpu), gpu[0] + " applies to GPU training, but this run trains on the CPU (--device cpu): "
                                "drop " + gpu[0] + ", or train on a GPU (--device cuda, or auto where one answers)");
    std::vector<std::string> automatic = {"--dataset", "synthetic"};
    automatic.insert(automatic.end(), gpu.begin(), gpu.end());
    const TrainOptions o = parse(automatic);
    CHECK_THROWS_WITH_AS(refuse_gpu_flags_on_cpu(o, "auto: no CUDA device answers"),
                         doctest::Contains((gpu[0] + " applies to GPU training, but this run trains on the CPU "
                                                     "(auto: no CUDA device answers): drop " + gpu[0] +
                                            ", or run where a GPU answers").c_str()),
                         Error);
  }
  CHECK_NOTHROW(refuse_gpu_flags_on_cpu(parse({"--dataset", "synthetic", "--precision", "fp32"}), "auto"));
  // What needs another flag.
  refused(with({"--init-reset-classifier"}),
          "--init-reset-classifier applies to --init FILE, but this run has no --init: drop "
          "--init-reset-classifier, or add --init FILE");
  for (const char* flag : {"--keep-checkpoints", "--checkpoint-every"}) {
    CAPTURE(flag);
    refused(with({flag, "2"}), std::string(flag) + " applies to --checkpoint-dir DIR, but this run has no "
                                                   "--checkpoint-dir: drop " + flag + ", or add --checkpoint-dir DIR");
    CHECK_NOTHROW(parse(with({flag, "2", "--checkpoint-dir", "c"})));
  }
  // Job scripts pass --data always; synthetic data leaves it unread.
  CHECK_NOTHROW(parse({"--dataset", "synthetic", "--data", "/d"}));
  // --eval trains nothing: what only training reads is refused; what evaluation reads is not.
  const std::vector<std::string> eval = {"--data", "/d", "--init", "w", "--eval"};
  for (const std::vector<std::string>& training :
       std::vector<std::vector<std::string>>{{"--epochs", "2"}, {"--max-steps", "3"}, {"--lr", "0.1"},
                                             {"--optimizer", "sgd"}, {"--weight-decay", "0"},
                                             {"--no-decay-norm-bias"}, {"--lr-schedule", "cosine"},
                                             {"--warmup-epochs", "1"}, {"--augment", "none"},
                                             {"--limit-train", "8"}, {"--no-shuffle"},
                                             {"--save-weights", "w2"}, {"--print-every", "1"},
                                             {"--profile-steps", "2"}, {"--bucket-mb", "5"},
                                             {"--grad-allreduce", "bf16"}, {"--seed", "3"},
                                             {"--checkpoint-dir", "c"}}) {
    CAPTURE(training[0]);
    std::vector<std::string> args = eval;
    args.insert(args.end(), training.begin(), training.end());
    refused(args, training[0] + " applies to training");
  }
  CHECK_NOTHROW(parse({"--data", "/d", "--init", "w", "--eval", "--batch-size", "8", "--image-size", "64",
                       "--limit-val", "10", "--val-split", "0.1", "--label-smoothing", "0.1", "--stem", "cifar",
                       "--log-json", "l", "--num-workers", "2", "--comm-timeout", "60", "--precision", "fp32"}));
  CHECK_NOTHROW(parse({"--data", "/d", "--init", "w", "--eval", "--init-reset-classifier", "--seed", "3"}));
  CHECK_NOTHROW(parse({"--data", "/d", "--eval", "--resume", "--checkpoint-dir", "c"}));
  // The first flag given out of place is named, in command-line order.
  refused(with({"--nesterov", "--lr-gamma", "0.5"}), "--nesterov applies to --optimizer sgd");
  refused(with({"--lr-gamma", "0.5", "--nesterov"}), "--lr-gamma applies to --lr-schedule step");
}
