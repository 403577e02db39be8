#pragma once
// Data files are read only when they are regular files. A FIFO, socket or device named like a
// data file can block its open or its reads forever (a pipe with no writer), or never end
// (/dev/zero); a directory holds no data. The file is looked at before it is opened, so that
// no device is opened at all, and again once open (with O_NONBLOCK, which keeps the open of
// a FIFO swapped in between from blocking). Every refusal is an Error naming the file and
// what it is.
#include <cstddef>
#include <cstdint>
#include <string>

namespace rddp::data {

// What is at `path` when it is there but is not a regular file, following symbolic links:
// "a directory", "a FIFO (named pipe)", "a socket", "a character device", "a block device",
// "a symbolic link to a missing file"...; "" when it is a regular file or nothing is there.
std::string non_regular_kind(const std::string& path);
// Whether anything at all is at `path` (a dangling symbolic link counts).
bool path_exists(const std::string& path);

class RegularFile {
 public:
  explicit RegularFile(const std::string& path);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }  // as it was at open
  // Up to `size` bytes; fewer only at the end of the file. Errors name the file.
  size_t read(void* buffer, size_t size);
  // Hands the descriptor over (to zlib's gzdopen, say); the file no longer closes it.
  int release();

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace rddp::data
