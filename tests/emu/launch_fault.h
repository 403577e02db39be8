#pragma once
// What a failed emulated launch throws: a barrier no thread can pass, a warp intrinsic with lanes
// missing, a write past the end of a buffer. The message names the kernel, where it was launched
// and the block, so that a test failure says what the GPU would have done wrong (or hung on).
#include <stdexcept>
#include <string>

namespace emu {

class LaunchFault : public std::runtime_error {
 public:
  explicit LaunchFault(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace emu
