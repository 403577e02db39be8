#include "resnet_ddp/data/file_io.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "resnet_ddp/error.h"

namespace rddp::data {

std::vector<uint8_t> read_file(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) fail("cannot open ", path, ": ", std::strerror(errno));
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  size_t got;
  while ((got = std::fread(chunk, 1, sizeof chunk, file.get())) > 0)
    bytes.insert(bytes.end(), chunk, chunk + got);
  if (std::ferror(file.get())) fail("cannot read ", path, ": ", std::strerror(errno));
  return bytes;
}

std::vector<uint8_t> read_maybe_gzip_file(const std::string& path) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), &gzclose);
  if (!file) fail("cannot open ", path, ": ", std::strerror(errno));
  gzbuffer(file.get(), 1 << 18);
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  int got;
  while ((got = gzread(file.get(), chunk, sizeof chunk)) > 0)
    bytes.insert(bytes.end(), chunk, chunk + got);
  // A truncated stream can end a read without a negative count; the error is still kept.
  int code = Z_OK;
  const char* why = gzerror(file.get(), &code);
  if (got < 0 || code != Z_OK)
    fail("cannot read ", path, ": ", why,
         " (a damaged or truncated gzip file: download or unpack it again)");
  return bytes;
}

bool is_directory(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool is_regular_file(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

}  // namespace rddp::data
