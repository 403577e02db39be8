// Image folders and Tiny-ImageNet on PNGs and JPEGs the test writes, and format detection.
#include <doctest/doctest.h>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "resnet_ddp/data/dataset_kind.h"
#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/host_allocator.h"
#include "resnet_ddp/data/image_decode.h"
#include "resnet_ddp/data/loader.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/data/transform.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/rng.h"
#include "support/scratch_dir.h"
#include "support/test_files.h"

using namespace rddp;
using namespace rddp::data;
using testing::write_text;
namespace fs = std::filesystem;

namespace {

Image random_image(int height, int width, int channels, Rng& rng) {
  Image image(height, width, channels);
  for (uint8_t& p : image.pixels) p = uint8_t(rng.below(256));
  return image;
}

// A smooth image: JPEG keeps it within a few levels, where noise would not survive.
Image gradient_image(int height, int width) {
  Image image(height, width, 3);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      image.at(y, x)[0] = uint8_t(x * 255 / (width - 1));
      image.at(y, x)[1] = uint8_t(y * 255 / (height - 1));
      image.at(y, x)[2] = 128;
    }
  return image;
}

void write_png(const std::string& path, const Image& image) {
  fs::create_directories(fs::path(path).parent_path());
  REQUIRE(stbi_write_png(path.c_str(), image.width, image.height, image.channels,
                         image.pixels.data(), image.width * image.channels) != 0);
}

// stb_image_write stores colour as 4:2:0 up to quality 90 and as 4:4:4 above.
void write_jpeg(const std::string& path, const Image& image, int quality = 95) {
  fs::create_directories(fs::path(path).parent_path());
  REQUIRE(stbi_write_jpg(path.c_str(), image.width, image.height, image.channels,
                         image.pixels.data(), quality) != 0);
}

}  // namespace

TEST_CASE("an image folder lists classes and files as torchvision's ImageFolder does") {
  Rng rng(1);
  const std::string root = testing::scratch_dir("listing");
  const Image a = random_image(5, 7, 3, rng), b = random_image(9, 4, 3, rng), c = random_image(3, 3, 3, rng);
  // Class names sort as strings: "Zebra" < "ant" < "bee"; folders by full path, files by name.
  write_png(root + "/train/bee/b.PNG", b);
  write_png(root + "/train/bee/a.png", a);
  write_png(root + "/train/ant/nested/deeper/x.png", c);
  write_png(root + "/train/ant/nested/c.png", c);
  write_png(root + "/train/ant/z.png", a);
  write_png(root + "/train/Zebra/only.bmp.png", b);
  write_text(root + "/train/bee/notes.txt", "not an image");
  write_text(root + "/train/bee/README", "no extension");

  const FolderListing listing = list_image_folder(root + "/train");
  CHECK(listing.classes == std::vector<std::string>{"Zebra", "ant", "bee"});
  std::vector<std::string> names;
  std::vector<int32_t> labels;
  for (const LabelledFile& file : listing.files) {
    names.push_back(file.path.substr(root.size() + 7));
    labels.push_back(file.label);
  }
  CHECK(names == std::vector<std::string>{"Zebra/only.bmp.png", "ant/z.png", "ant/nested/c.png",
                                          "ant/nested/deeper/x.png", "bee/a.png", "bee/b.PNG"});
  CHECK(labels == std::vector<int32_t>{0, 1, 1, 1, 2, 2});

  const Splits splits = open_image_folder(root, 3);
  CHECK(splits.val == nullptr);  // no val/ folder
  CHECK(splits.train->num_classes() == 3);
  CHECK(splits.train->description() ==
        "image folder train (" + root + "/train, 6 images, 3 classes)");
  const Sample sample = splits.train->get(5);  // bee/b.PNG
  CHECK(sample.label == 2);
  CHECK(sample.image.height == 9);
  CHECK(sample.image.width == 4);
  CHECK(sample.image.pixels == b.pixels);
}

