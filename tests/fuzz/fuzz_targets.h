#pragma once
// One entry point per parser of user files, shared by the libFuzzer harnesses
// (tests/fuzz/fuzz_*.cpp) and by tests/unit/test_fuzz_regressions.cpp, which replays the seed
// corpora and every input that once broke a harness. Each target puts the input where the
// program would find a user's file and reads it through the functions the program calls.
//
// The contract under test: bad input ends in rddp::Error. Anything else escaping (another
// exception, a crash, a sanitizer report, a hang, a huge allocation) is a bug, and so is an
// input that is accepted but breaks a promise the rest of the program relies on (a label out
// of range, an image of no pixels...): that throws BrokenPromise.
//
// run() returns how many of the target's ways of reading the input accepted it, so that the
// test can tell that the seeds, which are real files, are read as such.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <unordered_set>
#include <vector>

#include "resnet_ddp/data/dataset.h"
#include "resnet_ddp/data/image_decode.h"
#include "resnet_ddp/data/pack.h"
#include "resnet_ddp/data/python2_pickle.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/data/transform.h"
#include "resnet_ddp/engine.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/model_state.h"
#include "resnet_ddp/optimizer.h"
#include "resnet_ddp/tensor_file.h"
#include "resnet_ddp/train/checkpoint.h"
#include "resnet_ddp/train/options.h"
#include "resnet_ddp/weights.h"

namespace rddp::fuzz {

namespace fs = std::filesystem;

class BrokenPromise : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

inline void promise(bool holds, const std::string& what) {
  if (!holds) throw BrokenPromise("an accepted input breaks a promise: " + what);
}

// Runs each way of reading one input and counts those that accept it. rddp::Error is a
// refusal; anything else propagates.
template <typename... Reads>
int count_accepted(Reads&&... reads) {
  int accepted = 0;
  auto attempt = [&accepted](auto& read) {
    try {
      read();
      ++accepted;
    } catch (const Error&) {
    }
  };
  (attempt(reads), ...);
  return accepted;
}

// A private directory for one target's files, removed with it.
class ScratchDir {
 public:
  ScratchDir(const std::string& base, const std::string& name) {
    std::string pattern = (fs::path(base) / ("rddp-fuzz-" + name + "-XXXXXX")).string();
    if (!mkdtemp(pattern.data()))
      throw std::runtime_error("cannot create a scratch directory under " + base);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Where the harnesses keep their files: $RDDP_FUZZ_SCRATCH, else /dev/shm (the inputs are
// rewritten at every execution, and memory is much faster than a disk for that), else the
// system's temporary directory.
inline std::string default_scratch_base() {
  if (const char* chosen = std::getenv("RDDP_FUZZ_SCRATCH"); chosen && *chosen) return chosen;
  if (::access("/dev/shm", W_OK) == 0) return "/dev/shm";
  return fs::temp_directory_path().string();
}

inline void write_file(const fs::path& path, const void* data, size_t size) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) throw std::runtime_error("cannot create " + path.string());
  const bool written = size == 0 || std::fwrite(data, 1, size, file) == size;
  if (std::fclose(file) != 0 || !written) throw std::runtime_error("cannot write " + path.string());
}

// Targets that read several files take them from one input, separated by this line.
inline constexpr const char kFileSeparator[] = "\n--- next file ---\n";

// The input's first `count` parts between separators (the last one keeps any further
// separators); missing parts are empty.
inline std::vector<std::string> split_files(const uint8_t* data, size_t size, size_t count) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::string separator = kFileSeparator;
  std::vector<std::string> parts;
  size_t start = 0;
  while (parts.size() + 1 < count) {
    const size_t found = input.find(separator, start);
    if (found == std::string::npos) break;
    parts.push_back(input.substr(start, found - start));
    start = found + separator.size();
  }
  parts.push_back(input.substr(start));
  parts.resize(count);
  return parts;
}

// What the loaders and transforms rely on in a split a reader returns. `decode` fetches every
// sample, which the array formats hold in memory; image files are decoded only on demand.
inline void check_split(const data::DatasetPtr& split, bool decode) {
  promise(split != nullptr, "a reader returned no data set");
  const data::Dataset& set = *split;
  // Messages are built only for a broken promise: this runs for every sample of every input.
  auto check = [&set](bool holds, const char* what) {
    if (!holds) promise(false, set.description() + ": " + what);
  };
  check(set.size() > 0, "no samples");
  check(set.num_classes() >= 1, "no classes");
  check(set.channels() == 1 || set.channels() == 3, "a channel count other than 1 or 3");
  check(set.height() >= 0 && set.width() >= 0 && (set.height() == 0) == (set.width() == 0),
        "an impossible image size");
  for (size_t index = 0; decode && index < set.size(); ++index) {
    const data::Sample sample = set.get(index);
    const data::Image& image = sample.image;
    auto check_sample = [&set, index](bool holds, const char* what) {
      if (!holds) promise(false, set.source(index) + ": " + what);
    };
    check_sample(sample.label >= 0 && sample.label < set.num_classes(),
                 "a label out of the class range");
    check_sample(image.height > 0 && image.width > 0, "no pixels");
    check_sample(image.channels == set.channels(), "another channel count than its data set");
    check_sample(image.pixels.size() == size_t(image.height) * image.width * image.channels,
                 "a wrong number of bytes");
    check_sample(set.height() == 0 || (image.height == set.height() && image.width == set.width()),
                 "another size than its data set");
  }
}

inline void check_splits(const data::Splits& splits, bool decode) {
  check_split(splits.train, decode);
  if (splits.val) {
    check_split(splits.val, decode);
    promise(splits.val->num_classes() == splits.train->num_classes(),
            "the validation split has another class count");
  }
}

// CIFAR-10 and CIFAR-100 binary: the input is every data file of both layouts.
class CifarTarget {
 public:
  static constexpr const char* kName = "cifar";

