#include <doctest/doctest.h>

#include <string>

#include "resnet_ddp/cuda/check.h"
#include "resnet_ddp/ddp/nccl_check.h"
#include "resnet_ddp/cuda/cudnn_check.h"
#include "resnet_ddp/cuda/cublas_check.h"

using namespace rddp;

namespace {

// The message a failed check throws; the status is passed in, so no GPU is needed.
template <typename Check>
std::string message_of(Check check) {
  try {
    check();
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a failed CUDA runtime call names file:line, the call, the status and a remedy") {
  const int line = __LINE__ + 1;
  const std::string text = message_of([] { RDDP_CUDA_CHECK(cudaErrorMemoryAllocation); });
  CHECK(text.find("CUDA call failed at ") == 0);
  CHECK(text.find("test_cuda_check.cpp:" + std::to_string(line) + ": ") != std::string::npos);
  CHECK(text.find("cudaErrorMemoryAllocation") != std::string::npos);
  CHECK(text.find("out of memory") != std::string::npos);
  CHECK(text.find("--batch-size") != std::string::npos);
  CHECK(message_of([] { RDDP_CUDA_CHECK(cudaSuccess); }) == "no error");
  const std::string no_image =
      message_of([] { RDDP_CUDA_CHECK(cudaErrorNoKernelImageForDevice); });
  CHECK(no_image.find("-DCMAKE_CUDA_ARCHITECTURES") != std::string::npos);
  // Every architecture a user may run on, V100's with the toolkit that still builds for it.
  for (const char* gpu : {"70 for V100 (CUDA 12 only)", "80 for A100", "90 for H100"})
    CHECK_MESSAGE(no_image.find(gpu) != std::string::npos, no_image);
}

TEST_CASE("the call appears as written") {
  auto failing = [](int) { return cudaErrorInvalidValue; };
  const std::string text = message_of([&] { RDDP_CUDA_CHECK(failing(42)); });
  CHECK(text.find("failing(42) returned cudaErrorInvalidValue") != std::string::npos);
  CHECK(text.find("CUDA_LAUNCH_BLOCKING=1") != std::string::npos);
}

TEST_CASE("cuBLAS, cuDNN and NCCL failures carry their library's status and a remedy") {
  const std::string cublas = message_of([] { RDDP_CUBLAS_CHECK(CUBLAS_STATUS_ALLOC_FAILED); });
  CHECK(cublas.find("cuBLAS call failed at ") == 0);
  CHECK(cublas.find("CUBLAS_STATUS_ALLOC_FAILED") != std::string::npos);
  CHECK(cublas.find("--batch-size") != std::string::npos);
  CHECK(message_of([] { RDDP_CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS); }) == "no error");

  const std::string cudnn = message_of([] { RDDP_CUDNN_CHECK(CUDNN_STATUS_BAD_PARAM); });
  CHECK(cudnn.find("cuDNN call failed at ") == 0);
  CHECK(cudnn.find("CUDNN_STATUS_BAD_PARAM returned") != std::string::npos);
  CHECK(cudnn.find("invalid arguments") != std::string::npos);
  CHECK(message_of([] { RDDP_CUDNN_CHECK(CUDNN_STATUS_SUCCESS); }) == "no error");

  const std::string nccl = message_of([] { RDDP_NCCL_CHECK(ncclSystemError); });
  CHECK(nccl.find("NCCL call failed at ") == 0);
  CHECK(nccl.find("NCCL_DEBUG=INFO") != std::string::npos);
  CHECK(nccl.find("/dev/shm") != std::string::npos);
  CHECK(message_of([] { RDDP_NCCL_CHECK(ncclSuccess); }) == "no error");
}
