// idx files inflate no more than their header promises: a small .gz that inflates far beyond
// its header is refused once it passes that size, and running out of memory while reading one
// is an Error naming it.
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/error.h"
#include "support/child_process.h"
#include "support/scratch_dir.h"

using namespace rddp;
using namespace rddp::data;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> idx_header(uint32_t magic, std::vector<uint32_t> dims) {
  std::vector<uint8_t> bytes;
  auto put = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(uint8_t(v >> shift));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  return bytes;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// A valid set of four small idx files: 3 images of 4x4.
void write_small_set(const std::string& dir) {
  for (const char* prefix : {"train", "t10k"}) {
    std::vector<uint8_t> images = idx_header(0x803, {3, 4, 4});
    images.resize(images.size() + 48, 7);
    std::vector<uint8_t> labels = idx_header(0x801, {3});
    labels.insert(labels.end(), {0, 1, 2});
    write_bytes(dir + "/" + prefix + "-images-idx3-ubyte", images);
    write_bytes(dir + "/" + prefix + "-labels-idx1-ubyte", labels);
  }
}

// train-images-idx3-ubyte.gz: the header of 3 images of 4x4 and their 48 bytes, then
// `extra_mib` MiB of zeros (a few hundred bytes of gzip per MiB), with the gzip trailer cut off,
// so that only a reader that inflates it all reaches the end and finds it damaged.
void write_bomb(const std::string& dir, size_t extra_mib) {
  const std::string path = dir + "/train-images-idx3-ubyte.gz";
  fs::remove(dir + "/train-images-idx3-ubyte");
  gzFile file = gzopen(path.c_str(), "wb9");
  REQUIRE(file != nullptr);
  std::vector<uint8_t> start = idx_header(0x803, {3, 4, 4});
  start.resize(start.size() + 48, 7);
  REQUIRE(gzwrite(file, start.data(), unsigned(start.size())) == int(start.size()));
  const std::vector<uint8_t> zeros(1 << 20, 0);
  bool written = true;
  for (size_t i = 0; i < extra_mib; ++i)
    written &= gzwrite(file, zeros.data(), unsigned(zeros.size())) == int(zeros.size());
  REQUIRE(written);
  REQUIRE(gzclose(file) == Z_OK);
  fs::resize_file(path, fs::file_size(path) - 8);  // CRC and length
}

std::string error_of(const std::string& dir) {
  try {
    open_idx(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a .gz that inflates past its header's size is refused there, not at its end") {
  const std::string dir = testing::scratch_dir("bomb");
  write_small_set(dir);
  write_bomb(dir, 256);
  CHECK(fs::file_size(dir + "/train-images-idx3-ubyte.gz") < 1 << 20);
  CHECK(error_of(dir).find("train-images-idx3-ubyte.gz holds more than 48 bytes of data but its "
                           "header says 3x4x4 = 48") != std::string::npos);

  // The memory it takes, measured in a child process, whose peak starts afresh: 256 MiB for a
  // reader that inflates it all, next to nothing for one that stops.
  const testing::ChildResult child = testing::run_in_child([&] {
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    error_of(dir);
    getrusage(RUSAGE_SELF, &after);
    std::printf("%ld\n", after.ru_maxrss - before.ru_maxrss);
  });
  CHECK(WIFEXITED(child.status));
  const long grown_kib = std::strtol(child.output.c_str(), nullptr, 10);
  MESSAGE("reading the 256 MiB bomb raised the peak resident memory by ", grown_kib, " KiB");
  CHECK(grown_kib >= 0);
  CHECK(grown_kib < 32 * 1024);
}

TEST_CASE("a .gz whose header promises more than it holds costs only what it holds") {
  const std::string dir = testing::scratch_dir("short");
  write_small_set(dir);
  fs::remove(dir + "/train-images-idx3-ubyte");
  gzFile file = gzopen((dir + "/train-images-idx3-ubyte.gz").c_str(), "wb");
  REQUIRE(file != nullptr);
  // 60000 images of 65536x65536 pixels: 2.6e14 bytes promised, 100 given.
  std::vector<uint8_t> bytes = idx_header(0x803, {60000, 65536, 65536});
  bytes.resize(bytes.size() + 100, 1);
  REQUIRE(gzwrite(file, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
  REQUIRE(gzclose(file) == Z_OK);
  CHECK(error_of(dir).find("holds 100 bytes of data but its header says 60000x65536x65536 = "
                           "257698037760000") != std::string::npos);
}

#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer ends the program on such an allocation
TEST_CASE("an idx file too large for memory is an Error naming it, not std::bad_alloc") {
  const std::string dir = testing::scratch_dir("too_large");
  write_small_set(dir);
  const std::string path = dir + "/train-images-idx3-ubyte";
  // 4 TiB of data that its size on disk confirms (a sparse file: no disk space).
  write_bytes(path, idx_header(0x803, {1, 1u << 21, 1u << 21}));
  fs::resize_file(path, 16 + (uint64_t(1) << 42));
  const std::string message = error_of(dir);
  CHECK(message.find("not enough memory to read " + path + ": its header promises "
                     "4398046511104 bytes of data (1x2097152x2097152)") != std::string::npos);
}
#endif
