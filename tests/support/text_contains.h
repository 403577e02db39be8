#pragma once
// Whether a message holds a phrase: what the tests check of errors and warnings they read as text.
#include <string>

namespace rddp::testing {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace rddp::testing
