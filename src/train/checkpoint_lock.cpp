#include "resnet_ddp/train/checkpoint_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>

#include "resnet_ddp/error.h"
#include "resnet_ddp/host_name.h"
#include "resnet_ddp/printable.h"

namespace rddp {

namespace {

// Who holds the lock, as the next run refused will read it.
std::string holder_text() {
  char started[64] = "?";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  if (::gmtime_r(&now, &utc)) std::strftime(started, sizeof started, "%Y-%m-%d %H:%M:%S UTC", &utc);
  std::string text =
      "resnet_ddp pid " + std::to_string(static_cast<long>(::getpid())) + " on host " + host_name();
  if (const char* job = std::getenv("SLURM_JOB_ID"); job && *job)
    text += " (Slurm job " + std::string(job) + ")";
  if (const char* job = std::getenv("PBS_JOBID"); job && *job)
    text += " (PBS job " + std::string(job) + ")";
  return text + ", started " + started;
}

std::string read_holder(int fd) {
  char text[1024];
  const ssize_t length = ::pread(fd, text, sizeof text - 1, 0);
  if (length <= 0) return "another run (it has not yet said which)";
  std::string holder(text, static_cast<size_t>(length));
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
  return printable(holder);
}

}  // namespace

CheckpointDirLock::CheckpointDirLock(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kFileName).string();
  // Not through a symbolic link, and only a regular file: the holder's description is written
  // into it, which must not truncate a file elsewhere that a link there leads to.
  constexpr int kFlags = O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | kFlags, 0644);
  // Another user's lock file locks as well read-only; it then keeps its holder's description.
  const bool writable = fd_ >= 0;
  if (fd_ < 0 && errno == EACCES) fd_ = ::open(path.c_str(), O_RDONLY | kFlags);
  struct stat info;
  if (fd_ >= 0 && (::fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode))) {
    ::close(fd_);
    fd_ = -1;
    errno = EINVAL;
  }
  if (fd_ < 0) {
    const int err = errno;
    fail("--checkpoint-dir '", printable(dir), "': cannot use its lock file '", printable(path),
         "': ",
         err == ELOOP || err == EINVAL
             ? std::string("it is not a regular file (a symbolic link, say)")
             : std::string(std::strerror(err)),
         "; remove it (a run makes it afresh), or choose a directory you can write to");
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      const std::string holder = read_holder(fd_);
      ::close(fd_);
      fd_ = -1;
      fail("--checkpoint-dir '", printable(dir), "' is in use by another run: ", holder, " holds '",
           printable(path),
           "'. Two runs that write one directory resume and remove each other's "
           "checkpoints: give this run a --checkpoint-dir of its own, or end that run first (the "
           "lock goes with its process)");
    }
    ::close(fd_);
    fd_ = -1;
    note_ = "--checkpoint-dir '" + printable(dir) + "': its file system has no file locks (" +
            std::strerror(err) +
            "), so nothing keeps another run from writing the same directory; "
            "give each run a directory of its own";
    return;
  }
  // Who holds it, for the next run refused; a failure here costs only that description.
  const std::string holder = holder_text() + "\n";
  if (writable && ::ftruncate(fd_, 0) == 0) {
    const ssize_t ignored = ::pwrite(fd_, holder.data(), holder.size(), 0);
    (void)ignored;
  }
}

CheckpointDirLock::~CheckpointDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock; the file stays for the next run to lock
}

}  // namespace rddp
