#pragma once
// The file format of weights and checkpoints: text metadata plus named, typed tensors, each
// protected by a CRC-32. docs/file_format.md describes every byte; scripts/rddp_tensors.py
// reads and writes the same files from Python.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "resnet_ddp/error.h"

namespace rddp {

// Codes as stored in the file. bf16 and f16 are carried as raw 2-byte values: nothing in
// resnet_ddp computes with them yet, but a file holding them is still a valid file.
enum class DType : uint32_t { f32 = 1, f64 = 2, i64 = 3, i32 = 4, u8 = 5, bf16 = 6, f16 = 7 };

const char* to_string(DType dtype);
size_t dtype_size(DType dtype);

// The C++ type each computable dtype is read into; bf16 and f16 have none.
template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::u8; };

// Product of the dimensions; 1 for a scalar (no dimensions).
size_t shape_numel(const std::vector<int64_t>& shape);
std::string shape_to_string(const std::vector<int64_t>& shape);  // "[64, 3, 7, 7]"

struct TensorRecord {
  std::string name;              // e.g. "layer1.0.bn2.running_var"
  DType dtype = DType::f32;
  std::vector<int64_t> shape;    // empty for a scalar
  std::vector<uint8_t> bytes;    // the elements in row-major order, little-endian

  size_t numel() const { return shape_numel(shape); }

  template <typename T>
  static TensorRecord from_values(std::string name, std::vector<int64_t> shape, const T* values) {
    TensorRecord record{std::move(name), dtype_of<T>::value, std::move(shape), {}};
    record.bytes.resize(record.numel() * sizeof(T));
    if (!record.bytes.empty()) std::memcpy(record.bytes.data(), values, record.bytes.size());
    return record;
  }

  // The elements as T; throws Error naming the tensor when it holds another dtype.
  template <typename T>
  std::vector<T> values() const {
    if (dtype != dtype_of<T>::value)
      fail("tensor '", name, "' holds ", to_string(dtype), ", not ", to_string(dtype_of<T>::value));
    std::vector<T> out(bytes.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
};

struct TensorFile {
  std::map<std::string, std::string> metadata;  // UTF-8 key -> UTF-8 value
  std::vector<TensorRecord> tensors;            // in file order; names are unique
  std::string source;  // the path it was read from, for messages; empty if built in memory

  const TensorRecord* find(const std::string& name) const;
  // Where messages should say the tensors come from: the path, or "tensor file".
  std::string describe_source() const;
};

// Writes crash-safely (AtomicFileWriter): into a temporary in the same directory, flushed to
// disk, then renamed over `path`, and the directory synced. On failure throws Error naming the path
// and the system's reason, removes the temporary, and leaves any existing file at `path` as it was.
// Throws Error before touching the disk if `file` could not be read back (duplicate or empty
// names, a byte count that disagrees with the shape...).
void write_tensor_file(const std::string& path, const TensorFile& file);

// Reads and checks a whole file: magic, version, every CRC, every size against the file size
// (so a corrupt count never makes us allocate more than the file holds), unique names, the end
// marker. Any problem throws Error naming the file and what is wrong with it; a format version
// newer than this build reads throws TensorFileTooNew, since such a file may well be whole.
TensorFile read_tensor_file(const std::string& path);

class TensorFileTooNew : public Error {
 public:
  using Error::Error;
};

}  // namespace rddp