TEST_CASE("a folder listing survives its bytes; damaged bytes are refused") {
  FolderListing listing;
  listing.classes = {"Zebra", "ant", std::string("b\0e", 3), ""};
  listing.files = {{"/data/train/Zebra/1.png", 0}, {"/data/train/ant/\xc3\xa9.jpg", 1},
                   {"", 3}, {std::string(70000, 'x'), 2}};
  const std::string bytes = encode_listing(listing);
  const FolderListing back = decode_listing(bytes);
  CHECK(back.present);
  CHECK(back.classes == listing.classes);
  REQUIRE(back.files.size() == listing.files.size());
  for (size_t i = 0; i < listing.files.size(); ++i) {
    CHECK(back.files[i].path == listing.files[i].path);
    CHECK(back.files[i].label == listing.files[i].label);
  }
  FolderListing absent;
  absent.present = false;
  CHECK_FALSE(decode_listing(encode_listing(absent)).present);
  CHECK_FALSE(list_image_folder(testing::scratch_dir("absent") + "/nothing", true).present);

  CHECK_THROWS_WITH_AS(decode_listing(bytes.substr(0, bytes.size() - 1)),
                       doctest::Contains("ends early"), Error);
  CHECK_THROWS_WITH_AS(decode_listing(bytes + "x"), doctest::Contains("bytes to spare"), Error);
}

TEST_CASE("JPEG, PNG, BMP and PGM decode; greyscale and RGB convert either way") {
  Rng rng(2);
  const std::string root = testing::scratch_dir("formats");
  const Image smooth = gradient_image(24, 32);
  write_jpeg(root + "/photo.JPG", smooth);
  const Image jpeg = decode_image_file(root + "/photo.JPG", 3);
  REQUIRE(jpeg.height == 24);
  REQUIRE(jpeg.width == 32);
  int worst = 0;
  for (size_t i = 0; i < jpeg.pixels.size(); ++i)
    worst = std::max(worst, std::abs(int(jpeg.pixels[i]) - int(smooth.pixels[i])));
  CHECK(worst <= 8);  // lossy, but close on a smooth image

  const Image grey = random_image(6, 5, 1, rng);
  REQUIRE(stbi_write_bmp((root + "/grey.bmp").c_str(), 5, 6, 1, grey.pixels.data()) != 0);
  const Image grey_as_rgb = decode_image_file(root + "/grey.bmp", 3);
  for (size_t p = 0; p < grey.pixels.size(); ++p)
    for (size_t c = 0; c < 3; ++c) CHECK(grey_as_rgb.pixels[p * 3 + c] == grey.pixels[p]);

  // A binary PGM written by hand.
  std::string pgm = "P5\n5 6\n255\n";
  pgm.append(grey.pixels.begin(), grey.pixels.end());
  write_text(root + "/grey.pgm", pgm);
  CHECK(decode_image_file(root + "/grey.pgm", 1).pixels == grey.pixels);

  // RGB to grey is Pillow's "L": (19595 R + 38470 G + 7471 B + 2^15) >> 16. Pure red, green
  // and blue give 76, 150 and 29 there (stb_image's own weights would give 76, 149 and 28).
  Image colour = random_image(4, 4, 3, rng);
  const uint8_t primaries[3][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}};
  for (int p = 0; p < 3; ++p) std::copy(primaries[p], primaries[p] + 3, colour.at(0, p));
  write_png(root + "/colour.png", colour);
  const Image to_grey = decode_image_file(root + "/colour.png", 1);
  CHECK(to_grey.pixels[0] == 76);
  CHECK(to_grey.pixels[1] == 150);
  CHECK(to_grey.pixels[2] == 29);
  for (size_t p = 0; p < to_grey.pixels.size(); ++p) {
    const uint8_t* rgb = colour.pixels.data() + p * 3;
    CHECK(to_grey.pixels[p] == ((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 32768) >> 16));
  }
  // The same through libjpeg: the JPEG decoded to RGB, then converted the same way.
  const Image jpeg_grey = decode_image_file(root + "/photo.JPG", 1);
  for (size_t p = 0; p < jpeg_grey.pixels.size(); ++p) {
    const uint8_t* rgb = jpeg.pixels.data() + p * 3;
    CHECK(jpeg_grey.pixels[p] == ((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 32768) >> 16));
  }
  CHECK(has_decodable_extension("a/b.JpEg"));
  CHECK_FALSE(has_decodable_extension("a.jpg/b"));
  CHECK(has_undecodable_image_extension("x.TIFF"));
}

