// Each rank's GPU, checked across the job before anything is allocated on it.
#include "resnet_ddp/ddp/gpu_assignment.h"

#include <cuda_runtime_api.h>

#include <vector>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/ddp/context.h"
#include "resnet_ddp/ddp/fatal.h"
#include "resnet_ddp/ddp/launch_checks.h"
#include "resnet_ddp/ddp/mpi_check.h"

namespace rddp::ddp {

namespace {

constexpr int kBusIdLength = 32;  // "0000:1b:00.0" and a terminator fit with room to spare

}  // namespace

std::string check_one_rank_per_gpu(const DistributedContext& context, int device) {
  RDDP_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp properties{};
  RDDP_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  char bus_id[kBusIdLength] = {};
  RDDP_CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, kBusIdLength, device));

  // Every rank takes part in every collective below, whatever it finds, so that all of them
  // learn the outcome and none is left waiting.
  std::string problem;
  try {
    check_not_mig(properties.name, context.world_size());
  } catch (const Error& error) {
    problem = error.what();
  }

  const int local_size = context.local_size();
  std::vector<char> all_ids(static_cast<size_t>(kBusIdLength) * local_size);
  RDDP_MPI_CHECK(MPI_Allgather(bus_id, kBusIdLength, MPI_CHAR, all_ids.data(), kBusIdLength, MPI_CHAR,
                               context.node()));
  int rank = context.rank();
  std::vector<int> ranks(static_cast<size_t>(local_size));
  RDDP_MPI_CHECK(MPI_Allgather(&rank, 1, MPI_INT, ranks.data(), 1, MPI_INT, context.node()));
  std::vector<std::string> bus_ids;
  for (int r = 0; r < local_size; ++r) bus_ids.emplace_back(&all_ids[static_cast<size_t>(r) * kBusIdLength]);
  if (problem.empty()) {
    try {
      check_distinct_gpus(ranks, bus_ids, context.host());
    } catch (const Error& error) {
      problem = error.what();
    }
  }

  int first_refusing = problem.empty() ? context.world_size() : context.rank();
  RDDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first_refusing, 1, MPI_INT, MPI_MIN, context.world()));
  if (!problem.empty()) throw AllRanksError(problem);
  if (first_refusing < context.world_size())
    throw AllRanksError("rank " + std::to_string(first_refusing) +
                        " refused its GPU; its message says why and how to fix it");
  return std::string(properties.name) + " (PCI " + bus_id + ")";
}

}  // namespace rddp::ddp