  explicit CifarTarget(const std::string& base)
      : scratch_(base, kName),
        records_(scratch_.path() / "records.bin"),
        cifar10_(scratch_.path() / "cifar10"),
        cifar100_(scratch_.path() / "cifar100") {
    write_file(records_, "", 0);
    fs::create_directory(cifar10_);
    fs::create_directory(cifar100_);
    // Links rather than copies: each input is written once per execution.
    for (const char* name : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                             "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"})
      fs::create_symlink(records_, cifar10_ / name);
    for (const char* name : {"train.bin", "test.bin"}) fs::create_symlink(records_, cifar100_ / name);
  }

  int run(const uint8_t* data, size_t size) const {
    write_file(records_, data, size);
    return count_accepted([&] { check_splits(data::open_cifar10(cifar10_), true); },
                          [&] { check_splits(data::open_cifar100(cifar100_), true); });
  }

 private:
  ScratchDir scratch_;
  fs::path records_, cifar10_, cifar100_;
};

// A value the pickle reader accepted: what the CIFAR reader relies on in it. Values may share
// branches (the memo), each visited once.
inline void check_pickle_value(const data::py2pickle::Value& value,
                               std::unordered_set<const data::py2pickle::Value*>& seen) {
  using data::py2pickle::Type;
  if (!seen.insert(&value).second) return;
  promise(value.depth <= 16, "values nested deeper than the reader allows");
  if (value.type == Type::array) {
    promise(value.built && value.dtype == "u1", "an array not built, or not of uint8");
    uint64_t product = 1;
    for (int64_t extent : value.shape) {
      promise(extent >= 0, "an array of negative extent");
      product *= uint64_t(extent);
    }
    promise(product == value.bytes.size(), "an array whose shape is not its size");
  }
  if (value.type == Type::dict)
    for (size_t k = 0; k < value.items.size(); k += 2)
      promise(value.items[k]->type == Type::string, "a dict key that is not a str");
  for (const data::py2pickle::ValuePtr& item : value.items) check_pickle_value(*item, seen);
}

// CIFAR's Python version as torchvision downloads it: Python 2 pickles, in a folder or in the
// .tar.gz. The input is read as batches.meta (meta) and one batch, between kFileSeparator
// lines, in a cifar-10-batches-py/ folder whose six batches are all that batch and in a
// cifar-100-python/ folder as train and test; whole, as cifar-10-python.tar.gz and
// cifar-100-python.tar.gz (gzip-compressed or plain tar); and whole, as one pickle.
class CifarPickleTarget {
 public:
  static constexpr const char* kName = "cifar_pickle";

