#include <doctest/doctest.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>

#include "resnet_ddp/error.h"
#include "resnet_ddp/rng.h"
#include "resnet_ddp/tensor_file.h"
#include "support/error_text.h"
#include "support/scratch_dir.h"

using namespace rddp;
namespace fs = std::filesystem;
using testing::error_of;

namespace {

fs::path scratch_dir(const std::string& name) {
  return testing::fresh_dir("tensor_file", name);
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void spit(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// An encoder written from docs/file_format.md alone, byte by byte, so that the library's
// writer is checked against the document rather than against itself. It can also write what
// the library's writer refuses to (duplicate names, absurd counts) to test the reader.
struct HandTensor {
  std::string name;
  uint32_t dtype_code;
  std::vector<int64_t> shape;
  std::string data;
  std::optional<uint64_t> byte_count = {};  // default: data.size()
};

void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

uint32_t zlib_crc(const std::string& bytes, uint32_t crc = 0) {
  return static_cast<uint32_t>(
      crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

std::string encode_by_hand(const std::vector<std::pair<std::string, std::string>>& metadata,
                           const std::vector<HandTensor>& tensors, uint32_t version = 1,
                           std::optional<uint64_t> metadata_count = {},
                           std::optional<uint64_t> tensor_count = {}) {
  std::string out = "RDDPTNSR";
  put_le(out, version, 4);
  put_le(out, 0, 4);
  put_le(out, metadata_count.value_or(metadata.size()), 8);
  for (const auto& [key, value] : metadata) {
    put_le(out, key.size(), 4);
    out += key;
    put_le(out, value.size(), 4);
    out += value;
  }
  put_le(out, tensor_count.value_or(tensors.size()), 8);
  put_le(out, zlib_crc(out), 4);
  for (const HandTensor& tensor : tensors) {
    std::string header;
    put_le(header, tensor.name.size(), 4);
    header += tensor.name;
    put_le(header, tensor.dtype_code, 4);
    put_le(header, tensor.shape.size(), 4);
    for (int64_t dim : tensor.shape) put_le(header, static_cast<uint64_t>(dim), 8);
    put_le(header, tensor.byte_count.value_or(tensor.data.size()), 8);
    out += header;
    put_le(out, zlib_crc(tensor.data, zlib_crc(header)), 4);
    out += tensor.data;
  }
  out += std::string("RDDPEND\0", 8);
  return out;
}

std::string le_bytes(uint64_t value, int bytes) {
  std::string out;
  put_le(out, value, bytes);
  return out;
}

// A file with every dtype, a scalar, an empty tensor and non-ASCII metadata, filled from rng.
TensorFile random_file(Rng& rng) {
  TensorFile file;
  file.metadata = {
      {"kind", "weights"}, {"note", "gr\xc3\xbc\xc3\x9f" "e \xe2\x9c\x93"}, {"empty", ""}};
  std::vector<float> f32(2 * 3 * 5);
  for (auto& v : f32) v = static_cast<float>(rng.normal());
  file.tensors.push_back(TensorRecord::from_values("conv.weight", {2, 3, 5}, f32.data()));
  std::vector<double> f64(3);
  for (auto& v : f64) v = rng.normal() * 1e300;
  file.tensors.push_back(TensorRecord::from_values("double.values", {3}, f64.data()));
  const int64_t scalar = static_cast<int64_t>(rng.next_u64());
  file.tensors.push_back(TensorRecord::from_values("bn.num_batches_tracked", {}, &scalar));
  std::vector<int32_t> i32(4);
  for (auto& v : i32) v = static_cast<int32_t>(rng.next_u64());
  file.tensors.push_back(TensorRecord::from_values("ints", {2, 2}, i32.data()));
  std::vector<uint8_t> u8(20);
  for (auto& v : u8) v = static_cast<uint8_t>(rng.below(256));
  file.tensors.push_back(TensorRecord::from_values("bytes", {20}, u8.data()));
  file.tensors.push_back(TensorRecord::from_values<float>("empty", {4, 0}, nullptr));
  for (DType half : {DType::bf16, DType::f16}) {
    TensorRecord record{std::string("half.") + to_string(half), half, {3}, {}};
    for (int i = 0; i < 6; ++i) record.bytes.push_back(static_cast<uint8_t>(rng.below(256)));
    file.tensors.push_back(record);
  }
  return file;
}

void check_same(const TensorFile& a, const TensorFile& b) {
  CHECK(a.metadata == b.metadata);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    CAPTURE(a.tensors[i].name);
    CHECK(a.tensors[i].name == b.tensors[i].name);
    CHECK(a.tensors[i].dtype == b.tensors[i].dtype);
    CHECK(a.tensors[i].shape == b.tensors[i].shape);
    CHECK(a.tensors[i].bytes == b.tensors[i].bytes);
  }
}

// Restores the file size limit and SIGXFSZ's handler however the test ends.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);  // fail the write, do not kill us
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_handler_);
  }

 private:
  rlimit saved_{};
  void (*previous_handler_)(int) = nullptr;
};

// Caps this process's address space a little above what it uses now, so that a reader that
// trusted a corrupt length would fail with std::bad_alloc instead of quietly allocating GiBs.
class AddressSpaceLimit {
 public:
  explicit AddressSpaceLimit(size_t headroom_bytes) {
    getrlimit(RLIMIT_AS, &saved_);
    std::ifstream statm("/proc/self/statm");
    size_t pages = 0;
    statm >> pages;
    rlimit limit = saved_;
    limit.rlim_cur = pages * static_cast<size_t>(sysconf(_SC_PAGESIZE)) + headroom_bytes;
    if (saved_.rlim_max != RLIM_INFINITY && limit.rlim_cur > saved_.rlim_max)
      limit.rlim_cur = saved_.rlim_max;
    setrlimit(RLIMIT_AS, &limit);
  }
  ~AddressSpaceLimit() { setrlimit(RLIMIT_AS, &saved_); }