TEST_CASE("a cut-off JPEG is refused with its path; stray bytes before its end decode on") {
  const std::string root = testing::scratch_dir("damaged_jpeg");
  write_jpeg(root + "/whole.jpg", gradient_image(48, 64));
  std::ifstream in(root + "/whole.jpg", std::ios::binary);
  const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(whole.size() > 100);
  const Image clean = decode_image_file(root + "/whole.jpg", 3);

  // libjpeg pads a cut-off scan with grey and only warns; Pillow refuses the file, and so do we.
  write_text(root + "/cut.jpg", whole.substr(0, whole.size() * 2 / 3));
  CHECK_THROWS_WITH_AS(decode_image_file(root + "/cut.jpg", 3),
                       doctest::Contains((root + "/cut.jpg: the file ends before").c_str()),
                       Error);
  // Also when only a region above the cut is asked for: the rows below are still read.
  const std::string cut = whole.substr(0, whole.size() * 2 / 3);
  const CropBox top_rows{0, 8, 4, 16};
  CHECK_THROWS_WITH_AS(decode_image_crop(reinterpret_cast<const uint8_t*>(cut.data()), cut.size(),
                                         3, [&](int, int) { return top_rows; }, "cut.jpg"),
                       doctest::Contains("cut.jpg: the file ends before"), Error);
  // A header cut short: libjpeg's own error, with the path.
  write_text(root + "/header.jpg", whole.substr(0, 40));
  CHECK_THROWS_WITH_AS(decode_image_file(root + "/header.jpg", 1),
                       doctest::Contains(("cannot decode image " + root + "/header.jpg").c_str()),
                       Error);
  const auto* bytes = reinterpret_cast<const uint8_t*>(whole.data());
  CHECK_THROWS_WITH_AS(read_image_header(bytes, 40, "x.jpg"),
                       doctest::Contains("cannot decode image x.jpg"), Error);

  // Bytes between the scan and the end marker: a warning only, the same pixels.
  REQUIRE(whole.substr(whole.size() - 2) == "\xFF\xD9");
  write_text(root + "/junk.jpg", whole.substr(0, whole.size() - 2) + "\x12\x34" + "\xFF\xD9");
  CHECK(decode_image_file(root + "/junk.jpg", 3).pixels == clean.pixels);
  const ImageHeader header = read_image_header(bytes, whole.size(), "whole.jpg");
  CHECK(header.width == 64);
  CHECK(header.height == 48);
  CHECK(header.channels == 3);
  CHECK(jpeg_library_version().find("libjpeg") == 0);
}

TEST_CASE("a JPEG's region decodes to the bytes of the whole image's, cropped") {
  Rng rng(9);
  const std::string root = testing::scratch_dir("regions");
  int files = 0;
  for (const auto& [height, width] : {std::pair{257, 333}, std::pair{48, 64}, std::pair{9, 17}})
    for (int stored_channels : {3, 1})
      for (int quality : {80, 95}) {
        const std::string path = root + "/" + std::to_string(files++) + ".jpg";
        write_jpeg(path, random_image(height, width, stored_channels, rng), quality);
        const std::vector<uint8_t> bytes = read_file(path);
        for (int channels : {3, 1}) {
          const Image whole = decode_image(bytes.data(), bytes.size(), channels, path);
          for (int trial = 0; trial < 40; ++trial) {
            // Boxes touching each edge as well as inner ones.
            CropBox box;
            box.height = 1 + int(rng.below(uint64_t(height)));
            box.width = 1 + int(rng.below(uint64_t(width)));
            box.top = trial % 4 == 0 ? 0 : int(rng.below(uint64_t(height - box.height + 1)));
            box.left = trial % 4 == 1 ? width - box.width
                                      : int(rng.below(uint64_t(width - box.width + 1)));
            const Image region = decode_image_crop(
                bytes.data(), bytes.size(), channels,
                [&](int h, int w) {
                  CHECK(h == height);
                  CHECK(w == width);
                  return box;
                },
                path);
            REQUIRE_MESSAGE(region.pixels == crop(whole, box).pixels, path, " box ", box.top, ",",
                            box.left, " ", box.height, "x", box.width, " channels ", channels);
          }
        }
      }
}