  explicit CifarPickleTarget(const std::string& base)
      : scratch_(base, kName),
        cifar10_(scratch_.path() / "cifar-10-batches-py"),
        cifar100_(scratch_.path() / "cifar-100-python"),
        archive10_(scratch_.path() / "cifar-10-python.tar.gz"),
        archive100_(scratch_.path() / "cifar-100-python.tar.gz") {
    fs::create_directory(cifar10_);
    fs::create_directory(cifar100_);
    write_file(cifar10_ / "batches.meta", "", 0);
    write_file(cifar10_ / "data_batch_1", "", 0);
    write_file(archive10_, "", 0);
    // Links rather than copies: each input is written once per execution.
    for (const char* name : {"data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5",
                             "test_batch"})
      fs::create_symlink(cifar10_ / "data_batch_1", cifar10_ / name);
    fs::create_symlink(cifar10_ / "batches.meta", cifar100_ / "meta");
    for (const char* name : {"train", "test"})
      fs::create_symlink(cifar10_ / "data_batch_1", cifar100_ / name);
    fs::create_symlink(archive10_, archive100_);
  }

  int run(const uint8_t* data, size_t size) const {
    const std::vector<std::string> files = split_files(data, size, 2);
    write_file(cifar10_ / "batches.meta", files[0].data(), files[0].size());
    write_file(cifar10_ / "data_batch_1", files[1].data(), files[1].size());
    write_file(archive10_, data, size);
    return count_accepted(
        [&] { check_splits(data::open_cifar10(cifar10_), true); },
        [&] { check_splits(data::open_cifar100(cifar100_), true); },
        [&] { check_splits(data::open_cifar10(archive10_), true); },
        [&] { check_splits(data::open_cifar100(archive100_), true); },
        [&] {
          std::unordered_set<const data::py2pickle::Value*> seen;
          check_pickle_value(*data::py2pickle::read_python2_pickle(data, size, "input"), seen);
        });
  }

 private:
  ScratchDir scratch_;
  fs::path cifar10_, cifar100_, archive10_, archive100_;
};

// MNIST-style idx: the input is the four files (training images and labels, test images and
// labels) in that order, between kFileSeparator lines; each may be plain or gzip.
class IdxTarget {
 public:
  static constexpr const char* kName = "idx";

  explicit IdxTarget(const std::string& base) : scratch_(base, kName) {}

  int run(const uint8_t* data, size_t size) const {
    static const char* const kNames[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    const std::vector<std::string> files = split_files(data, size, 4);
    for (size_t i = 0; i < files.size(); ++i)
      write_file(scratch_.path() / kNames[i], files[i].data(), files[i].size());
    return count_accepted([&] { check_splits(data::open_idx(scratch_.path()), true); });
  }

 private:
  ScratchDir scratch_;
};

// One image file (JPEG through libjpeg-turbo; PNG, BMP, PGM, PPM through our readers of
// Pillow's rules), decoded as RGB and as greyscale, as image folders are read, and a region of
// it as RandomResizedCrop decodes it: accepted exactly when the whole image is, with its bytes.
class ImageTarget {
 public:
  static constexpr const char* kName = "image";
  // Larger images are read, but take seconds under the sanitizers; decoding them differs
  // from decoding a small one only in how often the loops turn.
  static constexpr int64_t kMaxDecodedPixels = int64_t(1) << 22;

  explicit ImageTarget(const std::string&) {}

  int run(const uint8_t* data, size_t size) const {
    auto decode = [&](int channels) {
      const data::ImageHeader header = data::read_image_header(data, size, "the input");
      promise(header.width > 0 && header.height > 0 &&
                  int64_t(header.width) * header.height <= data::kMaxImagePixels,
              "an image header of no pixels or too many");
      if (int64_t(header.width) * header.height > kMaxDecodedPixels) return;
      const data::CropBox box{header.height / 4, header.width / 3, std::max(1, header.height / 2),
                              std::max(1, header.width / 2)};
      std::optional<data::Image> region;
      try {
        region = data::decode_image_crop(data, size, channels,
                                         [&](int, int) { return box; }, "the input");
      } catch (const Error&) {
      }
      data::Image image;
      try {
        image = data::decode_image(data, size, channels, "the input");
      } catch (const Error&) {
        if (region) throw BrokenPromise("a region decodes where the whole image is refused");
        throw;
      }
      promise(region.has_value(), "a region is refused where the whole image decodes");
      promise(region->pixels == data::crop(image, box).pixels,
              "a region decodes to other bytes than the whole image cropped");
      promise(image.height == header.height && image.width == header.width,
              "an image decodes to another size than its header says");
      promise(image.channels == channels, "a decoded image has another channel count");
      promise(image.pixels.size() == size_t(image.height) * image.width * channels,
              "a decoded image holds a wrong number of bytes");
    };
    return count_accepted([&] { decode(3); }, [&] { decode(1); });
  }
};

// Tiny-ImageNet-200's val/val_annotations.txt, in a copy of its layout with two classes.
class TinyImageNetTarget {
 public:
  static constexpr const char* kName = "tiny_imagenet";
  static constexpr const char* kWnids[] = {"n01443537", "n01629819"};

