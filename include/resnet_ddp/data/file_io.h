#pragma once
// Whole-file reads with messages that name the file.
#include <cstdint>
#include <string>
#include <vector>

namespace rddp::data {

std::vector<uint8_t> read_file(const std::string& path);
// Reads a gzip file's uncompressed contents; a plain file is returned as it is (zlib reads
// both), so idx files may come either way.
std::vector<uint8_t> read_maybe_gzip_file(const std::string& path);

bool is_directory(const std::string& path);
bool is_regular_file(const std::string& path);
std::string join_path(const std::string& dir, const std::string& name);

}  // namespace rddp::data