TEST_CASE("RandomResizedCrop through the loader decodes regions and changes nothing") {
  Rng rng(4);
  const std::string root = testing::scratch_dir("loader_regions");
  std::vector<LabelledFile> files;
  for (int i = 0; i < 12; ++i) {
    const std::string path = root + "/" + std::to_string(i) + (i % 3 == 2 ? ".png" : ".jpg");
    const Image image = random_image(40 + 7 * i, 90 - 5 * i, 3, rng);
    if (i % 3 == 2)
      write_png(path, image);
    else
      write_jpeg(path, image, i % 2 ? 80 : 95);
    files.push_back({path, i % 2});
  }
  const DatasetPtr dataset = make_file_dataset("test folder", files, 2, 3);
  LoaderOptions options;
  options.batch_size = 5;
  options.workers = 2;
  options.transform.kind = Transform::Kind::random_resized_crop_flip;
  options.transform.size = 24;
  options.seed = 11;
  options.make_float = false;
  Loader loader(dataset, DistributedSampler(files.size(), 1, 0, true, 2), options,
                make_plain_allocator());
  loader.start_epoch(3);
  size_t seen = 0;
  while (Loader::Lease lease = loader.next()) {
    const Batch& batch = *lease;
    for (size_t i = 0; i < batch.count; ++i, ++seen) {
      const int64_t index = batch.indices[i];
      const Image expected = apply_transform(options.transform,
                                             decode_image_file(files[size_t(index)].path, 3),
                                             options.seed, 3, uint64_t(index));
      CHECK(std::equal(expected.pixels.begin(), expected.pixels.end(),
                       batch.pixels + i * expected.pixels.size()));
    }
  }
  CHECK(seen == files.size());
}

TEST_CASE("bad image folders are refused with the path that is wrong") {
  Rng rng(3);
  const std::string root = testing::scratch_dir("bad");
  const Image image = random_image(4, 4, 3, rng);
  write_png(root + "/train/cat/1.png", image);
  write_png(root + "/train/dog/1.png", image);
  write_png(root + "/val/cat/1.png", image);
  write_png(root + "/val/dog/1.png", image);
  CHECK_NOTHROW(open_image_folder(root, 3));

  SUBCASE("missing directory") {
    CHECK_THROWS_WITH_AS(open_image_folder(root + "/absent", 3), doctest::Contains("absent does not exist"), Error);
    CHECK_THROWS_WITH_AS(detect_dataset_kind(root + "/absent"), doctest::Contains("absent does not exist"), Error);
  }
  SUBCASE("no train folder") {
    fs::rename(root + "/train", root + "/training");
    CHECK_THROWS_WITH_AS(open_image_folder(root, 3), doctest::Contains("no train/ subdirectory"), Error);
  }
  SUBCASE("empty class folder") {
    fs::create_directories(root + "/train/emu/sub");
    write_text(root + "/train/emu/sub/info.txt", "x");
    CHECK_THROWS_WITH_AS(open_image_folder(root, 3), doctest::Contains("train/emu"), Error);
  }
  SUBCASE("no class folders") {
    fs::remove_all(root + "/train");
    fs::create_directories(root + "/train");
    write_png(root + "/train/loose.png", image);
    CHECK_THROWS_WITH_AS(open_image_folder(root, 3), doctest::Contains("has no class subdirectories"), Error);
  }
  SUBCASE("TIFF files torchvision would read") {
    write_text(root + "/train/dog/2.tif", "II*");
    CHECK_THROWS_WITH_AS(open_image_folder(root, 3), doctest::Contains("train/dog/2.tif"), Error);
  }
  SUBCASE("validation classes differ") {
    fs::rename(root + "/val/dog", root + "/val/dingo");
    CHECK_THROWS_WITH_AS(open_image_folder(root, 3),
                         doctest::Contains("train/ has dog that val/ lacks; val/ has dingo that train/ lacks"),
                         Error);
  }
  SUBCASE("a validation class missing is named, though the counts differ") {
    fs::remove_all(root + "/val/dog");
    CHECK_THROWS_WITH_AS(open_image_folder(root, 3), doctest::Contains("train/ has dog that val/ lacks"), Error);
    fs::remove_all(root + "/val");
    write_png(root + "/val/cat/1.png", image);
    write_png(root + "/val/dog/1.png", image);
    write_png(root + "/val/eel/1.png", image);
    CHECK_THROWS_WITH_AS(open_image_folder(root, 3), doctest::Contains("val/ has eel that train/ lacks"), Error);
  }
  SUBCASE("a corrupt image fails when read, naming the file") {
    write_text(root + "/train/dog/2.jpg", "this is text, not a JPEG");
    const Splits splits = open_image_folder(root, 3);
    CHECK_THROWS_WITH_AS(splits.train->get(2), doctest::Contains("train/dog/2.jpg"), Error);
    // A truncated PNG too.
    const std::string png = root + "/train/dog/1.png";
    fs::resize_file(png, fs::file_size(png) / 2);
    CHECK_THROWS_WITH_AS(splits.train->get(1), doctest::Contains(("cannot decode image " + png).c_str()), Error);
  }
  SUBCASE("channels other than 1 or 3") {
    CHECK_THROWS_AS(open_image_folder(root, 2), Error);
  }
}