  explicit TinyImageNetTarget(const std::string& base) : scratch_(base, kName) {
    const fs::path& dir = scratch_.path();
    const std::string wnids = std::string(kWnids[0]) + "\n" + kWnids[1] + "\n";
    write_file(dir / "wnids.txt", wnids.data(), wnids.size());
    // Images are decoded only when a sample is asked for, so empty files list as well.
    for (const char* wnid : kWnids) {
      const fs::path images = dir / "train" / wnid / "images";
      fs::create_directories(images);
      write_file(images / (std::string(wnid) + "_0.JPEG"), "", 0);
    }
    fs::create_directories(dir / "val" / "images");
  }

  int run(const uint8_t* data, size_t size) const {
    write_file(scratch_.path() / "val" / "val_annotations.txt", data, size);
    return count_accepted([&] {
      const data::Splits splits = data::open_tiny_imagenet(scratch_.path(), 3);
      check_splits(splits, false);
      promise(splits.val && splits.val->num_classes() == 2, "the validation classes changed");
      for (size_t index = 0; index < splits.val->size(); ++index) splits.val->source(index);
    });
  }

 private:
  ScratchDir scratch_;
};

// The model the tensor-file seeds were written for (tests/fuzz/make_tensor_seeds.cpp): small,
// so that a whole weights file or checkpoint is a seed of a few KB.
inline ModelSpec tensor_target_spec() {
  ModelSpec spec;
  spec.stem = Stem::cifar;
  spec.in_channels = 1;
  spec.num_classes = 2;
  spec.widths = {1, 2, 2, 2};
  spec.blocks = {1, 1, 1, 1};
  return spec;
}

// Rewrites every CRC-32 of a tensor file (docs/file_format.md) to match the bytes it covers,
// as far as the layout can be followed, so that mutated files get past the CRCs to the checks
// behind them: metadata, shapes, the model, the checkpoint.
inline std::string with_crcs_repaired(std::string file) {
  size_t at = 0;
  auto has = [&](uint64_t bytes) { return at <= file.size() && bytes <= file.size() - at; };
  auto take = [&](size_t bytes) {  // little-endian, as the file
    uint64_t value = 0;
    std::memcpy(&value, file.data() + at, bytes);
    at += bytes;
    return value;
  };
  auto crc = [&](size_t from, size_t to, uLong running) {
    return crc32(running, reinterpret_cast<const Bytef*>(file.data()) + from, uInt(to - from));
  };
  auto put_crc = [&](size_t where, uLong value) {
    const auto crc32_value = static_cast<uint32_t>(value);
    std::memcpy(&file[where], &crc32_value, 4);
  };
  if (!has(24)) return file;
  at = 16;  // magic, version, flags
  for (uint64_t entry = 0, count = take(8); entry < count; ++entry) {
    for (int text = 0; text < 2; ++text) {  // key, value
      if (!has(4)) return file;
      const uint64_t length = take(4);
      if (!has(length)) return file;
      at += length;
    }
  }
  if (!has(12)) return file;
  const uint64_t tensors = take(8);
  put_crc(at, crc(0, at, crc32(0L, Z_NULL, 0)));
  at += 4;
  for (uint64_t tensor = 0; tensor < tensors; ++tensor) {
    const size_t start = at;
    if (!has(4)) return file;
    const uint64_t name_length = take(4);
    if (!has(name_length + 8)) return file;
    at += name_length + 4;  // name, dtype
    const uint64_t ndim = take(4);
    if (ndim > 64 || !has(8 * ndim + 12)) return file;
    at += 8 * ndim;
    const uint64_t data_bytes = take(8);
    const size_t crc_at = at;
    at += 4;
    if (!has(data_bytes)) return file;
    put_crc(crc_at, crc(at, at + data_bytes, crc(start, crc_at, crc32(0L, Z_NULL, 0))));
    at += data_bytes;
  }
  return file;
}

// A weights file or checkpoint: read as a tensor file, loaded as --init loads weights, and
// resumed from as --resume does; once as it is, for the checks of the CRCs, and once with its
// CRCs repaired, for everything behind them.
class TensorFileTarget {
 public:
  static constexpr const char* kName = "tensor_file";

