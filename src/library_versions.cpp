#include "resnet_ddp/library_versions.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <mpi.h>
#include <nccl.h>

#include "resnet_ddp/data/image_decode.h"

namespace rddp {

std::string cuda_version_text(int packed) {
  return std::to_string(packed / 1000) + "." + std::to_string(packed % 1000 / 10);
}

std::string triple_version_text(int packed) {
  return std::to_string(packed / 10000) + "." + std::to_string(packed % 10000 / 100) + "." +
         std::to_string(packed % 100);
}

namespace {

std::string cuda_runtime_version() {
  int version = 0;
  if (cudaRuntimeGetVersion(&version) != cudaSuccess) return "unknown";
  return cuda_version_text(version);
}

// 0 means no driver is installed: a build or login node.
std::string cuda_driver_version() {
  int version = 0;
  if (cudaDriverGetVersion(&version) != cudaSuccess || version == 0)
    return "none (no NVIDIA driver on this machine)";
  return cuda_version_text(version);
}

std::string cublas_version() {
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS)
    return "unknown";
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string nccl_version() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return "unknown";
  return triple_version_text(version);
}

// MPI allows this call before MPI_Init. Its text may run over lines (Open MPI adds its
// repository and date): the first line says which MPI and which version.
std::string mpi_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown";
  std::string version(text, static_cast<size_t>(length));
  version = version.substr(0, version.find_first_of("\r\n,"));
  while (!version.empty() && (version.back() == ' ' || version.back() == '\0')) version.pop_back();
  return version;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> library_versions() {
  return {{"CUDA runtime", cuda_runtime_version()},
          {"CUDA driver", cuda_driver_version()},
          {"cuDNN", triple_version_text(static_cast<int>(cudnnGetVersion()))},
          {"cuBLAS", cublas_version()},
          {"NCCL", nccl_version()},
          {"MPI", mpi_version()},
          {"JPEG", data::jpeg_library_version()}};
}

}  // namespace rddp
