#pragma once
// When the CPU layers start OpenMP threads.
#include <cstdint>

namespace rddp::cpu {

// Elements touched below which waking the thread team costs more than it saves: gradient
// checks run thousands of tiny layers, where always-parallel loops are ten times slower.
constexpr int64_t kMinParallelElements = int64_t(1) << 15;

}  // namespace rddp::cpu
