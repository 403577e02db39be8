#pragma once
// A data set held in memory as decoded uint8 HWC images of one size, as the array formats
// (CIFAR, idx, synthetic) are read.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "resnet_ddp/data/dataset.h"

namespace rddp::data {

// Which file each run of records came from, so that messages can name it.
struct RecordFile {
  std::string path;
  size_t first = 0;  // index of its first record in the data set
  size_t count = 0;
};

struct ImageArray {
  std::string description;
  int height = 0, width = 0, channels = 0;
  int num_classes = 0;
  std::vector<uint8_t> pixels;   // size() * height * width * channels, HWC per image
  std::vector<int32_t> labels;
  std::vector<RecordFile> files;
};

DatasetPtr make_in_memory_dataset(ImageArray array);

}  // namespace rddp::data