TEST_CASE("Tiny-ImageNet is read in its distributed layout") {
  Rng rng(4);
  const std::string root = testing::scratch_dir("tiny");
  const Image a = random_image(64, 64, 3, rng), b = random_image(64, 64, 3, rng);
  // wnids.txt is not sorted; labels follow the sorted train/ folders.
  write_text(root + "/wnids.txt", "n02\nn01\n");
  write_png(root + "/train/n01/images/n01_0.JPEG.png", a);
  write_text(root + "/train/n01/n01_boxes.txt", "n01_0.JPEG\t0\t0\t10\t10\n");
  write_png(root + "/train/n02/images/n02_0.png", b);
  write_png(root + "/train/n02/images/n02_1.png", a);
  write_png(root + "/val/images/val_0.png", b);
  write_png(root + "/val/images/val_1.png", a);
  write_text(root + "/val/val_annotations.txt", "val_0.png\tn02\t1\t2\t3\t4\nval_1.png\tn01\t0\t0\t5\t5\n");
  CHECK(detect_dataset_kind(root) == DatasetKind::tiny_imagenet);

  const Splits splits = open_tiny_imagenet(root, 3);
  REQUIRE(splits.train->size() == 3);
  REQUIRE(splits.val->size() == 2);
  CHECK(splits.train->description() == "Tiny-ImageNet train (" + root + ", 3 images)");
  CHECK(splits.val->description() == "Tiny-ImageNet val (" + root + ", 2 images)");
  CHECK(splits.train->num_classes() == 2);
  CHECK(splits.train->height() == 64);
  CHECK(splits.train->get(0).label == 0);
  CHECK(splits.train->get(2).label == 1);
  CHECK(splits.val->get(0).label == 1);
  CHECK(splits.val->get(0).image.pixels == b.pixels);
  CHECK(splits.val->get(1).label == 0);

  SUBCASE("an annotation naming an unknown class") {
    write_text(root + "/val/val_annotations.txt", "val_0.png\tn09\t1\t2\t3\t4\n");
    CHECK_THROWS_WITH_AS(open_tiny_imagenet(root, 3), doctest::Contains("val_annotations.txt line 1: class n09"), Error);
  }
  SUBCASE("an image of the wrong size") {
    write_png(root + "/train/n02/images/n02_1.png", random_image(32, 64, 3, rng));
    CHECK_THROWS_WITH_AS(open_tiny_imagenet(root, 3).train->get(2), doctest::Contains("n02_1.png is 64x32"), Error);
  }
}

TEST_CASE("the format is detected from what the directory holds") {
  const std::string root = testing::scratch_dir("detect");
  fs::create_directories(root + "/c10/cifar-10-batches-bin");
  write_text(root + "/c10/cifar-10-batches-bin/data_batch_1.bin", "");
  CHECK(detect_dataset_kind(root + "/c10") == DatasetKind::cifar10);
  write_text(root + "/c100/train.bin", "");
  write_text(root + "/c100/test.bin", "");
  CHECK(detect_dataset_kind(root + "/c100") == DatasetKind::cifar100);
  write_text(root + "/mnist/raw/train-images-idx3-ubyte.gz", "");
  CHECK(detect_dataset_kind(root + "/mnist") == DatasetKind::idx);
  fs::create_directories(root + "/folder/train/cat");
  CHECK(detect_dataset_kind(root + "/folder") == DatasetKind::image_folder);
  fs::create_directories(root + "/empty");
  CHECK_THROWS_WITH_AS(detect_dataset_kind(root + "/empty"), doctest::Contains("looked for data_batch_1.bin"), Error);

  CHECK(parse_dataset_kind("tiny-imagenet") == DatasetKind::tiny_imagenet);
  CHECK(std::string(to_string(DatasetKind::image_folder)) == "imagefolder");
  CHECK_THROWS_WITH_AS(parse_dataset_kind("imagenet"), doctest::Contains("cifar10, cifar100, idx"), Error);
}
