#pragma once
// This machine's name, as messages and lock files name it.
#include <string>

namespace rddp {

// gethostname's answer, or "unknown-host" where it fails.
std::string host_name();

}  // namespace rddp
