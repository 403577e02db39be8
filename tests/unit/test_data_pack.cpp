// Packed data sets: resnet_ddp_pack's packing on PNGs and JPEGs the test writes, the
// memory-mapped reader, and its refusal of damaged files.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stb_image_write.h>  // implemented in test_data_image_folder.cpp

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "resnet_ddp/data/data_config.h"
#include "resnet_ddp/data/dataset_kind.h"
#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/pack.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/data/transform.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/rng.h"
#include "support/child_process.h"
#include "support/scratch_dir.h"

using namespace rddp;
using namespace rddp::data;
namespace fs = std::filesystem;

namespace {

// Smooth content with some noise, so that JPEG keeps it recognisable and resizing has
// something to average.
Image test_image(int height, int width, int channels, Rng& rng) {
  Image image(height, width, channels);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c)
        image.at(y, x)[c] = uint8_t((x * 255 / width + y * 97 / height + 60 * c + rng.below(24)) % 256);
  return image;
}

void write_image(const std::string& path, const Image& image) {
  fs::create_directories(fs::path(path).parent_path());
  const bool png = path.size() > 4 && path.substr(path.size() - 4) == ".png";
  const int ok = png ? stbi_write_png(path.c_str(), image.width, image.height, image.channels,
                                      image.pixels.data(), image.width * image.channels)
                     : stbi_write_jpg(path.c_str(), image.width, image.height, image.channels,
                                      image.pixels.data(), 90);
  REQUIRE(ok != 0);
}

// An image folder of PNGs and JPEGs of many sizes: wider and taller than 256, exactly 256 on
// the shorter side, and smaller than 256 (upscaled, as Resize(256) does).
std::string make_folder(const std::string& name) {
  const std::string root = testing::scratch_dir(name);
  Rng rng(7);
  const int sizes[][2] = {{300, 200}, {180, 260}, {256, 400}, {90, 100}, {256, 256}, {333, 257}};
  int n = 0;
  for (const char* split : {"train", "val"})
    for (const char* cls : {"cat", "dog", "eel"})
      for (const auto& hw : sizes) {
        if (std::string(split) == "val" && n % 2 == 1) {
          ++n;
          continue;
        }
        const char* ext = n % 3 == 0 ? ".png" : ".jpg";
        write_image(root + "/" + split + "/" + cls + "/img" + std::to_string(n++) + ext,
                    test_image(hw[0], hw[1], 3, rng));
      }
  return root;
}

std::vector<uint8_t> file_bytes(const std::string& path) { return read_file(path); }

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// Opens a pack and reads every image, as a training epoch would.
void open_and_read_all(const std::string& path) {
  PackedDataset pack(path, "test");
  for (size_t i = 0; i < pack.size(); ++i) pack.get(i);
}

