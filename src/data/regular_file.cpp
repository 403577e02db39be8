#include "resnet_ddp/data/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "resnet_ddp/error.h"
#include "resnet_ddp/printable.h"

namespace rddp::data {

namespace {

std::string kind_of_mode(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

[[noreturn]] void refuse(const std::string& path, const std::string& kind) {
  fail("cannot read ", printable(path), ": it is ", kind, ", not a regular file. Data files "
       "must be regular files (a pipe, socket or device can block a read forever or never "
       "end): replace it with the file itself");
}

}  // namespace

std::string non_regular_kind(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) == 0) return kind_of_mode(info.st_mode);
  const int stat_errno = errno;
  if (::lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode))
    return stat_errno == ELOOP ? "a symbolic link in a loop" : "a symbolic link to a missing file";
  return "";
}

bool path_exists(const std::string& path) {
  struct stat info;
  return ::lstat(path.c_str(), &info) == 0;
}

RegularFile::RegularFile(const std::string& path) : path_(path) {
  const std::string kind = non_regular_kind(path);
  if (!kind.empty()) refuse(path, kind);
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd_ < 0) fail("cannot open ", printable(path), ": ", std::strerror(errno));
  struct stat info;
  if (::fstat(fd_, &info) != 0) {
    const int err = errno;
    ::close(fd_);
    fail("cannot read ", printable(path), ": ", std::strerror(err));
  }
  if (!S_ISREG(info.st_mode)) {  // swapped in after the first look
    ::close(fd_);
    refuse(path, kind_of_mode(info.st_mode));
  }
  // Reads of a regular file wait for the disk as usual.
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
  size_ = uint64_t(info.st_size);
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

size_t RegularFile::read(void* buffer, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t got = ::read(fd_, static_cast<char*>(buffer) + done, size - done);
    if (got < 0) {
      if (errno == EINTR) continue;
      fail("cannot read ", printable(path_), ": ", std::strerror(errno));
    }
    if (got == 0) break;
    done += size_t(got);
  }
  return done;
}

int RegularFile::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

}  // namespace rddp::data
