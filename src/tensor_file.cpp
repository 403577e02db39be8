#include "resnet_ddp/tensor_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <sstream>

#include "resnet_ddp/atomic_file_writer.h"
#include "resnet_ddp/crc32.h"

namespace rddp {

// The format is little-endian and records are copied to and from memory as they are.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "tensor files are little-endian; a big-endian host needs byte swapping here");

namespace {

constexpr char kMagic[8] = {'R', 'D', 'D', 'P', 'T', 'N', 'S', 'R'};
constexpr char kEndMarker[8] = {'R', 'D', 'D', 'P', 'E', 'N', 'D', '\0'};
constexpr uint32_t kVersion = 1;
// Limits that no real file comes near; they keep a corrupt length from meaning anything.
constexpr uint32_t kMaxNameBytes = 4096;
constexpr uint32_t kMaxDims = 32;

bool valid_dtype_code(uint32_t code) { return code >= 1 && code <= 7; }

// Strict UTF-8 (no overlong forms, no surrogates), as Python's decoder accepts it.
bool is_valid_utf8(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char lead = s[i];
    size_t extra = 0;
    unsigned char low = 0x80, high = 0xBF;  // allowed range of the first continuation byte
    if (lead < 0x80) {
      ++i;
      continue;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      extra = 1;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      extra = 2;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      extra = 3;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      return false;
    }
    if (i + extra >= n) return false;
    if (s[i + 1] < low || s[i + 1] > high) return false;
    for (size_t k = 2; k <= extra; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return false;
    i += extra + 1;
  }
  return true;
}

// Appends little-endian fields to an in-memory header.
class HeaderBuilder {
 public:
  template <typename T>
  void put(T value) {
    const auto* bytes = reinterpret_cast<const char*>(&value);
    text_.append(bytes, sizeof(T));
  }
  void put_string(const std::string& text) {
    put(static_cast<uint32_t>(text.size()));
    text_ += text;
  }
  void put_raw(const char* data, size_t size) { text_.append(data, size); }
  const std::string& bytes() const { return text_; }
  void clear() { text_.clear(); }

 private:
  std::string text_;
};

// Refuses, before anything is written, a file that read_tensor_file would reject.
void check_writable(const std::string& path, const TensorFile& file) {
  for (const auto& [key, value] : file.metadata) {
    if (key.empty() || key.size() > kMaxNameBytes)
      fail("cannot write '", path, "': metadata keys must be 1 to ", kMaxNameBytes,
           " bytes long, got one of ", key.size());
    if (!is_valid_utf8(key) || !is_valid_utf8(value))
      fail("cannot write '", path, "': metadata entry '", key, "' is not valid UTF-8");
    if (value.size() > std::numeric_limits<uint32_t>::max())
      fail("cannot write '", path, "': metadata value of '", key, "' exceeds 4 GiB");
  }
  std::set<std::string> names;
  for (const TensorRecord& record : file.tensors) {
    if (record.name.empty() || record.name.size() > kMaxNameBytes || !is_valid_utf8(record.name))
      fail("cannot write '", path, "': tensor names must be UTF-8 of 1 to ", kMaxNameBytes,
           " bytes, got '", record.name, "'");
    if (!names.insert(record.name).second)
      fail("cannot write '", path, "': two tensors are named '", record.name, "'");
    if (!valid_dtype_code(static_cast<uint32_t>(record.dtype)))
      fail("cannot write '", path, "': tensor '", record.name, "' has an unknown dtype code ",
           static_cast<uint32_t>(record.dtype));
    if (record.shape.size() > kMaxDims)
      fail("cannot write '", path, "': tensor '", record.name, "' has ", record.shape.size(),
           " dimensions, more than the format's ", kMaxDims);
    for (int64_t dim : record.shape)
      if (dim < 0)
        fail("cannot write '", path, "': tensor '", record.name, "' has a negative dimension in ",
             shape_to_string(record.shape));
    const size_t expected = record.numel() * dtype_size(record.dtype);
    if (record.bytes.size() != expected)
      fail("cannot write '", path, "': tensor '", record.name, "' of shape ",
           shape_to_string(record.shape), " and dtype ", to_string(record.dtype), " needs ",
           expected, " bytes, but holds ", record.bytes.size());
  }
}

// Recognises files that are not ours, so the message can say what to do with them.
std::string foreign_file_advice(const unsigned char* head, size_t size) {
  auto starts_with = [&](const char* prefix, size_t length) {
    return size >= length && std::memcmp(head, prefix, length) == 0;
  };
  if (starts_with("PK\x03\x04", 4))
    return "it is a zip archive, as torch.save writes .pth/.pt files: convert it with "
           "scripts/torchvision_to_resnet_ddp.py";
  if (size >= 1 && head[0] == 0x80)
    return "it looks like a Python pickle (an old-style torch.save file): convert it with "
           "scripts/torchvision_to_resnet_ddp.py";
  if (starts_with("version https://git-lfs", 23))
    return "it is a Git LFS pointer, not the file itself: run `git lfs pull`";
  if (starts_with("\x93NUMPY", 6)) return "it is a NumPy .npy file";
  if (starts_with("\x89HDF", 4)) return "it is an HDF5 file (Keras?)";
  if (starts_with("\x1f\x8b", 2)) return "it is gzip-compressed: decompress it first";
  if (size >= 9 && head[8] == '{')
    return "it looks like a safetensors file: load it in Python, torch.save the state_dict, "
           "and convert that with scripts/torchvision_to_resnet_ddp.py";
  return "it does not start with the resnet_ddp magic 'RDDPTNSR'";
}

// Reads a file front to back, checking every length against the bytes that are left and
// keeping a running CRC of what it has read.
class Cursor {
 public:
  Cursor(std::FILE* stream, const std::string& path, uint64_t size)
      : stream_(stream), path_(path), size_(size) {}

