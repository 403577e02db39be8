#pragma once
// A directory of its own for each test's files, under the build's scratch area (RDDP_TEST_TMP).
#include <filesystem>
#include <string>

namespace rddp::testing {

// RDDP_TEST_TMP/<suite>/<name>, emptied first: a file that an earlier run left there must not
// pass for one this run should have written.
inline std::filesystem::path fresh_dir(const std::string& suite, const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(RDDP_TEST_TMP) / suite / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace rddp::testing
