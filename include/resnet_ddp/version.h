#pragma once
namespace rddp {
inline constexpr const char* kVersion = "0.1.0";
}  // namespace rddp