  uint64_t remaining() const { return size_ - position_; }
  void set_place(std::string place) { place_ = std::move(place); }
  void reset_crc() { crc_ = 0; }
  uint32_t crc() const { return crc_; }

  void read(void* out, uint64_t size) {
    if (size > remaining()) truncated(size);
    if (size > 0 && std::fread(out, 1, size, stream_) != size) {
      if (std::ferror(stream_)) fail("cannot read '", path_, "': ", std::strerror(errno));
      fail("'", path_, "' shrank while it was being read: is another program writing it?");
    }
    position_ += size;
    crc_ = crc32_update(crc_, out, size);
  }

  template <typename T>
  T get() {
    T value;
    read(&value, sizeof(T));
    return value;
  }

  std::string get_string(uint32_t size) {
    if (size > remaining()) truncated(size);  // before allocating a corrupt length
    std::string text(size, '\0');
    read(text.data(), size);
    return text;
  }

  [[noreturn]] void truncated(uint64_t wanted) const {
    fail("'", path_, "' is truncated ", place_, ": ", wanted, " more bytes are needed but only ",
         remaining(), " remain (", wanted - remaining(), " missing). The file was cut short, ",
         "perhaps by an interrupted copy or download (or a length before this point is ",
         "corrupt): copy it again");
  }

  // Says what the file looks like instead, from its first bytes.
  [[noreturn]] void not_ours() const {
    unsigned char head[32];
    std::rewind(stream_);
    const size_t size = std::fread(head, 1, sizeof(head), stream_);
    fail("'", path_, "' is not a resnet_ddp tensor file: ", foreign_file_advice(head, size));
  }

  [[noreturn]] void corrupt(const std::string& what) const {
    fail("'", path_, "' is corrupt ", place_, ": ", what,
         ". Copy the file again, or use an earlier copy");
  }