  explicit TensorFileTarget(const std::string& base)
      : scratch_(base, kName), path_(scratch_.path() / "checkpoint-0000000001.rddp") {}

  int run(const uint8_t* data, size_t size) const {
    const std::string input(reinterpret_cast<const char*>(data), size);
    const std::string repaired = with_crcs_repaired(input);
    return read_and_load(input) + (repaired == input ? 0 : read_and_load(repaired));
  }

 private:
  int read_and_load(const std::string& bytes) const {
    write_file(path_, bytes.data(), bytes.size());
    TensorFile file;
    const int read = count_accepted([&] { file = read_tensor_file(path_); });
    if (read == 0) return 0;
    return read + count_accepted(
                      [&] {
                        ModelState<float> model(tensor_target_spec());
                        LoadOptions options;
                        options.reinit_classifier_on_mismatch = true;
                        options.skip_prefixes = {"optimizer."};
                        load_weights(file, model, options);
                      },
                      [&] { resume(file); });
  }

  void resume(const TensorFile& file) const {
    ModelState<float> model(tensor_target_spec());
    OptimizerConfig config;
    const auto kind = file.metadata.find("optimizer.kind");
    if (kind != file.metadata.end() && kind->second == "sgd") {
      config.kind = OptimizerKind::sgd;
      config.momentum = 0.9;
    }
    OptimizerState optimizer;
    const ResumedCheckpoint resumed =
        load_latest_checkpoint(scratch_.path(), model, config, optimizer);
    const TrainPosition& at = resumed.position;
    promise(at.epoch >= 0 && at.step_in_epoch >= 0 && at.global_step >= 0,
            "a checkpoint resumes at a negative position");
    promise(at.world_size >= 1 && at.batch_size >= 1,
            "a checkpoint was written by a job of no ranks or an empty batch");
    promise(optimizer.step_count >= 0, "a checkpoint's optimizer took a negative step count");
  }

  ScratchDir scratch_;
  fs::path path_;
};

// A pack file (resnet_ddp_pack's train.rddp-pack) with every CRC it holds set right, or the
// input unchanged where it is too damaged to find them: so that mutations reach the checks
// behind the CRCs. The layout is docs/file_format.md's.
inline std::string with_pack_crcs_repaired(std::string bytes) {
  auto crc_of = [&](size_t begin, size_t length) {
    return uint32_t(crc32(0, reinterpret_cast<const Bytef*>(bytes.data() + begin), uInt(length)));
  };
  auto u32_at = [&](size_t at) {
    uint32_t value;
    std::memcpy(&value, bytes.data() + at, 4);
    return value;
  };
  auto put_u32 = [&](size_t at, uint32_t value) { std::memcpy(bytes.data() + at, &value, 4); };
  // Version 2 puts an 8-byte run id after flags (docs/file_format.md).
  const size_t shift = bytes.size() >= 12 && u32_at(8) >= 2 ? 8 : 0;
  size_t at = 36 + shift;  // after class_count
  if (bytes.size() < at) return bytes;
  for (uint32_t k = 0, count = u32_at(32 + shift); k < count && k < (1u << 20); ++k) {
    if (bytes.size() - at < 4) return bytes;
    const uint32_t length = u32_at(at);
    if (bytes.size() - at - 4 < length) return bytes;
    at += 4 + length;
  }
  if (bytes.size() - at < 4) return bytes;
  put_u32(at, crc_of(0, at));
  const size_t pixels_begin = at + 4;
  if (bytes.size() - pixels_begin < 28) return bytes;
  const size_t trailer = bytes.size() - 28;
  put_u32(trailer + 16, crc_of(trailer, 16));
  uint64_t index_offset, count;
  std::memcpy(&index_offset, bytes.data() + trailer, 8);
  std::memcpy(&count, bytes.data() + trailer + 8, 8);
  if (index_offset < pixels_begin || index_offset > trailer || count > (trailer - index_offset) / 24 ||
      index_offset + count * 24 + 4 != trailer)
    return bytes;
  const uint32_t channels = u32_at(16 + shift);
  for (uint64_t i = 0; i < count; ++i) {
    const size_t record = size_t(index_offset + i * 24);
    uint64_t offset;
    std::memcpy(&offset, bytes.data() + record, 8);
    const uint64_t length = uint64_t(u32_at(record + 8)) * u32_at(record + 12) * channels;
    if (offset <= index_offset && length <= index_offset - offset && length < (1ull << 32))
      put_u32(record + 20, crc_of(size_t(offset), size_t(length)));
  }
  put_u32(trailer - 4, crc_of(size_t(index_offset), size_t(count * 24)));
  return bytes;
}

// A packed data set: the input is train.rddp-pack, opened as --data DIR opens it and read
// image by image; once as it is and once with its CRCs repaired.
class PackTarget {
 public:
  static constexpr const char* kName = "pack";

