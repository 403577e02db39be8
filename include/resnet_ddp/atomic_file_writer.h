#pragma once
// Writes a file crash-safely: everything goes into a temporary beside the target, which is
// renamed over the target only once it is complete and on disk. A reader therefore sees the
// old file or the new one, never a torn one, even if we are killed or the machine loses power.
// Weights, checkpoints and packed data sets are all written this way.
#include <cstddef>
#include <string>

namespace rddp {

class AtomicFileWriter {
 public:
  // Creates "<path>.tmp.<pid>" in the same directory. Failures throw Error naming the path,
  // the system's reason and what to do about it.
  explicit AtomicFileWriter(const std::string& path);
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  // Without commit(), removes the temporary: an existing file at the path stays as it was.
  ~AtomicFileWriter();

  void write(const void* data, size_t size);
  // Bytes written so far, so that a format can record where things lie.
  size_t size() const { return written_ + buffer_.size(); }
  // Flushes to disk, renames over the path, and syncs the directory so the rename survives.
  void commit();

 private:
  static constexpr size_t kBufferBytes = 1 << 20;

  void flush_buffer();
  void write_all(const char* data, size_t size);
  void discard();
  [[noreturn]] void fail_io(const std::string& what, int err);

  std::string path_, temp_path_, directory_;
  int fd_ = -1;
  bool committed_ = false;
  size_t written_ = 0;
  std::string buffer_;
};

}  // namespace rddp