 private:
  std::FILE* stream_;
  const std::string& path_;
  uint64_t size_, position_ = 0;
  uint32_t crc_ = 0;
  std::string place_ = "in the file header";
};

struct FileCloser {
  void operator()(std::FILE* stream) const { std::fclose(stream); }
};

void read_header(Cursor& in, const std::string& path, TensorFile& file, uint64_t& tensor_count) {
  char magic[8] = {};  // GCC cannot see that read() fills it before the CRC reads it
  const uint64_t head_size = std::min<uint64_t>(sizeof(magic), in.remaining());
  in.read(magic, head_size);
  if (std::memcmp(magic, kMagic, head_size) != 0) in.not_ours();
  if (head_size < sizeof(magic)) in.truncated(sizeof(magic) - head_size);

  // The version comes first: a newer version may lay out everything after it differently.
  const auto version = in.get<uint32_t>();
  if (version > kVersion)
    throw TensorFileTooNew("'" + path + "' uses format version " + std::to_string(version) +
                           ", newer than this build of resnet_ddp reads (" +
                           std::to_string(kVersion) +
                           "): use the resnet_ddp that wrote it, or a newer one");
  if (version == 0) in.corrupt("format version 0 does not exist");
  const auto flags = in.get<uint32_t>();

  // No count is trusted to size anything: each entry and record consumes bytes of the file,
  // so a corrupt count runs out of file (a "truncated" error) long before it costs memory.
  const auto metadata_count = in.get<uint64_t>();
  for (uint64_t index = 0; index < metadata_count; ++index) {
    in.set_place("in metadata entry " + std::to_string(index + 1) + " of " +
                 std::to_string(metadata_count));
    const auto key_size = in.get<uint32_t>();
    if (key_size == 0 || key_size > kMaxNameBytes)
      in.corrupt("a metadata key of " + std::to_string(key_size) + " bytes (allowed: 1 to " +
                 std::to_string(kMaxNameBytes) + ")");
    std::string key = in.get_string(key_size);
    std::string value = in.get_string(in.get<uint32_t>());
    if (!is_valid_utf8(key) || !is_valid_utf8(value)) in.corrupt("text that is not UTF-8");
    if (!file.metadata.emplace(key, std::move(value)).second)
      in.corrupt("metadata key '" + key + "' appears twice");
  }
  in.set_place("in the file header");
  tensor_count = in.get<uint64_t>();
  const uint32_t computed = in.crc();
  const auto stored = in.get<uint32_t>();
  if (computed != stored)
    in.corrupt("the header's CRC-32 is " + crc32_hex(computed) + " but the file records " +
               crc32_hex(stored));
  if (flags != 0)
    fail("'", path, "' uses format features this build does not know (flags ", crc32_hex(flags),
         "): read it with the resnet_ddp that wrote it, or a newer one");
}

TensorRecord read_record(Cursor& in, uint64_t index, uint64_t count, const std::string& previous) {
  const std::string ordinal = std::to_string(index + 1) + " of " + std::to_string(count);
  in.set_place("in the header of tensor " + ordinal +
               (previous.empty() ? std::string() : " (after '" + previous + "')"));
  in.reset_crc();
  TensorRecord record;
  const auto name_size = in.get<uint32_t>();
  if (name_size == 0 || name_size > kMaxNameBytes)
    in.corrupt("a tensor name of " + std::to_string(name_size) + " bytes (allowed: 1 to " +
               std::to_string(kMaxNameBytes) + ")");
  record.name = in.get_string(name_size);
  if (!is_valid_utf8(record.name)) in.corrupt("a tensor name that is not UTF-8");
  in.set_place("in the header of tensor '" + record.name + "' (" + ordinal + ")");

  const auto dtype_code = in.get<uint32_t>();
  if (!valid_dtype_code(dtype_code))
    in.corrupt("unknown dtype code " + std::to_string(dtype_code) +
               " (a file from a newer resnet_ddp?)");
  record.dtype = static_cast<DType>(dtype_code);
  const auto ndim = in.get<uint32_t>();
  if (ndim > kMaxDims)
    in.corrupt(std::to_string(ndim) + " dimensions (at most " + std::to_string(kMaxDims) + ")");
  record.shape.resize(ndim);
  uint64_t expected_bytes = dtype_size(record.dtype);
  bool overflow = false;
  for (auto& dim : record.shape) {
    dim = in.get<int64_t>();
    if (dim < 0) in.corrupt("a negative dimension " + std::to_string(dim));
    overflow |= __builtin_mul_overflow(expected_bytes, static_cast<uint64_t>(dim), &expected_bytes);
  }
  if (overflow) in.corrupt("shape " + shape_to_string(record.shape) + " is impossibly large");
  const auto byte_count = in.get<uint64_t>();
  if (byte_count != expected_bytes)
    in.corrupt("the byte count " + std::to_string(byte_count) + " disagrees with shape " +
               shape_to_string(record.shape) + " of " + to_string(record.dtype) + " (" +
               std::to_string(expected_bytes) + " bytes)");
  const uint32_t header_crc = in.crc();
  const auto stored_crc = in.get<uint32_t>();

  in.set_place("in the data of tensor '" + record.name + "' (" + ordinal + ")");
  if (byte_count > in.remaining()) in.truncated(byte_count);  // before allocating anything
  record.bytes.resize(byte_count);
  in.reset_crc();
  in.read(record.bytes.data(), byte_count);
  // The record's CRC runs over its header fields and then its data.
  const auto computed = static_cast<uint32_t>(
      crc32_combine(header_crc, in.crc(), static_cast<z_off_t>(byte_count)));
  if (computed != stored_crc)
    in.corrupt("its CRC-32 is " + crc32_hex(computed) + " but the file records " +
               crc32_hex(stored_crc) + ", so its name, shape or values were damaged");
  return record;
}

}  // namespace

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::u8: return "u8";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
  }
  return "unknown dtype";
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i64: return 8;
    case DType::i32: return 4;
    case DType::u8: return 1;
    case DType::bf16: return 2;
    case DType::f16: return 2;
  }
  fail("unknown dtype code ", static_cast<uint32_t>(dtype));
}

