// Built with -mavx2 (CMakeLists.txt) and run only where the CPU reports AVX2 (gemm.cpp).
#include "gemm_blocked.h"
#include "gemm_kernels.h"

namespace rddp::cpu {

// Twice the lanes of SSE: 6x16 float accumulators are twelve 8-wide vectors, and doubles again
// half the columns. Wider tiles change which tile holds an element, not the order of its sum.
const GemmFunctions kAvx2Gemm{&gemm_blocked<float, 6, 16>, &gemm_blocked<double, 6, 8>};

}  // namespace rddp::cpu