  explicit PackTarget(const std::string& base) : scratch_(base, kName) {}

  int run(const uint8_t* data, size_t size) const {
    const std::string input(reinterpret_cast<const char*>(data), size);
    const std::string repaired = with_pack_crcs_repaired(input);
    return open_and_read(input) + (repaired == input ? 0 : open_and_read(repaired));
  }

 private:
  int open_and_read(const std::string& bytes) const {
    write_file(scratch_.path() / "train.rddp-pack", bytes.data(), bytes.size());
    return count_accepted([&] { check_splits(data::open_packed(scratch_.path()), true); });
  }

  ScratchDir scratch_;
};

// The command line: the input is the arguments after the program name, separated by NUL
// bytes (as argv could never contain one).
class OptionsTarget {
 public:
  static constexpr const char* kName = "options";

  explicit OptionsTarget(const std::string&) {}

  int run(const uint8_t* data, size_t size) const {
    std::vector<std::string> arguments{"resnet_ddp"};
    std::string current;
    for (size_t i = 0; i < size; ++i) {
      if (data[i] == 0) {
        arguments.push_back(current);
        current.clear();
      } else {
        current.push_back(static_cast<char>(data[i]));
      }
    }
    if (!current.empty()) arguments.push_back(current);
    std::vector<const char*> argv;
    for (const std::string& argument : arguments) argv.push_back(argument.c_str());
    argv.push_back(nullptr);

    return count_accepted([&] {
      TrainOptions options;
      bool proceed;
      {
        const QuietStdout quiet;  // --help and --version print
        proceed = parse_options(static_cast<int>(arguments.size()), argv.data(), options);
      }
      if (!proceed) return;
      promise(!options.data.path.empty() || options.data.kind == data::DatasetKind::synthetic,
              "no data to train on");
      promise(options.data.batch_size >= 1 && options.epochs >= 1, "no batch or no epoch");
      promise(options.warmup_epochs <= options.epochs, "a warm-up longer than the training");
      try {
        options.optimizer.validate();
      } catch (const Error& error) {
        promise(false, std::string("an optimizer that cannot run: ") + error.what());
      }
    });
  }

 private:
  class QuietStdout {
   public:
    QuietStdout() {
      std::fflush(stdout);
      saved_ = ::dup(STDOUT_FILENO);
      const int null = ::open("/dev/null", O_WRONLY);
      if (null >= 0) {
        ::dup2(null, STDOUT_FILENO);
        ::close(null);
      }
    }
    ~QuietStdout() {
      std::fflush(stdout);
      if (saved_ >= 0) {
        ::dup2(saved_, STDOUT_FILENO);
        ::close(saved_);
      }
    }
    QuietStdout(const QuietStdout&) = delete;
    QuietStdout& operator=(const QuietStdout&) = delete;

   private:
    int saved_ = -1;
  };
};

// The body of every harness: one target per process, set up on the first input.
template <typename Target>
int run_harness(const uint8_t* data, size_t size) {
  static const Target target(default_scratch_base());
  target.run(data, size);
  return 0;
}

}  // namespace rddp::fuzz