std::string error_of(const std::string& path) {
  try {
    open_and_read_all(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A pack of a few tiny images, small enough to damage every bit of it in turn.
std::string make_small_pack(const std::string& dir) {
  PackInfo info;
  info.channels = 3;
  info.short_side = 3;
  info.classes = {"a", "bb"};
  const std::string path = dir + "/small.rddp-pack";
  PackWriter writer(path, info);
  Rng rng(3);
  writer.add(test_image(3, 5, 3, rng), 1);
  writer.add(test_image(4, 3, 3, rng), 0);
  writer.add(test_image(3, 3, 3, rng), 1);
  writer.finish();
  return path;
}

}  // namespace

TEST_CASE("a packed image folder holds each original image decoded and resized to shorter side 256") {
  const std::string root = make_folder("round_trip");
  const std::string out = root + "/packed";
  PackOptions options;
  options.threads = 3;
  size_t reports = 0;
  options.progress = [&](const std::string&, size_t, size_t) { ++reports; };
  const std::vector<PackedSplit> packed = pack_dataset(root, out, options);
  REQUIRE(packed.size() == 2);
  CHECK(reports >= 2);  // at least the end of each split
  CHECK(packed[0].path == out + "/train.rddp-pack");
  CHECK(packed[0].images == 18);
  CHECK(packed[1].images == 9);
  CHECK(packed[0].bytes == fs::file_size(packed[0].path));

  CHECK(detect_dataset_kind(out) == DatasetKind::packed);
  const Splits original = open_image_folder(root, 3);
  const Splits pack = open_packed(out);
  REQUIRE(pack.val != nullptr);
  const auto& train = dynamic_cast<const PackedDataset&>(*pack.train);
  CHECK(train.info().classes == std::vector<std::string>{"cat", "dog", "eel"});
  CHECK(train.info().short_side == 256);
  CHECK(train.height() == 0);  // image folders have images of many sizes, and so do their packs
  CHECK(train.num_classes() == 3);
  for (const auto& [from, to] : {std::pair{original.train, pack.train}, {original.val, pack.val}}) {
    REQUIRE(to->size() == from->size());
    for (size_t i = 0; i < from->size(); ++i) {
      const Sample expected = from->get(i);
      const Sample got = to->get(i);
      CAPTURE(from->source(i));
      CHECK(got.label == expected.label);
      const Image resized = resize_shorter_side(expected.image, 256);
      CHECK(got.image.height == resized.height);
      CHECK(got.image.width == resized.width);
      CHECK(std::min(got.image.height, got.image.width) == 256);
      CHECK(got.image.pixels == resized.pixels);
    }
  }
}

TEST_CASE("validation from a 256 pack is byte-identical to Resize(256) + CenterCrop(224) of the originals") {
  const std::string root = make_folder("val_identity");
  const std::string out = root + "/packed";
  pack_dataset(root, out, PackOptions{});

  // Training reads the pack with the transforms it gives the image folder itself.
  DataConfig folder_config, pack_config;
  folder_config.path = root;
  pack_config.path = out;
  const OpenedData folder = open_data(folder_config), packed = open_data(pack_config);
  CHECK(packed.kind == DatasetKind::packed);
  CHECK(to_string(packed.eval_transform) == to_string(folder.eval_transform));
  CHECK(to_string(packed.eval_transform) == "Resize(256) + CenterCrop(224)");
  CHECK(to_string(packed.train_transform) == to_string(folder.train_transform));
  CHECK(packed.normalization.mean == folder.normalization.mean);
  CHECK(packed.num_classes == 3);

  // Resize(256) of an image whose shorter side is 256 leaves it as it is, so the pack's
  // pixels go through CenterCrop exactly as the resized original does.
  REQUIRE(packed.val->size() == folder.val->size());
  for (size_t i = 0; i < folder.val->size(); ++i) {
    const Image from_folder = apply_transform(folder.eval_transform, folder.val->get(i).image, 0, 0, i);
    const Image from_pack = apply_transform(packed.eval_transform, packed.val->get(i).image, 0, 0, i);
    CAPTURE(folder.val->source(i));
    CHECK(from_pack.height == 224);
    CHECK(from_pack.pixels == from_folder.pixels);
  }
}

TEST_CASE("Tiny-ImageNet packs at its own 64x64 and stays a fixed-size data set") {
  const std::string root = testing::scratch_dir("tiny");
  Rng rng(11);
  std::ofstream(root + "/wnids.txt") << "n02\nn01\n";
  std::string annotations;
  for (int i = 0; i < 4; ++i) {
    const std::string wnid = i % 2 ? "n01" : "n02";
    write_image(root + "/train/" + wnid + "/images/t" + std::to_string(i) + ".jpg",
                test_image(64, 64, 3, rng));
    write_image(root + "/val/images/v" + std::to_string(i) + ".jpg", test_image(64, 64, 3, rng));
    annotations += "v" + std::to_string(i) + ".jpg\t" + wnid + "\t0\t0\t63\t63\n";
  }
  std::ofstream(root + "/val/val_annotations.txt") << annotations;
  PackOptions options;
  options.channels = 1;
  pack_dataset(root, root + "/packed", options);
  const Splits original = open_tiny_imagenet(root, 1);
  const Splits pack = open_packed(root + "/packed");
  CHECK(pack.train->height() == 64);
  CHECK(pack.train->width() == 64);
  CHECK(pack.train->channels() == 1);
  REQUIRE(pack.val->size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(pack.val->get(i).image.pixels == original.val->get(i).image.pixels);
    CHECK(pack.val->get(i).label == original.val->get(i).label);
  }
}

TEST_CASE("packing refuses bad inputs, naming the file") {
  const std::string root = testing::scratch_dir("bad_input");
  Rng rng(5);
  write_image(root + "/train/a/good.png", test_image(20, 30, 3, rng));
  std::ofstream(root + "/train/a/broken.jpg") << "this is no JPEG";
  CHECK_THROWS_WITH_AS(pack_dataset(root, root + "/packed", PackOptions{}),
                       doctest::Contains("broken.jpg"), Error);
  // Nothing half-written is left behind.
  CHECK_FALSE(fs::exists(root + "/packed/train.rddp-pack"));
  for (const auto& entry : fs::directory_iterator(root + "/packed")) FAIL(entry.path().string());

  std::ofstream(root + "/train/a/broken.jpg", std::ios::trunc).close();
  fs::remove(root + "/train/a/broken.jpg");
  const std::string cifar = testing::scratch_dir("bad_input_cifar");
  std::ofstream(cifar + "/data_batch_1.bin") << "x";
  CHECK_THROWS_WITH_AS(pack_dataset(cifar, cifar + "/packed", PackOptions{}),
                       doctest::Contains("packs image folders"), Error);
  CHECK_THROWS_WITH_AS(pack_dataset(root + "/missing", root + "/packed", PackOptions{}),
                       doctest::Contains("missing"), Error);
  std::ofstream(root + "/a_file") << "x";
  CHECK_THROWS_WITH_AS(pack_dataset(root, root + "/a_file", PackOptions{}),
                       doctest::Contains("a_file"), Error);
  CHECK_THROWS_WITH_AS(open_packed(root), doctest::Contains("resnet_ddp_pack"), Error);
}

TEST_CASE("every truncation and every single-bit flip of a pack is refused") {
  const std::string dir = testing::scratch_dir("damage");
  const std::string path = make_small_pack(dir);
  open_and_read_all(path);
  const std::vector<uint8_t> good = file_bytes(path);
  const std::string damaged = dir + "/damaged.rddp-pack";

  size_t refused = 0, tried = 0;
  for (size_t length = 0; length < good.size(); ++length, ++tried) {
    write_bytes(damaged, std::vector<uint8_t>(good.begin(), good.begin() + long(length)));
    const std::string message = error_of(damaged);
    CAPTURE(length);
    CHECK(message.find("damaged.rddp-pack") != std::string::npos);
    CHECK(message.find("resnet_ddp_pack") != std::string::npos);
    refused += !message.empty();
  }
  for (size_t byte = 0; byte < good.size(); ++byte)
    for (int bit = 0; bit < 8; ++bit, ++tried) {
      std::vector<uint8_t> bytes = good;
      bytes[byte] ^= uint8_t(1u << bit);
      write_bytes(damaged, bytes);
      const std::string message = error_of(damaged);
      CAPTURE(byte);
      CAPTURE(bit);
      CHECK(message.find("damaged.rddp-pack") != std::string::npos);
      refused += !message.empty();
    }
  CHECK(refused == tried);
  MESSAGE(tried, " damaged copies of a ", good.size(), "-byte pack, all refused");

  // Trailing bytes move the end marker.
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  write_bytes(damaged, longer);
  CHECK(error_of(damaged).find("end marker") != std::string::npos);
}

TEST_CASE("a pack of another version, or not a pack at all, is refused with what it is") {
  const std::string dir = testing::scratch_dir("version");
  const std::string path = make_small_pack(dir);
  std::vector<uint8_t> bytes = file_bytes(path);
  const std::string other = dir + "/other.rddp-pack";
  for (uint32_t version : {0u, 3u}) {
    std::memcpy(bytes.data() + 8, &version, 4);
    write_bytes(other, bytes);
    const std::string message = error_of(other);
    CHECK(message.find("other.rddp-pack' is a pack of format version " + std::to_string(version)) !=
          std::string::npos);
    CHECK(message.find("resnet_ddp_pack") != std::string::npos);
  }
  write_bytes(other, {'R', 'D', 'D', 'P', 'T', 'N', 'S', 'R', 1, 0, 0, 0});
  CHECK(error_of(other).find("weights or checkpoint file") != std::string::npos);
  CHECK(error_of(dir + "/absent.rddp-pack").find("absent.rddp-pack") != std::string::npos);
}

TEST_CASE("the pack writer refuses what the reader would refuse, and leaves no file") {
  const std::string dir = testing::scratch_dir("writer");
  PackInfo info;
  info.short_side = 4;
  info.classes = {"only"};
  Rng rng(9);
  {
    PackWriter writer(dir + "/p.rddp-pack", info);
    CHECK_THROWS_AS(writer.add(test_image(5, 6, 3, rng), 0), Error);  // shorter side 5, not 4
    CHECK_THROWS_AS(writer.add(test_image(4, 6, 1, rng), 0), Error);  // 1 channel, not 3
    CHECK_THROWS_AS(writer.add(test_image(4, 6, 3, rng), 1), Error);  // no class 1
    writer.add(test_image(4, 6, 3, rng), 0);
  }  // destroyed without finish()
  CHECK(fs::is_empty(dir));
  info.classes.clear();
  CHECK_THROWS_AS(PackWriter(dir + "/q.rddp-pack", info), Error);
  info.classes = {"only"};
  PackWriter empty(dir + "/r.rddp-pack", info);
  CHECK_THROWS_AS(empty.finish(), Error);
}

TEST_CASE("a pack truncated under a running reader ends it with SIGBUS and a message naming it") {
  const std::string dir = testing::scratch_dir("sigbus");
  const std::string path = make_small_pack(dir);
  // In a child: the signal must end a process, and this one runs the other tests.
  const testing::ChildResult child = testing::run_in_child([&] {
    try {
      PackedDataset pack(path, "test");
      // A file shrunk to nothing leaves no page of the mapping behind: the next read faults.
      if (truncate(path.c_str(), 0) != 0) _exit(4);
      pack.get(pack.size() - 1);
    } catch (...) {
      _exit(5);
    }
  });
  CHECK(WIFSIGNALED(child.status));
  if (WIFSIGNALED(child.status)) CHECK(WTERMSIG(child.status) == SIGBUS);
  const std::string& message = child.output;
  CAPTURE(message);
  CHECK(message.find("SIGBUS") != std::string::npos);
  CHECK(message.find(path) != std::string::npos);
  CHECK(message.find("resnet_ddp_pack") != std::string::npos);
}
