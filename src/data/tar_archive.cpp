#include "resnet_ddp/data/tar_archive.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

constexpr size_t kBlock = 512;
constexpr uint64_t kMaxLongName = 64 * 1024;
constexpr uint64_t kMaxPaxHeader = 1 << 20;
constexpr size_t kFirstChunk = size_t(1) << 20;

struct Entry {
  std::string name;
  char type = '0';
  uint64_t size = 0;

  bool is_file() const { return type == '0' || type == '\0' || type == '7'; }
  // As Python's tarfile reads archives: links, devices, FIFOs and folders carry no data,
  // whatever their size field says; everything else does.
  bool has_data() const { return type < '1' || type > '6'; }
};

uint64_t padded(uint64_t size) { return (size + kBlock - 1) / kBlock * kBlock; }

std::string without_dot_slash(std::string name) {
  while (name.compare(0, 2, "./") == 0) name.erase(0, 2);
  return name;
}

// A tar archive as a stream of uncompressed bytes.
class TarStream {
 public:
  explicit TarStream(const std::string& path)
      : path_(path), file_(gzopen(path.c_str(), "rb"), &gzclose) {
    if (!file_) fail("cannot open ", path, ": ", std::strerror(errno));
    gzbuffer(file_.get(), 1 << 18);
  }

  // The next entry's header, after any long-name and pax headers that belong to it; false
  // at the end of the archive.
  bool next(Entry& entry) {
    std::string long_name, pax_path;
    int64_t pax_size = -1;
    for (;;) {
      uint8_t header[kBlock];
      const uint64_t at = offset_;
      const size_t got = read(header, kBlock);
      // The end: two blocks of zeros, or (as Python's tarfile accepts) no more blocks.
      if (got == 0 || std::all_of(header, header + got, [](uint8_t b) { return b == 0; }))
        return false;
      if (got < kBlock) truncated("a header");
      check_header(header, at);
      const uint64_t size = number(header + 124, 12, at, "size");
      const char type = char(header[156]);
      if (type == 'L' || type == 'x') {
        const std::string text = text_data(size, type == 'L' ? kMaxLongName : kMaxPaxHeader,
                                           type == 'L' ? "a GNU long name" : "a pax header");
        if (type == 'L') long_name = text.substr(0, text.find('\0'));
        else read_pax(text, at, pax_path, pax_size);
        continue;
      }
      if (type == 'g') {
        skip(padded(size));
        continue;
      }
      entry.name = !pax_path.empty() ? pax_path : !long_name.empty() ? long_name
                                                                     : header_name(header);
      entry.type = type;
      entry.size = pax_size >= 0 ? uint64_t(pax_size) : size;
      return true;
    }
  }

  // The current entry's bytes, grown as they arrive rather than sized from the header.
  std::vector<uint8_t> data(const Entry& entry) {
    std::vector<uint8_t> bytes;
    for (uint64_t left = entry.size; left > 0;) {
      const size_t chunk = size_t(std::min<uint64_t>(left, std::max(kFirstChunk, bytes.size())));
      const size_t old = bytes.size();
      bytes.reserve(old + chunk);
      bytes.resize(old + chunk);
      if (read(bytes.data() + old, chunk) < chunk) truncated(entry.name);
      left -= chunk;
    }
    skip(padded(entry.size) - entry.size);
    return bytes;
  }

  void skip_data(const Entry& entry) {
    if (entry.has_data()) skip(padded(entry.size), entry.name);
  }

  // Reads what follows the end of the archive, so that gzip's trailer checks the whole file.
  void drain() {
    uint8_t chunk[1 << 16];
    while (read(chunk, sizeof chunk) == sizeof chunk) {
    }
  }

 private:
  // Up to `count` bytes; fewer only at the end of the file.
  size_t read(void* into, size_t count) {
    size_t done = 0;
    while (done < count) {
      const unsigned ask = unsigned(std::min<size_t>(count - done, 1u << 30));
      const int got = gzread(file_.get(), static_cast<uint8_t*>(into) + done, ask);
      if (got > 0) done += size_t(got);
      int code = Z_OK;
      const char* why = gzerror(file_.get(), &code);
      // A truncated stream can end a read without a negative count; the error is still kept.
      if (got < 0 || (code != Z_OK && code != Z_STREAM_END))
        fail("cannot read ", path_, ": ", why, " after ", offset_ + done, " bytes of its tar "
             "archive (a damaged or truncated gzip file: download it again)");
      if (got == 0) break;
    }
    offset_ += done;
    return done;
  }

  void skip(uint64_t count, const std::string& what = "the archive's padding") {
    uint8_t chunk[1 << 16];
    while (count > 0) {
      const size_t want = size_t(std::min<uint64_t>(count, sizeof chunk));
      if (read(chunk, want) < want) truncated(what);
      count -= want;
    }
  }

  [[noreturn]] void truncated(const std::string& what) const {
    fail(path_, " ends inside ", what, " after ", offset_, " bytes of its tar archive: the "
         "archive is truncated; download it again");
  }

