#include "pack_staging.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/printable.h"

namespace rddp::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStagingPrefix = "rddp-pack.tmp.";

// The pid in a name a pack run writes while it works: its staging folder, or a split's
// temporary (<split>.tmp.<pid>, AtomicFileWriter) as earlier versions wrote them in OUTPUT.
// 0 for any other name.
long temporary_owner(const std::string& name) {
  size_t digits_at = std::string::npos;
  if (name.rfind(kStagingPrefix, 0) == 0) {
    digits_at = std::strlen(kStagingPrefix);
  } else {
    for (const char* split : {"train.rddp-pack.tmp.", "val.rddp-pack.tmp."})
      if (name.rfind(split, 0) == 0) digits_at = std::strlen(split);
  }
  if (digits_at == std::string::npos || digits_at == name.size() ||
      name.size() - digits_at > 9)
    return 0;
  for (size_t i = digits_at; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return 0;
  return std::stol(name.substr(digits_at));
}

// Whether process `pid` of this machine is a resnet_ddp_pack (its name, as the kernel keeps
// it, is the program's file name cut to 15 characters, which "resnet_ddp_pack" fills).
bool is_running_pack(long pid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  return std::getline(comm, name) && name == "resnet_ddp_pack";
}

[[noreturn]] void fail_write(const std::string& output, const std::string& what, int err) {
  fail("cannot write the pack into ", printable(output), ": ", what, ": ", std::strerror(err),
       err == EACCES || err == EPERM || err == EROFS
           ? "; choose an output folder you can write to"
           : err == ENOSPC || err == EDQUOT ? "; free some space or write elsewhere" : "");
}

void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  // Some file systems cannot sync a directory; the renames are then as durable as they make it.
  (void)::fsync(fd);
  ::close(fd);
}

}  // namespace

PackStaging::PackStaging(const std::string& output,
                         const std::function<void(const std::string&)>& note)
    : output_(output), staging_(join_path(output, kStagingPrefix + std::to_string(getpid()))) {
  std::error_code error;
  fs::create_directories(output, error);
  if (error || !is_directory(output))
    fail("cannot create the output directory ", printable(output), ": ",
         error ? error.message() : std::string("a file of that name exists"),
         "; choose another path");
  std::vector<fs::path> leftovers;
  for (fs::directory_iterator it(output, error), end; !error && it != end; it.increment(error))
    if (temporary_owner(it->path().filename().string()) != 0) leftovers.push_back(it->path());
  if (error) fail("cannot list the output directory ", printable(output), ": ", error.message());
  for (const fs::path& leftover : leftovers) {
    const long owner = temporary_owner(leftover.filename().string());
    if (is_running_pack(owner))
      fail("another resnet_ddp_pack (process ", owner, ") is writing into ", printable(output),
           " (", printable(leftover.filename().string()), "): wait for it to finish or stop it; "
           "two runs into one folder would mix their packs");
    std::error_code remove_error;
    const uintmax_t removed = fs::remove_all(leftover, remove_error);
    if (remove_error)
      fail("cannot remove ", printable(leftover.string()), ", left by a resnet_ddp_pack run "
           "that was stopped: ", remove_error.message(), "; remove it yourself");
    if (note)
      note("removed " + printable(leftover.string()) + " (" + std::to_string(removed) +
           " file(s)), left by a resnet_ddp_pack run that was stopped");
  }
  if (::mkdir(staging_.c_str(), 0755) != 0)
    fail_write(output, "cannot create " + printable(staging_), errno);
}

PackStaging::~PackStaging() {
  std::error_code ignored;
  fs::remove_all(staging_, ignored);
}

std::string PackStaging::staged(const std::string& name) const { return join_path(staging_, name); }

void PackStaging::commit(const std::vector<std::string>& written,
                         const std::vector<std::string>& all) {
  for (const std::string& name : all) {
    if (std::find(written.begin(), written.end(), name) != written.end()) continue;
    const std::string stale = join_path(output_, name);
    if (::unlink(stale.c_str()) != 0 && errno != ENOENT)
      fail_write(output_, "cannot remove the earlier " + name + " that this run does not replace",
                 errno);
  }
  for (const std::string& name : written)
    if (::rename(staged(name).c_str(), join_path(output_, name).c_str()) != 0)
      fail_write(output_, "cannot move " + name + " into place", errno);
  sync_directory(output_);
}

}  // namespace rddp::data
