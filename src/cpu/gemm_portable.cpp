#include "gemm_blocked.h"
#include "gemm_kernels.h"

namespace rddp::cpu {

// 6x8 float accumulators are twelve 4-wide SSE vectors, leaving room in 16 registers for a
// row of B and a broadcast of A; doubles fill half the lanes, so half the columns.
const GemmFunctions kPortableGemm{&gemm_blocked<float, 6, 8>, &gemm_blocked<double, 6, 4>};

}  // namespace rddp::cpu
