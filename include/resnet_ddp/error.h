#pragma once
// One exception type for every user-facing failure. The message must say what went wrong,
// where (file, flag, tensor...), and what the user can do about it; main() prints it with the
// rank prefix and makes sure every rank exits non-zero.
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace rddp {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Builds a message from any streamable parts: fail("cannot open ", path, ": ", why).
template <typename... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  throw Error(out.str());
}

}  // namespace rddp

// Internal invariant: a broken one is a bug in resnet_ddp, not a user error.
#define RDDP_ASSERT(cond)                                                                    \
  do {                                                                                       \
    if (!(cond))                                                                             \
      ::rddp::fail("internal error at ", __FILE__, ":", __LINE__, ": ", #cond,               \
                   " does not hold; please report this with the command line you ran");      \
  } while (0)
