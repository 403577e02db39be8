#pragma once
// RDDP_CUDNN_CHECK(cudnnConvolutionForward(...)): a failed cuDNN call throws as check.h says.
#include <cudnn.h>

#include <string>

#include "resnet_ddp/cuda/check.h"

namespace rddp::cuda {

namespace detail {

inline const char* cudnn_hint(cudnnStatus_t status) {
#if CUDNN_MAJOR >= 9
  // cuDNN 9 refines each category (BAD_PARAM, NOT_SUPPORTED...) into sub-codes.
  const auto category = static_cast<cudnnStatus_t>(CUDNN_STATUS_CATEGORY(status));
#else
  const cudnnStatus_t category = status;
#endif
  switch (category) {
    case CUDNN_STATUS_BAD_PARAM:
      return "cuDNN was given invalid arguments: a bug in resnet_ddp; please report it with the "
             "command line";
    case CUDNN_STATUS_NOT_SUPPORTED:
      return "This cuDNN, driver or GPU cannot run the requested layer configuration: update "
             "cuDNN and the driver, or report it with the GPU model and the model flags";
    case CUDNN_STATUS_INTERNAL_ERROR:
      return "cuDNN failed internally, most often from lack of host or GPU memory: lower "
             "--batch-size; set CUDNN_LOGERR_DBG=1 for cuDNN's own log";
    default:
      return kFindTheCause;
  }
}

}  // namespace detail

inline void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  std::string what = cudnnGetErrorString(status);
#if CUDNN_MAJOR >= 9
  // cuDNN 9 keeps a sentence about the last failure, often naming the offending attribute.
  char detail_text[512] = "";
  cudnnGetLastErrorString(detail_text, sizeof detail_text);
  if (detail_text[0] != '\0') what += std::string(": ") + detail_text;
#endif
  detail::fail_call("cuDNN", call, file, line, what, detail::cudnn_hint(status));
}

}  // namespace rddp::cuda

#define RDDP_CUDNN_CHECK(call) ::rddp::cuda::check_cudnn((call), #call, __FILE__, __LINE__)
