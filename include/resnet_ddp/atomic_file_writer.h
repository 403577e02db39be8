#pragma once
// Writes a file crash-safely: everything goes into a temporary beside the target, which is
// renamed over the target only once it is complete and on disk. A reader therefore sees the
// old file or the new one, never a torn one, even if we are killed or the machine loses power.
// Weights, checkpoints and packed data sets are all written this way.
//
// The temporary has no name while it is written (O_TMPFILE), so a process killed mid-write
// leaves nothing behind; where the file system cannot do that, it is "<path>.tmp.<pid>".
// Only a regular file is ever replaced: a target that is a directory, a device, a FIFO or a
// socket is refused, since renaming over it would put a regular file in its place (as root,
// `--save-weights /dev/null` would replace the system's), and writing into it instead could
// neither be atomic nor, for a FIFO without a reader, end. A symbolic link is followed: the
// file it names is replaced and the link stays.
#include <cstddef>
#include <string>

namespace rddp {

class AtomicFileWriter {
 public:
  // Checks the target and creates the temporary in its directory. Failures throw Error naming
  // the path, the system's reason and what to do about it.
  explicit AtomicFileWriter(const std::string& path);
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  // Without commit(), removes the temporary: an existing file at the path stays as it was.
  ~AtomicFileWriter();

  // What the constructor checks and does, undone: throws the Error a write to `path` would
  // throw at its start, so that a run can refuse an output path before it works for hours.
  static void check_target(const std::string& path);

  void write(const void* data, size_t size);
  // Bytes written so far, so that a format can record where things lie.
  size_t size() const { return written_ + buffer_.size(); }
  // Flushes to disk, renames over the path, and syncs the directory so the rename survives.
  void commit();

 private:
  static constexpr size_t kBufferBytes = 1 << 20;

  void flush_buffer();
  void write_all(const char* data, size_t size);
  // Gives the unnamed temporary a name in the directory: the target's own where there is no
  // file there yet, else the named temporary's, for the rename over the target.
  void link_into_place();
  void discard();
  [[noreturn]] void fail_io(const std::string& what, int err);

  std::string path_;       // as given, for messages
  std::string target_;     // the file written: path_, or what the symbolic link path_ names
  std::string temp_path_;  // "<target>.tmp.<pid>"
  std::string directory_;
  int fd_ = -1;
  bool unnamed_ = false;      // the temporary is an O_TMPFILE without a name yet
  bool temp_exists_ = false;  // temp_path_ names a file of ours
  bool committed_ = false;
  size_t written_ = 0;
  std::string buffer_;
};

}  // namespace rddp
