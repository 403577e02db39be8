#pragma once
// The versions of the libraries this build runs with, as loaded at run time (not as compiled
// against): what a bug report needs, and what `resnet_ddp --version` prints. Asks no GPU, so
// it works on a login node; where a library cannot say (no CUDA driver), the entry says why.
#include <string>
#include <utility>
#include <vector>

namespace rddp {

// (library, version) in a fixed order: CUDA runtime, CUDA driver, cuDNN, cuBLAS, NCCL, MPI,
// libjpeg.
std::vector<std::pair<std::string, std::string>> library_versions();

// "13.0" from CUDA's 13000; "9.19.0" from cuDNN 9's and NCCL's 91900.
std::string cuda_version_text(int packed);
std::string triple_version_text(int packed);

}  // namespace rddp