  [[noreturn]] void damaged(uint64_t at, const std::string& what) const {
    fail(path_, ": ", what, " in the tar header at byte ", at, ": the file is not a tar "
         "archive (gzip-compressed or plain) or it is damaged; download it again");
  }

  void check_header(const uint8_t* header, uint64_t at) const {
    // The sum of the header's bytes with the checksum field as spaces; some old writers
    // summed signed bytes, which tar accepts too.
    uint64_t sum = 0;
    int64_t signed_sum = 0;
    for (size_t i = 0; i < kBlock; ++i) {
      const bool field = i >= 148 && i < 156;
      sum += field ? ' ' : header[i];
      signed_sum += field ? ' ' : int8_t(header[i]);
    }
    const uint64_t stored = number(header + 148, 8, at, "checksum");
    if (stored != sum && int64_t(stored) != signed_sum) damaged(at, "a wrong checksum");
  }

  // An octal field, or GNU's base-256 form for large values (first byte 0x80).
  uint64_t number(const uint8_t* field, size_t length, uint64_t at, const char* what) const {
    uint64_t value = 0;
    if (field[0] == 0x80) {
      for (size_t i = 1; i < length; ++i) {
        if (value >> 55) damaged(at, std::string("a ") + what + " beyond 2^63");
        value = value << 8 | field[i];
      }
      return value;
    }
    size_t i = 0;
    while (i < length && field[i] == ' ') ++i;
    for (; i < length && field[i] != '\0' && field[i] != ' '; ++i) {
      if (field[i] < '0' || field[i] > '7') damaged(at, std::string("a ") + what + " not in octal");
      value = value << 3 | uint64_t(field[i] - '0');
    }
    return value;
  }

  static std::string header_name(const uint8_t* header) {
    auto field = [header](size_t start, size_t length) {
      const char* text = reinterpret_cast<const char*>(header + start);
      return std::string(text, strnlen(text, length));
    };
    std::string name = field(0, 100);
    // POSIX ustar keeps the start of long paths in a prefix field; GNU headers ("ustar  ")
    // use those bytes for other things.
    if (std::memcmp(header + 257, "ustar\0", 6) == 0) {
      const std::string prefix = field(345, 155);
      if (!prefix.empty()) name = prefix + "/" + name;
    }
    return name;
  }

  std::string text_data(uint64_t size, uint64_t limit, const char* what) {
    if (size > limit)
      fail(path_, ": ", what, " of ", size, " bytes, more than any archive writer makes: the "
           "archive is damaged; download it again");
    Entry entry;
    entry.name = what;
    entry.size = size;
    const std::vector<uint8_t> bytes = data(entry);
    return std::string(bytes.begin(), bytes.end());
  }

  // pax records: "<length> <key>=<value>\n", the length counting the whole record.
  void read_pax(const std::string& text, uint64_t at, std::string& path, int64_t& size) const {
    size_t start = 0;
    while (start < text.size() && text[start] != '\0') {
      size_t length = 0, i = start;
      for (; i < text.size() && text[i] >= '0' && text[i] <= '9' && length <= text.size(); ++i)
        length = length * 10 + size_t(text[i] - '0');
      if (i >= text.size() || text[i] != ' ' || length <= i - start ||
          length > text.size() - start || text[start + length - 1] != '\n')
        damaged(at, "a malformed pax record");
      const std::string record = text.substr(i + 1, start + length - 1 - (i + 1));
      const size_t equals = record.find('=');
      if (equals == std::string::npos) damaged(at, "a pax record without '='");
      const std::string key = record.substr(0, equals), value = record.substr(equals + 1);
      if (key == "path") path = value;
      if (key == "size") {
        if (value.empty() || value.size() > 18 ||
            value.find_first_not_of("0123456789") != std::string::npos)
          damaged(at, "a pax size that is not a number");
        size = std::stoll(value);
      }
      start += length;
    }
  }

  std::string path_;
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file_;
  uint64_t offset_ = 0;  // uncompressed bytes read
};

}  // namespace

std::map<std::string, std::vector<uint8_t>> read_tar_members(
    const std::string& path, const std::vector<std::string>& names, uint64_t max_member_bytes) {
  std::map<std::string, std::vector<uint8_t>> found;
  TarStream stream(path);
  Entry entry;
  while (stream.next(entry)) {
    const std::string name = without_dot_slash(entry.name);
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      stream.skip_data(entry);
      continue;
    }
    if (!entry.is_file())
      fail(path, ": ", name, " is stored in the archive as ",
           entry.type == '1' || entry.type == '2' ? "a link" : "something other than a file",
           ", not as the file itself; download the archive again");
    if (entry.size > max_member_bytes)
      fail(path, ": ", name, " is ", entry.size, " bytes in the archive, more than the ",
           max_member_bytes, " such a file can be: the archive is damaged or not the one "
           "expected; download it again");
    found[name] = stream.data(entry);
  }
  stream.drain();
  return found;
}

std::optional<std::string> first_tar_entry(const std::string& path) {
  try {
    TarStream stream(path);
    Entry entry;
    if (stream.next(entry)) return without_dot_slash(entry.name);
  } catch (const Error&) {
  }
  return std::nullopt;
}

}  // namespace rddp::data
