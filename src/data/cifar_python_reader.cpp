// CIFAR's Python version (cifar-10-python.tar.gz, cifar-100-python.tar.gz), the files
// torchvision's CIFAR10 and CIFAR100 download: each batch is a Python 2 pickle of a dict whose
// "data" is a uint8 array of N x 3072 (the red, green and blue planes of 32x32 images, as in
// the binary version) and whose "labels" (CIFAR-10) or "fine_labels" and "coarse_labels"
// (CIFAR-100) are lists of N ints; batches.meta (meta) names the classes. Read from the
// unpacked folder, or from the archive in place; the samples are the binary version's, in the
// same order (data_batch_1..5 then test_batch; train then test), as torchvision has them.
#include <map>
#include <string>
#include <vector>

#include "cifar_layout.h"
#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/in_memory_dataset.h"
#include "resnet_ddp/data/python2_pickle.h"
#include "resnet_ddp/data/tar_archive.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

using py2pickle::Type;
using py2pickle::Value;

constexpr int kSide = 32;
constexpr size_t kPlane = size_t(kSide) * kSide;
constexpr size_t kImageBytes = 3 * kPlane;
// CIFAR-100's train, the largest file, is 155 MB; CIFAR-10's batches are 31 MB.
constexpr uint64_t kMaxFileBytes = uint64_t(1) << 30;

struct PythonFormat {
  const char* name;             // "CIFAR-10"
  const char* folder;           // what the archive unpacks to
  const char* archive;          // what torchvision downloads
  const char* binary_archive;   // the binary version's download
  std::vector<std::string> train, val;
  const char* meta;             // the file naming the classes
  const char* names_key;        // its list of class names
  const char* labels_key;       // each batch's labels
  const char* coarse_names_key;  // CIFAR-100's 20 superclasses; null for CIFAR-10
  const char* coarse_key;
  int classes;
  int coarse_classes;
};

const PythonFormat& format_of(CifarVersion version) {
  static const PythonFormat cifar10{
      "CIFAR-10", "cifar-10-batches-py", "cifar-10-python.tar.gz", "cifar-10-binary.tar.gz",
      {"data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5"},
      {"test_batch"}, "batches.meta", "label_names", "labels", nullptr, nullptr, 10, 0};
  static const PythonFormat cifar100{
      "CIFAR-100", "cifar-100-python", "cifar-100-python.tar.gz", "cifar-100-binary.tar.gz",
      {"train"}, {"test"}, "meta", "fine_label_names", "fine_labels", "coarse_label_names",
      "coarse_labels", 100, 20};
  return version == CifarVersion::cifar10 ? cifar10 : cifar100;
}

// One file's bytes and how messages name it: its path, or the archive and the member.
struct PythonFile {
  std::string where;
  std::vector<uint8_t> bytes;
};

class BatchReader {
 public:
  explicit BatchReader(const PythonFormat& format) : format_(format) {}

  // The class names, and CIFAR-10's batch size, from batches.meta (meta).
  void read_meta(const PythonFile& file) {
    const py2pickle::ValuePtr root = parse(file);
    check_names(file, *root, format_.names_key, format_.classes);
    if (format_.coarse_names_key) {  // CIFAR-100's meta holds only the names
      check_names(file, *root, format_.coarse_names_key, format_.coarse_classes);
      return;
    }
    const Value* batch = py2pickle::dict_get(*root, "num_cases_per_batch");
    const Value* pixels = py2pickle::dict_get(*root, "num_vis");
    if (!batch || batch->type != Type::integer || batch->integer < 1)
      refuse(file, "'num_cases_per_batch' is not a positive integer");
    if (!pixels || pixels->type != Type::integer || pixels->integer != int64_t(kImageBytes))
      refuse(file, "'num_vis' is not 3072, the bytes of a 32x32 RGB image");
    batch_size_ = batch->integer;
  }

  void append_batch(ImageArray& array, const PythonFile& file) {
    const py2pickle::ValuePtr root = parse(file);
    const Value* data = py2pickle::dict_get(*root, "data");
    if (!data || data->type != Type::array || !data->built)
      refuse(file, "it holds no 'data' array of images");
    if (data->shape.size() != 2 || data->shape[1] != int64_t(kImageBytes))
      refuse(file, "'data' is an array of shape " + shape_text(data->shape) + ", not (N, 3072)");
    if (data->fortran_order) refuse(file, "'data' is stored in Fortran (column) order");
    const size_t count = size_t(data->shape[0]);
    if (count == 0) refuse(file, "'data' holds no images");
    if (batch_size_ > 0 && count != size_t(batch_size_))
      refuse(file, "'data' holds " + std::to_string(count) + " images where " + format_.meta +
                       " says a batch holds " + std::to_string(batch_size_));
    const Value& labels = checked_labels(file, *root, format_.labels_key, count, format_.classes);
    if (format_.coarse_key)
      checked_labels(file, *root, format_.coarse_key, count, format_.coarse_classes);

    array.files.push_back({file.where, array.labels.size(), count});
    for (const py2pickle::ValuePtr& label : labels.items)
      array.labels.push_back(int32_t(label->integer));
    // Planar R, G, B to interleaved HWC, as for the binary version.
    const size_t first_pixel = array.pixels.size();
    array.pixels.resize(first_pixel + count * kImageBytes);
    const uint8_t* in = reinterpret_cast<const uint8_t*>(data->bytes.data());
    for (size_t r = 0; r < count; ++r) {
      const uint8_t* planes = in + r * kImageBytes;
      uint8_t* out = array.pixels.data() + first_pixel + r * kImageBytes;
      for (size_t p = 0; p < kPlane; ++p)
        for (size_t c = 0; c < 3; ++c) out[p * 3 + c] = planes[c * kPlane + p];
    }
  }

