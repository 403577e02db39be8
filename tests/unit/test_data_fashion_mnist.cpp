// Debian's Fashion-MNIST (package dataset-fashion-mnist), read by the idx reader and, after
// data/fashion_mnist_to_folder.py, by the image folder reader.
#include <doctest/doctest.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "resnet_ddp/data/dataset_kind.h"
#include "resnet_ddp/data/normalize.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/error.h"

using namespace rddp;
using namespace rddp::data;
namespace fs = std::filesystem;

namespace {

const std::string kDebianDir = "/usr/share/datasets/fashion-mnist";

void require_fashion_mnist() {
  REQUIRE_MESSAGE(fs::exists(kDebianDir + "/train-images-idx3-ubyte.gz"),
                  "Fashion-MNIST is not installed at ", kDebianDir,
                  ": install Debian's dataset-fashion-mnist package (scripts/setup.sh does)");
}

// The first `count` bytes after an idx header of `header` bytes, read with zlib directly.
std::vector<uint8_t> gzip_prefix(const std::string& path, size_t header, size_t count) {
  gzFile file = gzopen(path.c_str(), "rb");
  REQUIRE(file != nullptr);
  std::vector<uint8_t> bytes(header + count);
  const int got = gzread(file, bytes.data(), unsigned(bytes.size()));
  gzclose(file);
  REQUIRE(got == int(bytes.size()));
  return std::vector<uint8_t>(bytes.begin() + long(header), bytes.end());
}

}  // namespace

TEST_CASE("Fashion-MNIST from Debian's package: 60000 + 10000 images of 28x28, 10 classes") {
  require_fashion_mnist();
  CHECK(detect_dataset_kind(kDebianDir) == DatasetKind::idx);
  const Splits splits = open_idx(kDebianDir);
  CHECK(splits.train->size() == 60000);
  CHECK(splits.val->size() == 10000);
  CHECK(splits.train->height() == 28);
  CHECK(splits.train->width() == 28);
  CHECK(splits.train->num_classes() == 10);

  // Against zlib reading the files ourselves: the first three images and labels of each split.
  const std::vector<uint8_t> train_pixels = gzip_prefix(kDebianDir + "/train-images-idx3-ubyte.gz", 16, 3 * 784);
  const std::vector<uint8_t> train_labels = gzip_prefix(kDebianDir + "/train-labels-idx1-ubyte.gz", 8, 3);
  const std::vector<uint8_t> test_labels = gzip_prefix(kDebianDir + "/t10k-labels-idx1-ubyte.gz", 8, 3);
  for (size_t i = 0; i < 3; ++i) {
    const Sample sample = splits.train->get(i);
    CHECK(sample.label == train_labels[i]);
    CHECK(sample.image.pixels == std::vector<uint8_t>(train_pixels.begin() + long(i) * 784,
                                                      train_pixels.begin() + long(i + 1) * 784));
    CHECK(splits.val->get(i).label == test_labels[i]);
  }
  // The first training image is an ankle boot (class 9), as the data set's documentation shows.
  CHECK(train_labels[0] == 9);

  // 6000 training images per class, and the normalisation preset's statistics.
  std::vector<int> per_class(10, 0);
  double sum = 0, sum_sq = 0;
  for (size_t i = 0; i < splits.train->size(); ++i) {
    const Sample sample = splits.train->get(i);
    ++per_class[size_t(sample.label)];
    for (uint8_t p : sample.image.pixels) {
      sum += p / 255.0;
      sum_sq += (p / 255.0) * (p / 255.0);
    }
  }
  for (int count : per_class) CHECK(count == 6000);
  const double n = 60000.0 * 784;
  const Normalization preset = normalization_preset("fashion-mnist", 1);
  CHECK(sum / n == doctest::Approx(preset.mean[0]).epsilon(2e-4));
  CHECK(std::sqrt(sum_sq / n - (sum / n) * (sum / n)) == doctest::Approx(preset.stddev[0]).epsilon(2e-4));
}

TEST_CASE("Fashion-MNIST written as PNGs reads back as the same images through the image folder path") {
  require_fashion_mnist();
  const fs::path out = fs::path(RDDP_TEST_TMP) / "data_fashion_folder";
  fs::remove_all(out);
  const std::string command = "python3 " RDDP_SOURCE_DIR "/data/fashion_mnist_to_folder.py --out " +
                              out.string() + " --train-per-class 5 --val-per-class 2 > /dev/null";
  REQUIRE_MESSAGE(std::system(command.c_str()) == 0, "failed: ", command);
  CHECK(detect_dataset_kind(out.string()) == DatasetKind::image_folder);

  const Splits folder = open_image_folder(out.string(), 1);
  const Splits idx = open_idx(kDebianDir);
  REQUIRE(folder.train->size() == 50);
  REQUIRE(folder.val->size() == 20);
  CHECK(folder.train->num_classes() == 10);
  CHECK(folder.train->height() == 0);  // image folders promise no size
  for (const DatasetPtr& split : {folder.train, folder.val}) {
    const DatasetPtr& original = split == folder.train ? idx.train : idx.val;
    for (size_t i = 0; i < split->size(); ++i) {
      // Each file is named by its position in the idx file.
      const size_t position = std::stoul(fs::path(split->source(i)).stem().string());
      const Sample from_png = split->get(i);
      const Sample from_idx = original->get(position);
      CHECK(from_png.label == from_idx.label);
      CHECK(from_png.image.height == 28);
      CHECK(from_png.image.pixels == from_idx.image.pixels);
    }
  }
  // Classes come out in label order and each class's files in index order.
  CHECK(folder.train->get(0).label == 0);
  CHECK(folder.train->get(49).label == 9);
  // Decoded as RGB, every channel repeats the grey value.
  const Sample rgb = open_image_folder(out.string(), 3).train->get(7);
  const Sample grey = folder.train->get(7);
  REQUIRE(rgb.image.channels == 3);
  for (size_t p = 0; p < grey.image.pixels.size(); ++p)
    for (size_t c = 0; c < 3; ++c) CHECK(rgb.image.pixels[p * 3 + c] == grey.image.pixels[p]);
}
