// AtomicFileWriter: only a regular file is replaced (a device, a FIFO or a directory at the
// target is refused and left as it was), a symbolic link is written through, and a process
// killed mid-write leaves no temporary behind.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "resnet_ddp/atomic_file_writer.h"
#include "resnet_ddp/error.h"
#include "support/scratch_dir.h"

using namespace rddp;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& bytes) {
  AtomicFileWriter out(path);
  out.write(bytes.data(), bytes.size());
  out.commit();
}

size_t entries(const fs::path& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

}  // namespace

TEST_CASE("a FIFO, a device or a directory at the target is refused and left as it was") {
  const fs::path dir = testing::fresh_dir("atomic_file_writer", "special_targets");
  const std::string fifo = (dir / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  CHECK_THROWS_WITH_AS(write_file(fifo, "weights"),
                       doctest::Contains("it is a FIFO, not a regular file"), Error);
  CHECK_THROWS_WITH_AS(AtomicFileWriter::check_target(fifo),
                       doctest::Contains("Give the path of a regular file"), Error);
  CHECK(fs::is_fifo(fifo));

  // A copy of /dev/null (mknod needs root; elsewhere the FIFO above stands for it).
  const std::string null_copy = (dir / "null").string();
  if (::mknod(null_copy.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    CHECK_THROWS_WITH_AS(write_file(null_copy, "weights"),
                         doctest::Contains("it is a character device"), Error);
    CHECK(fs::is_character_file(null_copy));
  }

  fs::create_directory(dir / "sub");
  CHECK_THROWS_WITH_AS(write_file((dir / "sub").string(), "weights"),
                       doctest::Contains("it is a directory"), Error);
  CHECK(fs::is_directory(dir / "sub"));
  CHECK(fs::is_empty(dir / "sub"));
  CHECK(entries(dir) == (fs::exists(null_copy) ? 3u : 2u));  // no temporary left beside them
}

TEST_CASE("a symbolic link is written through; one that leads nowhere is refused") {
  const fs::path dir = testing::fresh_dir("atomic_file_writer", "links");
  write_file((dir / "real.rddp").string(), "old");
  fs::create_symlink("real.rddp", dir / "link.rddp");
  write_file((dir / "link.rddp").string(), "new");
  CHECK(fs::is_symlink(dir / "link.rddp"));
  CHECK(slurp(dir / "real.rddp") == "new");

  fs::create_symlink("missing/nothing.rddp", dir / "dangling.rddp");
  CHECK_THROWS_WITH_AS(write_file((dir / "dangling.rddp").string(), "new"),
                       doctest::Contains("a symbolic link that leads to no file"), Error);
  CHECK(entries(dir) == 3);
}

TEST_CASE("a new file and a replaced one read back whole, with nothing else in the directory") {
  const fs::path dir = testing::fresh_dir("atomic_file_writer", "round_trip");
  const std::string path = (dir / "w.rddp").string();
  write_file(path, "first");
  CHECK(slurp(path) == "first");
  write_file(path, std::string(3 << 20, 'x'));  // past the buffer: written straight through
  CHECK(slurp(path) == std::string(3 << 20, 'x'));
  AtomicFileWriter::check_target(path);
  CHECK(slurp(path) == std::string(3 << 20, 'x'));
  CHECK(entries(dir) == 1);
}

TEST_CASE("a process killed in the middle of a write leaves the old file and no temporary") {
  const fs::path dir = testing::fresh_dir("atomic_file_writer", "killed");
  const std::string path = (dir / "checkpoint.rddp").string();
  write_file(path, "the previous checkpoint");
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    try {
      AtomicFileWriter out(path);
      const std::string part(2 << 20, 'y');
      out.write(part.data(), part.size());
      ::kill(::getpid(), SIGKILL);
    } catch (...) {
    }
    ::_exit(1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(slurp(path) == "the previous checkpoint");
  CHECK(entries(dir) == 1);
}
