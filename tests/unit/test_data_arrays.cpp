// CIFAR and idx readers on files the test writes.
#include <doctest/doctest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/rng.h"
#include "support/scratch_dir.h"

using namespace rddp;
using namespace rddp::data;
namespace fs = std::filesystem;

namespace {

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  REQUIRE(out.good());
}

std::vector<uint8_t> random_bytes(size_t count, Rng& rng) {
  std::vector<uint8_t> bytes(count);
  for (uint8_t& b : bytes) b = uint8_t(rng.below(256));
  return bytes;
}

// CIFAR records: label byte(s), then R, G and B planes of 32x32.
std::vector<uint8_t> cifar_records(const std::vector<std::vector<uint8_t>>& labels,
                                   const std::vector<std::vector<uint8_t>>& planes) {
  std::vector<uint8_t> bytes;
  for (size_t r = 0; r < labels.size(); ++r) {
    bytes.insert(bytes.end(), labels[r].begin(), labels[r].end());
    bytes.insert(bytes.end(), planes[r].begin(), planes[r].end());
  }
  return bytes;
}

struct CifarFiles {
  std::vector<std::vector<uint8_t>> labels, planes;  // every record, train files then test
};

CifarFiles write_cifar10(const std::string& dir, size_t per_file, Rng& rng) {
  CifarFiles all;
  const char* names[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                         "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
  for (const char* name : names) {
    std::vector<std::vector<uint8_t>> labels, planes;
    for (size_t r = 0; r < per_file; ++r) {
      labels.push_back({uint8_t(rng.below(10))});
      planes.push_back(random_bytes(3072, rng));
    }
    write_bytes(dir + "/" + name, cifar_records(labels, planes));
    all.labels.insert(all.labels.end(), labels.begin(), labels.end());
    all.planes.insert(all.planes.end(), planes.begin(), planes.end());
  }
  return all;
}

void check_cifar_image(const Sample& sample, const std::vector<uint8_t>& planes, int label) {
  CHECK(sample.label == label);
  REQUIRE(sample.image.height == 32);
  REQUIRE(sample.image.width == 32);
  REQUIRE(sample.image.channels == 3);
  bool same = true;
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 32; ++x)
      for (int c = 0; c < 3; ++c)
        same = same && sample.image.at(y, x)[c] == planes[size_t(c) * 1024 + size_t(y) * 32 + x];
  CHECK(same);
}

