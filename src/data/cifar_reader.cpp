// CIFAR binary versions (https://www.cs.toronto.edu/~kriz/cifar.html): each record is the
// label byte(s) followed by 3072 bytes, the red, green and blue planes of a 32x32 image, rows
// top to bottom. The Python version of the same data, which torchvision downloads, is
// cifar_python_reader.cpp's.
#include <string>
#include <vector>

#include "cifar_layout.h"
#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/in_memory_dataset.h"
#include "resnet_ddp/data/regular_file.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

constexpr int kSide = 32;
constexpr size_t kPlane = size_t(kSide) * kSide;
constexpr size_t kImageBytes = 3 * kPlane;

struct CifarFormat {
  const char* name;            // "CIFAR-10"
  const char* archive;         // what to download
  std::vector<std::string> train_files;
  std::vector<std::string> val_files;
  size_t label_bytes;          // CIFAR-100 stores the coarse label, then the fine one
  int num_classes;             // of the label we use, the last label byte
  int coarse_classes;          // CIFAR-100's 20 superclasses; 0 for CIFAR-10
};

void append_file(ImageArray& array, const std::string& path, const CifarFormat& format) {
  const std::vector<uint8_t> bytes = read_file(path);
  const size_t record = format.label_bytes + kImageBytes;
  if (bytes.empty() || bytes.size() % record != 0)
    fail(path, " is ", bytes.size(), " bytes, not a whole number of ", record, "-byte ",
         format.name, " records: the file is truncated or not ", format.name,
         " binary data; download and unpack ", format.archive, " again");
  const size_t count = bytes.size() / record;
  array.files.push_back({path, array.labels.size(), count});
  const size_t first_pixel = array.pixels.size();
  array.pixels.resize(first_pixel + count * kImageBytes);
  for (size_t r = 0; r < count; ++r) {
    const uint8_t* in = bytes.data() + r * record;
    if (format.coarse_classes > 0 && in[0] >= format.coarse_classes)
      fail(path, " record ", r, ": coarse label ", int(in[0]), " is out of range 0..",
           format.coarse_classes - 1, ": the file is damaged or not ", format.name, " data");
    const int label = in[format.label_bytes - 1];
    if (label >= format.num_classes)
      fail(path, " record ", r, ": label ", label, " is out of range 0..", format.num_classes - 1,
           ": the file is damaged or not ", format.name, " data");
    array.labels.push_back(label);
    // Planar R, G, B to interleaved HWC.
    const uint8_t* planes = in + format.label_bytes;
    uint8_t* out = array.pixels.data() + first_pixel + r * kImageBytes;
    for (size_t p = 0; p < kPlane; ++p)
      for (size_t c = 0; c < 3; ++c) out[p * 3 + c] = planes[c * kPlane + p];
  }
}

DatasetPtr read_split(const std::string& dir, const std::vector<std::string>& names,
                      const CifarFormat& format, const char* split) {
  ImageArray array;
  array.height = array.width = kSide;
  array.channels = 3;
  array.num_classes = format.num_classes;
  for (const std::string& name : names) {
    const std::string path = join_path(dir, name);
    if (!path_exists(path))
      fail(format.name, " file ", path, " is missing: unpack all of ", format.archive, " into ",
           dir);
    append_file(array, path, format);
  }
  array.description = std::string(format.name) + " " + split + " (" + dir + ", " +
                      std::to_string(array.labels.size()) + " images)";
  return make_in_memory_dataset(std::move(array));
}

}  // namespace

Splits read_cifar_binary(const std::string& dir, CifarVersion version) {
  static const CifarFormat cifar10{
      "CIFAR-10", "cifar-10-binary.tar.gz",
      {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
       "data_batch_5.bin"},
      {"test_batch.bin"}, 1, 10, 0};
  static const CifarFormat cifar100{"CIFAR-100", "cifar-100-binary.tar.gz", {"train.bin"},
                                    {"test.bin"}, 2, 100, 20};
  const CifarFormat& format = version == CifarVersion::cifar10 ? cifar10 : cifar100;
  return {read_split(dir, format.train_files, format, "train"),
          read_split(dir, format.val_files, format, "test")};
}

}  // namespace rddp::data
