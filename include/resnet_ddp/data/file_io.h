#pragma once
// Whole-file reads with messages that name the file. Only regular files are read
// (regular_file.h); running out of memory while reading one is an Error naming it.
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace rddp::data {

// The file's bytes; a file larger than `max_bytes` is refused, naming `limit_reason`.
std::vector<uint8_t> read_file(const std::string& path,
                               uint64_t max_bytes = std::numeric_limits<uint64_t>::max(),
                               const char* limit_reason = nullptr);

// A file read a piece at a time, gzip-compressed or not (zlib reads both), so that a caller
// can stop at the size it expects instead of inflating whatever the file holds.
class MaybeGzipReader {
 public:
  explicit MaybeGzipReader(const std::string& path);
  ~MaybeGzipReader();
  MaybeGzipReader(const MaybeGzipReader&) = delete;
  MaybeGzipReader& operator=(const MaybeGzipReader&) = delete;

  // Up to `size` uncompressed bytes; fewer only at the end. A damaged stream is an Error.
  size_t read(void* buffer, size_t size);
  bool compressed() const { return compressed_; }
  uint64_t file_size() const { return file_size_; }  // on disk, compressed or not
  const std::string& path() const { return path_; }

 private:
  struct Stream;
  std::string path_;
  std::unique_ptr<Stream> stream_;
  bool compressed_ = false;
  uint64_t file_size_ = 0;
};

bool is_directory(const std::string& path);
bool is_regular_file(const std::string& path);
std::string join_path(const std::string& dir, const std::string& name);

}  // namespace rddp::data