 private:
  rlimit saved_{};
};

bool has_temporary_files(const fs::path& dir) {
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("every dtype, shape and the metadata survive a round trip") {
  const fs::path dir = scratch_dir("round_trip");
  Rng rng(20240601);
  const TensorFile written = random_file(rng);
  write_tensor_file((dir / "a.rddp").string(), written);
  const TensorFile read = read_tensor_file((dir / "a.rddp").string());
  check_same(written, read);
  CHECK(read.source == (dir / "a.rddp").string());
  REQUIRE(read.find("bn.num_batches_tracked") != nullptr);
  CHECK(read.find("bn.num_batches_tracked")->shape.empty());
  CHECK(read.find("nothing") == nullptr);
  CHECK(read.find("conv.weight")->values<float>().size() == 30);
  CHECK_THROWS_WITH_AS(read.find("conv.weight")->values<double>(),
                       doctest::Contains("'conv.weight' holds f32"), Error);
  CHECK_FALSE(has_temporary_files(dir));

  // Writing again replaces the file.
  TensorFile smaller;
  smaller.tensors.push_back(written.tensors[2]);
  write_tensor_file((dir / "a.rddp").string(), smaller);
  check_same(smaller, read_tensor_file((dir / "a.rddp").string()));
}

TEST_CASE("the writer lays bytes out as docs/file_format.md says") {
  const fs::path dir = scratch_dir("layout");
  TensorFile file;
  file.metadata = {{"a", "1"}, {"kind", "weights"}};  // std::map writes them sorted
  const std::vector<float> weights = {1.5f, -2.0f, 0.25f, 8.0f, 0.0f, -0.0f};
  const int64_t counter = 42;
  file.tensors.push_back(TensorRecord::from_values("w", {2, 3}, weights.data()));
  file.tensors.push_back(TensorRecord::from_values("n", {}, &counter));
  write_tensor_file((dir / "f.rddp").string(), file);

  std::string float_bytes;
  for (float v : weights) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    float_bytes += le_bytes(bits, 4);
  }
  const std::string expected =
      encode_by_hand({{"a", "1"}, {"kind", "weights"}},
                     {{"w", 1, {2, 3}, float_bytes}, {"n", 3, {}, le_bytes(42, 8)}});
  CHECK(slurp(dir / "f.rddp") == expected);
}

// Other readers check themselves against this file: tests/parity/test_converters.py runs this
// test case with RDDP_SAMPLE_OUT set to a directory and compares what the Python reader finds
// with the contents documented here. Without the variable it goes to the scratch directory.
// Either way it is read back here.
//   metadata: kind=sample, text="UTF-8 ✓ ünïcödé", empty=""
//   f32.arange  f32 [2, 3, 4]  element i = i * 0.5 - 3
//   f64.arange  f64 [5]        element i = i * 0.125 - 0.25
//   i64.scalar  i64 []         -(2^40) - 7
//   i32.arange  i32 [3, 1]     element i = i * 100000 - 100000
//   u8.arange   u8  [256]      element i = i
//   f32.empty   f32 [0, 3]     no elements
//   f16.values  f16 [3]        1.0, -2.0, 0.5   (bits 0x3c00, 0xc000, 0x3800)
//   bf16.values bf16 [3]       1.0, -3.0, 0.25  (bits 0x3f80, 0xc040, 0x3e80)
TEST_CASE("tensor_file writes a sample file for other readers") {
  const char* out_dir = std::getenv("RDDP_SAMPLE_OUT");
  const fs::path dir = out_dir ? fs::path(out_dir) : scratch_dir("sample");
  const std::string path = (dir / "sample_tensors.rddp").string();

  TensorFile sample;
  sample.metadata = {{"kind", "sample"},
                     {"text", "UTF-8 \xe2\x9c\x93 \xc3\xbcn\xc3\xaf" "c\xc3\xb6" "d\xc3\xa9"},
                     {"empty", ""}};
  std::vector<float> f32(24);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = static_cast<float>(i) * 0.5f - 3.0f;
  std::vector<double> f64(5);
  for (size_t i = 0; i < f64.size(); ++i) f64[i] = static_cast<double>(i) * 0.125 - 0.25;
  const int64_t i64 = -(int64_t{1} << 40) - 7;
  std::vector<int32_t> i32(3);
  for (size_t i = 0; i < i32.size(); ++i) i32[i] = static_cast<int32_t>(i) * 100000 - 100000;
  std::vector<uint8_t> u8(256);
  for (size_t i = 0; i < u8.size(); ++i) u8[i] = static_cast<uint8_t>(i);
  sample.tensors.push_back(TensorRecord::from_values("f32.arange", {2, 3, 4}, f32.data()));
  sample.tensors.push_back(TensorRecord::from_values("f64.arange", {5}, f64.data()));
  sample.tensors.push_back(TensorRecord::from_values("i64.scalar", {}, &i64));
  sample.tensors.push_back(TensorRecord::from_values("i32.arange", {3, 1}, i32.data()));
  sample.tensors.push_back(TensorRecord::from_values("u8.arange", {256}, u8.data()));
  sample.tensors.push_back(TensorRecord::from_values<float>("f32.empty", {0, 3}, nullptr));
  sample.tensors.push_back({"f16.values", DType::f16, {3}, {0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38}});
  sample.tensors.push_back({"bf16.values", DType::bf16, {3}, {0x80, 0x3f, 0x40, 0xc0, 0x80, 0x3e}});
  write_tensor_file(path, sample);
  check_same(sample, read_tensor_file(path));
}

TEST_CASE("a file cut short at any byte is refused, saying where") {
  const fs::path dir = scratch_dir("truncated");
  Rng rng(5);
  const TensorFile file = random_file(rng);
  write_tensor_file((dir / "whole.rddp").string(), file);
  const std::string whole = slurp(dir / "whole.rddp");
  const std::string cut = (dir / "cut.rddp").string();
  for (size_t size = 0; size < whole.size(); ++size) {
    CAPTURE(size);
    spit(cut, whole.substr(0, size));
    CHECK_THROWS_AS(read_tensor_file(cut), Error);
  }

  // The last tensor's data, 3 bytes short: the message names it and the missing bytes.
  const TensorRecord& last = file.tensors.back();
  REQUIRE(last.bytes.size() > 3);
  spit(cut, whole.substr(0, whole.size() - 8 - 3));
  const std::string message = error_of([&] { read_tensor_file(cut); });
  CHECK(message.find(cut) != std::string::npos);
  CHECK(message.find("truncated in the data of tensor '" + last.name + "'") != std::string::npos);
  CHECK(message.find("(3 missing)") != std::string::npos);

  // Cut right after the last tensor: only the end marker can tell.
  spit(cut, whole.substr(0, whole.size() - 8));
  CHECK_THROWS_WITH_AS(read_tensor_file(cut), doctest::Contains("end marker"), Error);

  spit(cut, "");
  CHECK_THROWS_WITH_AS(read_tensor_file(cut), doctest::Contains("is empty"), Error);
}

TEST_CASE("every corrupted byte is caught by a CRC or a check") {
  const fs::path dir = scratch_dir("corrupt");
  Rng rng(6);
  write_tensor_file((dir / "whole.rddp").string(), random_file(rng));
  const std::string whole = slurp(dir / "whole.rddp");
  const std::string damaged = (dir / "damaged.rddp").string();
  for (size_t offset = 0; offset < whole.size(); ++offset) {
    CAPTURE(offset);
    std::string bytes = whole;
    bytes[offset] = static_cast<char>(bytes[offset] ^ (1 << (offset % 8)));
    spit(damaged, bytes);
    CHECK_THROWS_AS(read_tensor_file(damaged), Error);
  }
  spit(damaged, whole + "x");
  CHECK_THROWS_WITH_AS(read_tensor_file(damaged), doctest::Contains("corrupt after the end marker"),
                       Error);
}

TEST_CASE("a flipped data byte names its tensor") {
  const fs::path dir = scratch_dir("crc");
  TensorFile file;
  std::vector<float> a(100, 1.0f), b(100, 2.0f);
  file.tensors.push_back(TensorRecord::from_values("first", {100}, a.data()));
  file.tensors.push_back(TensorRecord::from_values("second", {10, 10}, b.data()));
  const std::string path = (dir / "f.rddp").string();
  write_tensor_file(path, file);
  std::string bytes = slurp(path);
  bytes[bytes.size() - 8 - 200] ^= 0x01;  // inside the data of "second"
  spit(path, bytes);
  const std::string message = error_of([&] { read_tensor_file(path); });
  CHECK(message.find(path) != std::string::npos);
  CHECK(message.find("tensor 'second'") != std::string::npos);
  CHECK(message.find("CRC-32") != std::string::npos);
}

TEST_CASE("files of other kinds are recognised and explained") {
  const fs::path dir = scratch_dir("foreign");
  const std::string path = (dir / "model.pth").string();
  spit(path, std::string("PK\x03\x04\x14\x00\x00\x00archive/data.pkl", 24));
  const std::string zip = error_of([&] { read_tensor_file(path); });
  CHECK(zip.find(path) != std::string::npos);
  CHECK(zip.find("torchvision_to_resnet_ddp.py") != std::string::npos);

  spit(path, "\x80\x02\x8a\x0alegacy pickle");
  CHECK_THROWS_WITH_AS(read_tensor_file(path), doctest::Contains("pickle"), Error);
  spit(path, "version https://git-lfs.github.com/spec/v1\noid sha256:0\n");
  CHECK_THROWS_WITH_AS(read_tensor_file(path), doctest::Contains("git lfs pull"), Error);
  spit(path, "hello");
  CHECK_THROWS_WITH_AS(read_tensor_file(path), doctest::Contains("RDDPTNSR"), Error);

  const std::string missing = (dir / "missing.rddp").string();
  const std::string absent = error_of([&] { read_tensor_file(missing); });
  CHECK(absent.find(missing) != std::string::npos);
  CHECK(absent.find(std::strerror(ENOENT)) != std::string::npos);
  CHECK_THROWS_WITH_AS(read_tensor_file(dir.string()), doctest::Contains("is a directory"), Error);
}

TEST_CASE("a newer format version is refused as such") {
  const fs::path dir = scratch_dir("version");
  const std::string path = (dir / "future.rddp").string();
  spit(path, encode_by_hand({}, {{"x", 1, {1}, le_bytes(0, 4)}}, 2));
  const std::string message = error_of([&] { read_tensor_file(path); });
  CHECK(message.find(path) != std::string::npos);
  CHECK(message.find("version 2") != std::string::npos);
  CHECK(message.find("newer") != std::string::npos);
  // Version 1 of the same content reads, so the version was the only problem.
  spit(path, encode_by_hand({}, {{"x", 1, {1}, le_bytes(0, 4)}}, 1));
  CHECK(read_tensor_file(path).tensors.size() == 1);
}

TEST_CASE("duplicate names are refused by the reader and the writer") {
  const fs::path dir = scratch_dir("duplicates");
  const std::string path = (dir / "twice.rddp").string();
  spit(path, encode_by_hand({}, {{"fc.bias", 1, {1}, le_bytes(0, 4)},
                                 {"fc.weight", 1, {}, le_bytes(0, 4)},
                                 {"fc.bias", 1, {1}, le_bytes(0, 4)}}));
  CHECK_THROWS_WITH_AS(read_tensor_file(path),
                       doctest::Contains("tensors 1 and 3 are both named 'fc.bias'"), Error);
  spit(path, encode_by_hand({{"kind", "a"}, {"kind", "b"}}, {}));
  CHECK_THROWS_WITH_AS(read_tensor_file(path), doctest::Contains("'kind' appears twice"), Error);

  TensorFile file;
  const float value = 1.0f;
  file.tensors.push_back(TensorRecord::from_values("x", {}, &value));
  file.tensors.push_back(TensorRecord::from_values("x", {1}, &value));
  const std::string target = (dir / "new.rddp").string();
  CHECK_THROWS_WITH_AS(write_tensor_file(target, file),
                       doctest::Contains("two tensors are named 'x'"), Error);
  CHECK_FALSE(fs::exists(target));
}

TEST_CASE("the writer refuses records the reader would reject") {
  const fs::path dir = scratch_dir("refused");
  const std::string target = (dir / "bad.rddp").string();
  const float value = 1.0f;
  const float pair[2] = {1.0f, 2.0f};
  TensorFile file;
  file.tensors.push_back(TensorRecord::from_values("x", {2}, pair));  // then shrink it
  file.tensors.back().bytes.resize(4);
  CHECK_THROWS_WITH_AS(write_tensor_file(target, file), doctest::Contains("needs 8 bytes"), Error);
  file.tensors.back() = TensorRecord::from_values("", {}, &value);
  CHECK_THROWS_WITH_AS(write_tensor_file(target, file), doctest::Contains("tensor names"), Error);
  file.tensors.clear();
  file.metadata["note"] = "\xff";
  CHECK_THROWS_WITH_AS(write_tensor_file(target, file), doctest::Contains("UTF-8"), Error);
  CHECK_FALSE(fs::exists(target));

  // Text must be UTF-8 as Python's strict decoder takes it (bytes.decode("utf-8")), so that
  // scripts/rddp_tensors.py reads every file the C++ writer makes.
  const std::vector<std::pair<std::string, bool>> texts = {
      {"\xc3\xa9", true},           {"\xe0\xa0\x80", true},      {"\xef\xbf\xbf", true},
      {"\xf4\x8f\xbf\xbf", true}, {"\xc0\x80", false},         {"\xe0\x9f\xbf", false},
      {"\xed\xa0\x80", false},    {"\xf4\x90\x80\x80", false}, {"\xc3", false},
      {"a\xbf", false}};
  for (const auto& [text, valid] : texts) {
    CAPTURE(text);
    TensorFile named;
    named.tensors.push_back(TensorRecord::from_values(text, {}, &value));
    if (valid) {
      write_tensor_file(target, named);
      CHECK(read_tensor_file(target).tensors.at(0).name == text);
    } else {
      CHECK_THROWS_WITH_AS(write_tensor_file(target, named), doctest::Contains("UTF-8"), Error);
    }
  }
}

TEST_CASE("absurd counts and sizes are refused without allocating them") {
  const fs::path dir = scratch_dir("absurd");
  const std::string path = (dir / "absurd.rddp").string();
  auto refused = [&](const std::string& bytes, const std::string& expected) {
    spit(path, bytes);
    std::string message;
    {
      AddressSpaceLimit limit(size_t{256} << 20);
      message = error_of([&] { read_tensor_file(path); });
    }
    CHECK_MESSAGE(message.find(expected) != std::string::npos, message);
  };
  const HandTensor small{"x", 1, {1}, le_bytes(0, 4)};
  refused(encode_by_hand({}, {small}, 1, {}, uint64_t{1} << 62), "of 4611686018427387904");
  refused(encode_by_hand({}, {small}, 1, uint64_t{1} << 62),
          "metadata entry 1 of 4611686018427387904");
  // 2^40 floats would be 4 TiB: consistent with its byte count, but far beyond the file.
  refused(encode_by_hand({}, {{"huge", 1, {int64_t{1} << 40}, "", uint64_t{1} << 42}}),
          "4398046511104 more bytes are needed");
  refused(encode_by_hand({}, {{"overflow", 1, {int64_t{1} << 62, int64_t{1} << 62}, ""}}),
          "impossibly large");
  refused(encode_by_hand({}, {{"negative", 1, {-1}, ""}}), "negative dimension");
  refused(encode_by_hand({}, {{"x", 99, {1}, le_bytes(0, 4)}}), "unknown dtype code 99");
  refused(encode_by_hand({}, {{"x", 1, std::vector<int64_t>(40, 1), le_bytes(0, 4)}}),
          "40 dimensions");
  refused(encode_by_hand({}, {{"x", 1, {2}, le_bytes(0, 4)}}), "disagrees with shape [2]");
  // A name length of 4 GiB: the reader stops at the limit instead of reading it.
  std::string long_name = encode_by_hand({}, {small});
  const size_t name_length_at = 8 + 4 + 4 + 8 + 8 + 4;
  long_name.replace(name_length_at, 4, le_bytes(0xFFFFFFFFu, 4));
  refused(long_name, "a tensor name of 4294967295 bytes");
  // A metadata value of almost 4 GiB in a file of a few dozen bytes.
  std::string long_value = encode_by_hand({{"k", "v"}}, {});
  const size_t value_length_at = 8 + 4 + 4 + 8 + 4 + 1;
  long_value.replace(value_length_at, 4, le_bytes(0xFFFFFFF0u, 4));
  refused(long_value, "4294967280 more bytes are needed");
}

TEST_CASE("a failed write says why and leaves the previous file intact") {
  const fs::path dir = scratch_dir("write_failures");
  Rng rng(7);
  const TensorFile file = random_file(rng);

  // Tests may run as root, for whom a read-only directory is writable; a path below a regular
  // file or in a missing directory fails for everyone.
  spit(dir / "regular_file", "not a directory");
  const std::string below_file = (dir / "regular_file" / "w.rddp").string();
  const std::string not_dir = error_of([&] { write_tensor_file(below_file, file); });
  CHECK(not_dir.find(below_file) != std::string::npos);
  CHECK(not_dir.find(std::strerror(ENOTDIR)) != std::string::npos);
  CHECK(slurp(dir / "regular_file") == "not a directory");

  const std::string in_missing = (dir / "missing" / "w.rddp").string();
  const std::string no_dir = error_of([&] { write_tensor_file(in_missing, file); });
  CHECK(no_dir.find(in_missing) != std::string::npos);
  CHECK(no_dir.find("does not exist") != std::string::npos);

  // A full disk, simulated by a file size limit: the temporary fails part-way through.
  const std::string target = (dir / "w.rddp").string();
  TensorFile previous;
  const int64_t marker = 12345;
  previous.tensors.push_back(TensorRecord::from_values("previous", {}, &marker));
  write_tensor_file(target, previous);
  const std::string previous_bytes = slurp(target);
  TensorFile large = file;
  std::vector<float> big(1 << 16, 3.0f);
  large.tensors.push_back(TensorRecord::from_values("big", {1 << 16}, big.data()));
  std::string full;
  {
    FileSizeLimit limit(4096);
    full = error_of([&] { write_tensor_file(target, large); });
  }
  CHECK(full.find(target) != std::string::npos);
  CHECK(full.find(std::strerror(EFBIG)) != std::string::npos);
  CHECK(full.find("unchanged") != std::string::npos);
  CHECK(slurp(target) == previous_bytes);
  CHECK_FALSE(has_temporary_files(dir));

  // A directory in the way is refused before anything is written.
  fs::create_directory(dir / "a_directory");
  CHECK_THROWS_WITH_AS(write_tensor_file((dir / "a_directory").string(), file),
                       doctest::Contains("it is a directory"), Error);
  CHECK(fs::is_directory(dir / "a_directory"));
  CHECK_FALSE(has_temporary_files(dir));
}
