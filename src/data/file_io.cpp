#include "resnet_ddp/data/file_io.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "resnet_ddp/data/regular_file.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/printable.h"

namespace rddp::data {

std::vector<uint8_t> read_file(const std::string& path, uint64_t max_bytes,
                               const char* limit_reason) {
  RegularFile file(path);
  auto refuse_size = [&](uint64_t size) {
    fail(printable(path), " is ", size, " bytes, more than the ", max_bytes, " bytes ",
         limit_reason ? limit_reason : "a file may have here");
  };
  if (file.size() > max_bytes) refuse_size(file.size());
  std::vector<uint8_t> bytes;
  try {
    // The size at open, and one byte more to see the end; a file that grew since is read on.
    bytes.resize(size_t(file.size()) + 1);
    size_t got = file.read(bytes.data(), bytes.size());
    while (got == bytes.size()) {
      if (got > max_bytes) refuse_size(got);
      bytes.resize(std::min<uint64_t>(2 * bytes.size(), max_bytes + 1));
      got += file.read(bytes.data() + got, bytes.size() - got);
    }
    if (got > max_bytes) refuse_size(got);
    bytes.resize(got);
  } catch (const std::bad_alloc&) {
    fail("not enough memory to read ", printable(path), " (", file.size(),
         " bytes): free memory, or check that this is the file you meant");
  }
  return bytes;
}

struct MaybeGzipReader::Stream {
  gzFile file = nullptr;
  ~Stream() {
    if (file) gzclose(file);
  }
};

MaybeGzipReader::MaybeGzipReader(const std::string& path)
    : path_(path), stream_(std::make_unique<Stream>()) {
  RegularFile file(path);
  file_size_ = file.size();
  const int fd = file.release();
  stream_->file = gzdopen(fd, "rb");
  if (!stream_->file) {
    ::close(fd);
    fail("cannot read ", printable(path), ": not enough memory for zlib");
  }
  gzbuffer(stream_->file, 1 << 18);
  compressed_ = gzdirect(stream_->file) == 0;
}

MaybeGzipReader::~MaybeGzipReader() = default;

size_t MaybeGzipReader::read(void* buffer, size_t size) {
  size_t done = 0;
  while (done < size) {
    const unsigned chunk = unsigned(std::min<size_t>(size - done, 1u << 30));
    const int got = gzread(stream_->file, static_cast<uint8_t*>(buffer) + done, chunk);
    // A truncated stream can end a read without a negative count; the error is still kept.
    int code = Z_OK;
    std::string why = gzerror(stream_->file, &code);
    if (got < 0 || code != Z_OK) {
      // zlib starts its message with the name it knows the file by, "<fd:3>" from gzdopen.
      if (why.rfind("<fd:", 0) == 0 && why.find(": ") != std::string::npos)
        why = why.substr(why.find(": ") + 2);
      fail("cannot read ", printable(path_), ": ", why,
           " (a damaged or truncated gzip file: download or unpack it again)");
    }
    if (got == 0) break;
    done += size_t(got);
  }
  return done;
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