std::vector<uint8_t> idx_file(uint32_t magic, std::vector<uint32_t> dims, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> bytes;
  auto put = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(uint8_t(v >> shift));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

void write_gzip(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  CHECK(gzwrite(file, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
  CHECK(gzclose(file) == Z_OK);
}

struct IdxSet {
  std::vector<uint8_t> train_images, train_labels, test_images, test_labels;
};

IdxSet write_idx(const std::string& dir, bool gzip, Rng& rng, uint8_t max_label = 9) {
  IdxSet set;
  set.train_images = random_bytes(7 * 5 * 4, rng);  // 7 images of 5 rows, 4 columns
  set.test_images = random_bytes(3 * 5 * 4, rng);
  for (int i = 0; i < 7; ++i) set.train_labels.push_back(uint8_t(i == 2 ? max_label : rng.below(max_label)));
  for (int i = 0; i < 3; ++i) set.test_labels.push_back(uint8_t(rng.below(max_label + 1)));
  auto write = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
    if (gzip) write_gzip(dir + "/" + name + ".gz", bytes);
    else write_bytes(dir + "/" + name, bytes);
  };
  write("train-images-idx3-ubyte", idx_file(0x803, {7, 5, 4}, set.train_images));
  write("train-labels-idx1-ubyte", idx_file(0x801, {7}, set.train_labels));
  write("t10k-images-idx3-ubyte", idx_file(0x803, {3, 5, 4}, set.test_images));
  write("t10k-labels-idx1-ubyte", idx_file(0x801, {3}, set.test_labels));
  return set;
}

}  // namespace

TEST_CASE("CIFAR-10 binary: five training files and a test file, planes turned to HWC") {
  Rng rng(1);
  const std::string dir = testing::scratch_dir("cifar10");
  const CifarFiles files = write_cifar10(dir, 3, rng);
  const Splits splits = open_cifar10(dir);
  REQUIRE(splits.train->size() == 15);
  REQUIRE(splits.val->size() == 3);
  CHECK(splits.train->num_classes() == 10);
  CHECK(splits.train->height() == 32);
  CHECK(splits.train->channels() == 3);
  for (size_t i = 0; i < 15; ++i) check_cifar_image(splits.train->get(i), files.planes[i], files.labels[i][0]);
  for (size_t i = 0; i < 3; ++i) check_cifar_image(splits.val->get(i), files.planes[15 + i], files.labels[15 + i][0]);
  CHECK(splits.train->source(7) == dir + "/data_batch_3.bin record 1");

  // The tarball's own folder inside the given one is found too.
  const std::string outer = testing::scratch_dir("cifar10_outer");
  fs::create_directories(outer + "/cifar-10-batches-bin");
  write_cifar10(outer + "/cifar-10-batches-bin", 1, rng);
  CHECK(open_cifar10(outer).train->size() == 5);
}

TEST_CASE("CIFAR-100 binary uses the fine label, the second byte") {
  Rng rng(2);
  const std::string dir = testing::scratch_dir("cifar100");
  std::vector<std::vector<uint8_t>> labels, planes;
  for (int r = 0; r < 4; ++r) {
    labels.push_back({uint8_t(rng.below(20)), uint8_t(rng.below(100))});
    planes.push_back(random_bytes(3072, rng));
  }
  labels[1][1] = 99;
  write_bytes(dir + "/train.bin", cifar_records(labels, planes));
  write_bytes(dir + "/test.bin", cifar_records({labels[0]}, {planes[0]}));
  const Splits splits = open_cifar100(dir);
  CHECK(splits.train->num_classes() == 100);
  REQUIRE(splits.train->size() == 4);
  for (size_t i = 0; i < 4; ++i) check_cifar_image(splits.train->get(i), planes[i], labels[i][1]);
}

TEST_CASE("damaged CIFAR files are refused naming the file") {
  Rng rng(3);
  const std::string dir = testing::scratch_dir("cifar_bad");
  write_cifar10(dir, 2, rng);
  SUBCASE("truncated") {
    fs::resize_file(dir + "/data_batch_4.bin", 2 * 3073 - 100);
    CHECK_THROWS_WITH_AS(open_cifar10(dir), doctest::Contains("data_batch_4.bin is 6046 bytes"), Error);
  }
  SUBCASE("label out of range") {
    std::vector<uint8_t> bytes(3073, 0);
    bytes[0] = 10;
    write_bytes(dir + "/test_batch.bin", bytes);
    CHECK_THROWS_WITH_AS(open_cifar10(dir), doctest::Contains("test_batch.bin record 0: label 10 is out of range"), Error);
  }
  SUBCASE("a file missing") {
    fs::remove(dir + "/data_batch_5.bin");
    CHECK_THROWS_WITH_AS(open_cifar10(dir), doctest::Contains("data_batch_5.bin is missing"), Error);
  }
  SUBCASE("no CIFAR files at all") {
    CHECK_THROWS_WITH_AS(open_cifar100(dir), doctest::Contains("no CIFAR-100 files"), Error);
  }
  SUBCASE("no such directory") {
    CHECK_THROWS_WITH_AS(open_cifar10(dir + "/nowhere"), doctest::Contains("does not exist"), Error);
  }
}

TEST_CASE("idx files, plain or gzip, give the stored bytes and labels") {
  for (bool gzip : {false, true}) {
    CAPTURE(gzip);
    Rng rng(gzip ? 4 : 5);
    const std::string dir = testing::scratch_dir(gzip ? "idx_gz" : "idx_plain");
    const IdxSet set = write_idx(dir, gzip, rng);
    const Splits splits = open_idx(dir);
    REQUIRE(splits.train->size() == 7);
    REQUIRE(splits.val->size() == 3);
    CHECK(splits.train->num_classes() == 10);  // the largest training label is 9
    CHECK(splits.train->height() == 5);
    CHECK(splits.train->width() == 4);
    CHECK(splits.train->channels() == 1);
    for (size_t i = 0; i < 7; ++i) {
      const Sample sample = splits.train->get(i);
      CHECK(sample.label == set.train_labels[i]);
      CHECK(sample.image.pixels == std::vector<uint8_t>(set.train_images.begin() + long(i) * 20,
                                                        set.train_images.begin() + long(i + 1) * 20));
    }
    CHECK(splits.val->get(2).label == set.test_labels[2]);
  }
}

TEST_CASE("bad idx files are refused naming the file") {
  Rng rng(6);
  const std::string dir = testing::scratch_dir("idx_bad");
  write_idx(dir, false, rng);
  const std::string images = dir + "/train-images-idx3-ubyte";
  SUBCASE("wrong magic number") {
    write_bytes(images, idx_file(0x801, {7}, std::vector<uint8_t>(7)));
    CHECK_THROWS_WITH_AS(open_idx(dir), doctest::Contains("train-images-idx3-ubyte has magic number 0x00000801"), Error);
  }
  SUBCASE("size not what the header says") {
    write_bytes(images, idx_file(0x803, {7, 5, 4}, std::vector<uint8_t>(139)));
    CHECK_THROWS_WITH_AS(open_idx(dir), doctest::Contains("header says 7x5x4 = 140"), Error);
  }
  SUBCASE("counts of images and labels differ") {
    write_bytes(images, idx_file(0x803, {6, 5, 4}, std::vector<uint8_t>(120)));
    CHECK_THROWS_WITH_AS(open_idx(dir), doctest::Contains("holds 6 images but"), Error);
  }
  SUBCASE("test label beyond the training labels") {
    write_bytes(dir + "/t10k-labels-idx1-ubyte", idx_file(0x801, {3}, {0, 1, 10}));
    CHECK_THROWS_WITH_AS(open_idx(dir), doctest::Contains("t10k-labels-idx1-ubyte label 2 is 10"), Error);
  }
  SUBCASE("truncated gzip") {
    write_gzip(images + ".gz", idx_file(0x803, {7, 5, 4}, random_bytes(140, rng)));
    fs::remove(images);
    fs::resize_file(images + ".gz", fs::file_size(images + ".gz") / 2);
    CHECK_THROWS_WITH_AS(open_idx(dir), doctest::Contains("train-images-idx3-ubyte.gz: unexpected end of file"), Error);
  }
  SUBCASE("a file missing") {
    fs::remove(dir + "/t10k-images-idx3-ubyte");
    CHECK_THROWS_WITH_AS(open_idx(dir), doctest::Contains("t10k-images-idx3-ubyte[.gz] is missing"), Error);
  }
}
