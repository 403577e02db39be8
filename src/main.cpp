// resnet_ddp: data-parallel ResNet-18 training. Started by srun, mpirun or on its own.
#include <cstdio>
#include <exception>
#include <memory>

#include "resnet_ddp/ddp/context.h"
#include "resnet_ddp/ddp/fatal.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/train/options.h"
#include "resnet_ddp/train/process_group.h"
#include "resnet_ddp/train/trainer.h"

int main(int argc, char** argv) {
  // Options first, so that --help and a wrong flag answer at once, without MPI. Every rank
  // parses the same command line, so every rank refuses it alike.
  rddp::TrainOptions options;
  try {
    if (!rddp::parse_options(argc, argv, options)) return 0;
  } catch (const rddp::Error& error) {
    std::fprintf(stderr, "resnet_ddp: %s\n", error.what());
    return 2;
  }

  std::unique_ptr<rddp::ddp::DistributedContext> context;
  try {
    context = std::make_unique<rddp::ddp::DistributedContext>(&argc, &argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s error: %s\n", rddp::ddp::rank_prefix().c_str(), error.what());
    return 1;
  }
  try {
    auto group = rddp::make_mpi_process_group(*context, options.bucket_mb, options.comm_timeout_s,
                                               options.grad_allreduce);
    return rddp::run_training(options, *group);
  } catch (const rddp::ddp::AllRanksError& error) {
    // Every rank stopped at the same check with its own message: end normally, together.
    std::fprintf(stderr, "%s error: %s\n", context->prefix().c_str(), error.what());
    return 1;
  } catch (const std::exception& error) {
    if (context->world_size() == 1) {
      std::fprintf(stderr, "%s error: %s\n", context->prefix().c_str(), error.what());
      return 1;
    }
    // The other ranks may be blocked in a collective this rank will never join: end the job.
    rddp::ddp::fatal_abort(std::string("error: ") + error.what());
  }
}
