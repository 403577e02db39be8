#include "resnet_ddp/atomic_file_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "resnet_ddp/error.h"
#include "resnet_ddp/printable.h"

namespace rddp {

namespace {

std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// What the user can do about a failed write, by the system's reason.
std::string write_advice(int err, const std::string& directory) {
  switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return "the disk is full or a file size limit applies: free some space or write elsewhere";
    case EACCES:
    case EPERM:
    case EROFS:
      return "'" + printable(directory) + "' is not writable: choose a directory you can write to";
    case ENOENT:
    case ENOTDIR: {
      struct stat info;
      if (::stat(directory.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
        return "'" + printable(directory) + "' does not take new files: choose another directory";
      return "the directory '" + printable(directory) +
             "' does not exist: create it or fix the path";
    }
    case EISDIR:
      return "the target is a directory: give a file name";
    default:
      return "check the path and the file system";
  }
}

const char* file_kind(mode_t mode) {
  if (S_ISCHR(mode)) return "character device";
  if (S_ISBLK(mode)) return "block device";
  if (S_ISFIFO(mode)) return "FIFO";
  if (S_ISSOCK(mode)) return "socket";
  return "special file";
}

// Refuses a target that is there and is not a regular file (see the header for why).
void check_regular_or_absent(const std::string& path, const std::string& target) {
  struct stat info;
  if (::stat(target.c_str(), &info) != 0 || S_ISREG(info.st_mode)) return;
  const std::string what =
      printable(path) + (target == path ? "" : " (a link to " + printable(target) + ")");
  if (S_ISDIR(info.st_mode))
    fail("cannot write '", what, "': it is a directory; give the path of a file, e.g. '",
         printable(target), "/", "weights.rddp'");
  const std::string kind = file_kind(info.st_mode);
  fail("cannot write '", what, "': it is a ", kind,
       ", not a regular file. Only a regular file is replaced: the finished file is renamed over "
       "the target, which would put a regular file in the place of the ",
       kind, ", and writing into it could not be atomic. Give the path of a regular file");
}

// The file that writing `path` replaces: `path`, or the file a symbolic link there leads to,
// so that the link stays.
std::string resolve_target(const std::string& path) {
  struct stat link;
  if (::lstat(path.c_str(), &link) != 0 || !S_ISLNK(link.st_mode)) return path;
  char* resolved = ::realpath(path.c_str(), nullptr);
  if (!resolved) {
    const int err = errno;
    fail("cannot write '", printable(path), "': it is a symbolic link that leads to no file (",
         std::strerror(err), "); remove the link or give another path");
  }
  std::string target = resolved;
  std::free(resolved);
  return target;
}

// An unnamed temporary file in `directory` (O_TMPFILE), or -1 where the file system or the
// kernel has none, or /proc is missing (naming it later goes through /proc/self/fd).
int open_unnamed(const std::string& directory) {
#ifdef O_TMPFILE
  if (::access("/proc/self/fd", X_OK) != 0) return -1;
  return ::open(directory.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
#else
  (void)directory;
  return -1;
#endif
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(const std::string& path)
    : path_(path), target_(resolve_target(path)) {
  check_regular_or_absent(path_, target_);
  temp_path_ = target_ + ".tmp." + std::to_string(static_cast<long>(getpid()));
  directory_ = directory_of(target_);
  fd_ = open_unnamed(directory_);
  unnamed_ = fd_ >= 0;
  if (!unnamed_) {
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail_io("cannot create the temporary file '" + printable(temp_path_) + "'", errno);
    temp_exists_ = true;
  }
  buffer_.reserve(kBufferBytes);
}

AtomicFileWriter::~AtomicFileWriter() { discard(); }

void AtomicFileWriter::check_target(const std::string& path) { AtomicFileWriter probe(path); }

void AtomicFileWriter::write(const void* data, size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  if (buffer_.size() + size <= kBufferBytes) {
    buffer_.append(bytes, size);
    return;
  }
  flush_buffer();
  if (size >= kBufferBytes) {
    write_all(bytes, size);  // large tensors skip the copy into the buffer
  } else {
    buffer_.append(bytes, size);
  }
}

void AtomicFileWriter::link_into_place() {
  const std::string self = "/proc/self/fd/" + std::to_string(fd_);
  if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, target_.c_str(), AT_SYMLINK_FOLLOW) == 0) {
    committed_ = true;
    return;
  }
  if (errno != EEXIST) fail_io("cannot give the finished file its name", errno);
  ::unlink(temp_path_.c_str());  // a leftover of an earlier process that had our pid
  if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, temp_path_.c_str(), AT_SYMLINK_FOLLOW) != 0)
    fail_io("cannot name the finished file '" + printable(temp_path_) + "'", errno);
  temp_exists_ = true;
}

void AtomicFileWriter::commit() {
  flush_buffer();
  if (::fsync(fd_) != 0) fail_io("cannot flush the file to disk", errno);
  // The target may have become something else while the file was written (hours, for a run's
  // final weights).
  check_regular_or_absent(path_, target_);
  if (unnamed_) link_into_place();
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail_io("cannot close the file", errno);
  if (!committed_) {
    if (::rename(temp_path_.c_str(), target_.c_str()) != 0)
      fail_io("cannot rename '" + printable(temp_path_) + "' to '" + printable(target_) + "'",
              errno);
    temp_exists_ = false;
    committed_ = true;
  }
  // The new name lives in the directory: sync it so that it survives a power loss. Some file
  // systems cannot sync a directory (EINVAL); the name is then as durable as they make it.
  const int dir_fd = ::open(directory_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0)
    fail_io("cannot open the directory '" + printable(directory_) + "' to sync it", errno);
  const int synced = ::fsync(dir_fd);
  const int sync_errno = errno;
  ::close(dir_fd);
  if (synced != 0 && sync_errno != EINVAL)
    fail_io("cannot sync the directory '" + printable(directory_) + "'", sync_errno);
}

void AtomicFileWriter::flush_buffer() {
  write_all(buffer_.data(), buffer_.size());
  buffer_.clear();
}

void AtomicFileWriter::write_all(const char* data, size_t size) {
  while (size > 0) {
    const ssize_t written = ::write(fd_, data, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      fail_io(unnamed_ ? "cannot write the file" : "cannot write '" + printable(temp_path_) + "'",
              errno);
    }
    data += written;
    written_ += static_cast<size_t>(written);
    size -= static_cast<size_t>(written);
  }
}

void AtomicFileWriter::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (temp_exists_ && !committed_) ::unlink(temp_path_.c_str());
  temp_exists_ = false;
}

void AtomicFileWriter::fail_io(const std::string& what, int err) {
  discard();
  const bool replaced = committed_;
  fail("cannot write '", printable(path_), "': ", what, ": ", std::strerror(err), "; ",
       write_advice(err, directory_),
       replaced ? "." : ". Any earlier file at that path is unchanged.");
}

}  // namespace rddp