 private:
  [[noreturn]] void refuse(const PythonFile& file, const std::string& what) const {
    fail(file.where, ": ", what, "; ", advice());
  }

  std::string advice() const {
    return std::string("this is not ") + format_.name + "'s Python version as downloaded. "
           "Use the download itself (" + format_.archive + ", or the " + format_.folder +
           "/ folder torchvision unpacks from it; download it again from "
           "https://www.cs.toronto.edu/~kriz/cifar.html if it is damaged), or the binary "
           "version (" + format_.binary_archive + ")";
  }

  py2pickle::ValuePtr parse(const PythonFile& file) const {
    py2pickle::ValuePtr root;
    try {
      root = py2pickle::read_python2_pickle(file.bytes.data(), file.bytes.size(), file.where);
    } catch (const Error& error) {
      fail(error.what(), "; ", advice());
    }
    if (root->type != Type::dict) refuse(file, "the pickle holds no dict");
    return root;
  }

  void check_names(const PythonFile& file, const Value& root, const char* key, int count) const {
    const Value* names = py2pickle::dict_get(root, key);
    bool ok = names && names->type == Type::list && names->items.size() == size_t(count);
    for (size_t i = 0; ok && i < names->items.size(); ++i)
      ok = names->items[i]->type == Type::string;
    if (!ok) refuse(file, std::string("'") + key + "' is not a list of " +
                              std::to_string(count) + " class names");
  }

  const Value& checked_labels(const PythonFile& file, const Value& root, const char* key,
                              size_t count, int classes) const {
    const Value* labels = py2pickle::dict_get(root, key);
    if (!labels || labels->type != Type::list)
      refuse(file, std::string("it holds no list '") + key + "'");
    if (labels->items.size() != count)
      refuse(file, std::string("'") + key + "' holds " + std::to_string(labels->items.size()) +
                       " labels for " + std::to_string(count) + " images");
    for (size_t i = 0; i < count; ++i) {
      const Value& label = *labels->items[i];
      if (label.type != Type::integer || label.integer < 0 || label.integer >= classes)
        refuse(file, std::string("'") + key + "' item " + std::to_string(i) + " is " +
                         (label.type == Type::integer ? std::to_string(label.integer)
                                                      : std::string("not an integer")) +
                         ", not a label in 0.." + std::to_string(classes - 1));
    }
    return *labels;
  }

  static std::string shape_text(const std::vector<int64_t>& shape) {
    std::string text = "(";
    for (size_t i = 0; i < shape.size(); ++i)
      text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + (shape.size() == 1 ? ",)" : ")");
  }

  const PythonFormat& format_;
  int64_t batch_size_ = 0;  // CIFAR-10's num_cases_per_batch; 0 for CIFAR-100
};

// Every file a data set needs, from the folder or the archive, in the data set's order.
std::vector<PythonFile> read_files(const CifarLocation& location, const PythonFormat& format) {
  std::vector<std::string> names{format.meta};
  names.insert(names.end(), format.train.begin(), format.train.end());
  names.insert(names.end(), format.val.begin(), format.val.end());
  std::vector<PythonFile> files;
  if (location.layout == CifarLayout::python_folder) {
    for (const std::string& name : names) {
      const std::string path = join_path(location.path, name);
      if (!is_regular_file(path))
        fail(format.name, " file ", path, " is missing: unpack all of ", format.archive,
             " (or use the archive itself, which is read in place)");
      files.push_back({path, read_file(path)});
    }
    return files;
  }
  std::vector<std::string> members;
  for (const std::string& name : names) members.push_back(std::string(format.folder) + "/" + name);
  std::map<std::string, std::vector<uint8_t>> found =
      read_tar_members(location.path, members, kMaxFileBytes);
  for (const std::string& member : members) {
    const auto entry = found.find(member);
    if (entry == found.end())
      fail(location.path, " holds no ", member, ": the archive is incomplete or not ",
           format.archive, "; download it again");
    files.push_back({location.path + " member " + member, std::move(entry->second)});
  }
  return files;
}

}  // namespace

Splits read_cifar_python(const CifarLocation& location, CifarVersion version) {
  const PythonFormat& format = format_of(version);
  std::vector<PythonFile> files = read_files(location, format);
  BatchReader reader(format);
  reader.read_meta(files.front());
  size_t next = 1;
  auto split = [&](size_t count, const char* name) {
    ImageArray array;
    array.height = array.width = kSide;
    array.channels = 3;
    array.num_classes = format.classes;
    for (size_t i = 0; i < count; ++i, ++next) {
      reader.append_batch(array, files[next]);
      std::vector<uint8_t>().swap(files[next].bytes);  // a batch is 31 to 155 MB
    }
    array.description = std::string(format.name) + " " + name + " (" + location.path + ", " +
                         std::to_string(array.labels.size()) + " images)";
    return make_in_memory_dataset(std::move(array));
  };
  DatasetPtr train = split(format.train.size(), "train");
  DatasetPtr val = split(format.val.size(), "test");
  return {train, val};
}

}  // namespace rddp::data
