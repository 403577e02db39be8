#include "resnet_ddp/atomic_file_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "resnet_ddp/error.h"

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
      return "'" + directory + "' is not writable: choose a directory you can write to";
    case ENOENT:
    case ENOTDIR: {
      struct stat info;
      if (::stat(directory.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
        return "'" + directory + "' does not take new files: choose another directory";
      return "the directory '" + directory + "' does not exist: create it or fix the path";
    }
    case EISDIR:
      return "the target is a directory: give a file name";
    default:
      return "check the path and the file system";
  }
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(const std::string& path)
    : path_(path),
      temp_path_(path + ".tmp." + std::to_string(static_cast<long>(getpid()))),
      directory_(directory_of(path)) {
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_io("cannot create the temporary file '" + temp_path_ + "'", errno);
  buffer_.reserve(kBufferBytes);
}

AtomicFileWriter::~AtomicFileWriter() { discard(); }

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

void AtomicFileWriter::commit() {
  flush_buffer();
  if (::fsync(fd_) != 0) fail_io("cannot flush '" + temp_path_ + "' to disk", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail_io("cannot close '" + temp_path_ + "'", errno);
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0)
    fail_io("cannot rename '" + temp_path_ + "' to '" + path_ + "'", errno);
  committed_ = true;
  // The rename itself lives in the directory: sync it so that it survives a power loss.
  // Some file systems cannot sync a directory (EINVAL); the rename is then as durable as
  // they make it.
  const int dir_fd = ::open(directory_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) fail_io("cannot open the directory '" + directory_ + "' to sync it", errno);
  const int synced = ::fsync(dir_fd);
  const int sync_errno = errno;
  ::close(dir_fd);
  if (synced != 0 && sync_errno != EINVAL)
    fail_io("cannot sync the directory '" + directory_ + "'", sync_errno);
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
      fail_io("cannot write '" + temp_path_ + "'", errno);
    }
    data += written;
    written_ += static_cast<size_t>(written);
    size -= static_cast<size_t>(written);
  }
}

void AtomicFileWriter::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!committed_) ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::fail_io(const std::string& what, int err) {
  discard();
  const bool replaced = committed_;
  fail("cannot write '", path_, "': ", what, ": ", std::strerror(err), "; ",
       write_advice(err, directory_),
       replaced ? "." : ". Any earlier file at that path is unchanged.");
}

}  // namespace rddp
