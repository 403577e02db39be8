// resnet_ddp: data-parallel ResNet-18 training. Started by srun, mpirun or on its own.
#include <cstdio>
#include <exception>

#include "resnet_ddp/error.h"
#include "resnet_ddp/train/options.h"
#include "resnet_ddp/train/process_group.h"
#include "resnet_ddp/train/trainer.h"

int main(int argc, char** argv) {
  rddp::TrainOptions options;
  try {
    if (!rddp::parse_options(argc, argv, options)) return 0;
  } catch (const rddp::Error& error) {
    std::fprintf(stderr, "resnet_ddp: %s\n", error.what());
    return 2;
  }
  auto group = rddp::make_single_process_group();
  try {
    return rddp::run_training(options, *group);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "[rank 0/1 %s] error: %s\n", group->host().c_str(), error.what());
    return 1;
  }
}
