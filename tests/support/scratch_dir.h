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

// fresh_dir for the calling test file: its suite is the file's name without "test_" and the
// extension (test_data_pack.cpp: data_pack).
inline std::string scratch_dir(const std::string& name, const char* file = __builtin_FILE()) {
  std::string suite = std::filesystem::path(file).stem().string();
  if (suite.rfind("test_", 0) == 0) suite.erase(0, 5);
  return fresh_dir(suite, name).string();
}

}  // namespace rddp::testing
