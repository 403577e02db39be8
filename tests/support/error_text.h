#pragma once
// The message of the Error an action throws, for tests that check what a user would read.
#include <functional>
#include <string>

#include "resnet_ddp/error.h"

namespace rddp::testing {

// "(no error)" when the action throws none; other exceptions pass through.
inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

}  // namespace rddp::testing
