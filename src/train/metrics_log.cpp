#include "resnet_ddp/train/metrics_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "resnet_ddp/error.h"
#include "resnet_ddp/printable.h"

namespace rddp {

MetricsLog::MetricsLog(const std::string& path, bool active) : path_(path) {
  if (path.empty() || !active) return;
  // Not blocking, so that a FIFO nobody reads is refused (ENXIO) instead of waited on forever.
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int err = errno;
    fail("--log-json: cannot open '", printable(path), "' for appending: ", std::strerror(err),
         err == ENXIO
             ? "; it is a FIFO that no process reads: start its reader first, or give a file"
         : err == EISDIR ? "; give the path of a file"
         : err == ENOENT ? "; create its directory or fix the path"
                         : "; choose a file in a directory you can write to");
  }
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

std::string MetricsLog::write(const JsonLine& record) {
  if (fd_ < 0) return {};
  const std::string line = record.text() + "\n";
  // Where the line starts in a regular file: a line cut short by a full disk is cut off again,
  // so that the lines after it still parse (-1 for a FIFO).
  const off_t start = ::lseek(fd_, 0, SEEK_END);
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t written = ::write(fd_, line.data() + done, line.size() - done);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      const int err = written < 0 ? errno : EIO;
      if (done > 0 && start >= 0 && ::ftruncate(fd_, start) != 0) {
        // The torn line stays; the warning below still says the record is lost.
      }
      if (lost_++ > 0) return {};
      first_loss_ = line.substr(0, line.find(',')) + "...}";
      return "--log-json: cannot write '" + printable(path_) + "': " + std::strerror(err) +
             "; training goes on, but this record (" + first_loss_ +
             ") and any other that fails are lost from the log. Free space on its file system, or "
             "give another --log-json when you resume";
    }
    done += static_cast<size_t>(written);
  }
  struct stat info;
  if (!removed_told_ && ::fstat(fd_, &info) == 0 && S_ISREG(info.st_mode) && info.st_nlink == 0) {
    removed_told_ = true;
    return "--log-json: '" + printable(path_) +
           "' was deleted while this run writes it: its records "
           "go on into a file no one can open. Give another --log-json when you resume";
  }
  return {};
}

std::string MetricsLog::losses() const {
  if (lost_ == 0) return {};
  return "--log-json: " + std::to_string(lost_) + " record(s) could not be written to '" +
         printable(path_) + "' (the first: " + first_loss_ + ")";
}

}  // namespace rddp