size_t shape_numel(const std::vector<int64_t>& shape) {
  size_t numel = 1;
  for (int64_t dim : shape) numel *= static_cast<size_t>(dim);
  return numel;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

const TensorRecord* TensorFile::find(const std::string& name) const {
  for (const TensorRecord& record : tensors)
    if (record.name == name) return &record;
  return nullptr;
}

std::string TensorFile::describe_source() const {
  return source.empty() ? std::string("tensor file") : "'" + source + "'";
}

void write_tensor_file(const std::string& path, const TensorFile& file) {
  check_writable(path, file);
  AtomicFileWriter out(path);

  HeaderBuilder header;
  header.put_raw(kMagic, sizeof(kMagic));
  header.put(kVersion);
  header.put(uint32_t{0});  // flags
  header.put(static_cast<uint64_t>(file.metadata.size()));
  for (const auto& [key, value] : file.metadata) {
    header.put_string(key);
    header.put_string(value);
  }
  header.put(static_cast<uint64_t>(file.tensors.size()));
  header.put(crc32_update(0, header.bytes().data(), header.bytes().size()));
  out.write(header.bytes().data(), header.bytes().size());

  for (const TensorRecord& record : file.tensors) {
    header.clear();
    header.put_string(record.name);
    header.put(static_cast<uint32_t>(record.dtype));
    header.put(static_cast<uint32_t>(record.shape.size()));
    for (int64_t dim : record.shape) header.put(dim);
    header.put(static_cast<uint64_t>(record.bytes.size()));
    uint32_t crc = crc32_update(0, header.bytes().data(), header.bytes().size());
    crc = crc32_update(crc, record.bytes.data(), record.bytes.size());
    header.put(crc);
    out.write(header.bytes().data(), header.bytes().size());
    out.write(record.bytes.data(), record.bytes.size());
  }
  out.write(kEndMarker, sizeof(kEndMarker));
  out.commit();
}

TensorFile read_tensor_file(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> stream(std::fopen(path.c_str(), "rb"));
  if (!stream) fail("cannot open '", path, "': ", std::strerror(errno));
  struct stat info;
  if (::fstat(fileno(stream.get()), &info) != 0)
    fail("cannot inspect '", path, "': ", std::strerror(errno));
  if (S_ISDIR(info.st_mode)) fail("'", path, "' is a directory, not a tensor file");
  if (!S_ISREG(info.st_mode))
    fail("'", path, "' is not a regular file; give the path of a .rddp file");
  if (info.st_size == 0) fail("'", path, "' is empty: it was never written completely");

  TensorFile file;
  file.source = path;
  Cursor in(stream.get(), path, static_cast<uint64_t>(info.st_size));
  uint64_t tensor_count = 0;
  read_header(in, path, file, tensor_count);

  std::map<std::string, uint64_t> positions;
  for (uint64_t index = 0; index < tensor_count; ++index) {
    const std::string previous = file.tensors.empty() ? "" : file.tensors.back().name;
    TensorRecord record = read_record(in, index, tensor_count, previous);
    in.set_place("in its list of tensors");
    const auto [earlier, inserted] = positions.emplace(record.name, index);
    if (!inserted)
      in.corrupt("tensors " + std::to_string(earlier->second + 1) + " and " +
                 std::to_string(index + 1) + " are both named '" + record.name + "'");
    file.tensors.push_back(std::move(record));
  }

  in.set_place("after its last tensor" +
               (file.tensors.empty() ? std::string() : " '" + file.tensors.back().name + "'") +
               ", where the end marker belongs");
  char marker[8];
  in.read(marker, sizeof(marker));
  if (std::memcmp(marker, kEndMarker, sizeof(marker)) != 0)
    in.corrupt("the end marker is missing; the header announces " + std::to_string(tensor_count) +
               " tensors, perhaps more follow");
  in.set_place("after the end marker");
  if (in.remaining() != 0)
    in.corrupt(std::to_string(in.remaining()) + " more bytes follow, where the file should end");
  return file;
}

}  // namespace rddp
