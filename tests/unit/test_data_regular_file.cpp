// Data files that are not regular files (FIFOs, sockets, devices, directories) are refused,
// naming the file and what it is, without blocking; names with control characters are shown
// escaped; an image file too large for any image is refused before it is read.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/image_decode.h"
#include "resnet_ddp/data/pack.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/error.h"
#include "support/finishes_within.h"
#include "support/scratch_dir.h"
#include "support/test_files.h"

using namespace rddp;
using namespace rddp::data;
using testing::make_socket;
using testing::write_text;
namespace fs = std::filesystem;

namespace {

// The message `work` throws, within 20 s: a read that blocks fails the test there.
template <typename Work>
std::string error_of(Work work) {
  std::string message;
  testing::finishes_within(20, "a read of a file that is not a regular file", [&] {
    try {
      work();
    } catch (const Error& e) {
      message = e.what();
    }
  });
  return message;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("an image that is a FIFO, a socket, a device or a folder is refused without blocking") {
  const std::string dir = testing::scratch_dir("image");
  const std::string fifo = dir + "/pipe.jpg", socket_path = dir + "/socket.png";
  REQUIRE(mkfifo(fifo.c_str(), 0644) == 0);  // no writer: an open for reading would block
  make_socket(socket_path);
  fs::create_symlink(fifo, dir + "/link-to-pipe.jpg");
  fs::create_symlink("/dev/zero", dir + "/zero.png");  // reads never end
  fs::create_directory(dir + "/folder.png");

  std::string message = error_of([&] { decode_image_file(dir + "/link-to-pipe.jpg", 3); });
  CHECK(contains(message, "link-to-pipe.jpg: it is a FIFO (named pipe), not a regular file"));
  message = error_of([&] { decode_image_file(fifo, 3); });
  CHECK(contains(message, "pipe.jpg: it is a FIFO (named pipe), not a regular file"));
  message = error_of([&] { decode_image_file(socket_path, 3); });
  CHECK(contains(message, "socket.png: it is a socket, not a regular file"));
  message = error_of([&] { decode_image_file(dir + "/zero.png", 3); });
  CHECK(contains(message, "zero.png: it is a character device, not a regular file"));
  message = error_of([&] { decode_image_file(dir + "/folder.png", 3); });
  CHECK(contains(message, "folder.png: it is a directory, not a regular file"));
  CHECK(contains(message, "replace it with the file itself"));
}

TEST_CASE("an idx file that is there but is no regular file says what it is, not that it is missing") {
  const std::string dir = testing::scratch_dir("idx");
  for (const char* name : {"train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                           "t10k-labels-idx1-ubyte"})
    write_text(dir + "/" + name, "");
  SUBCASE("a folder") {
    fs::create_directory(dir + "/train-images-idx3-ubyte");
    CHECK(contains(error_of([&] { open_idx(dir); }),
                   "train-images-idx3-ubyte is a directory, not a regular file"));
  }
  SUBCASE("a FIFO") {
    REQUIRE(mkfifo((dir + "/train-images-idx3-ubyte").c_str(), 0644) == 0);
    CHECK(contains(error_of([&] { open_idx(dir); }),
                   "train-images-idx3-ubyte is a FIFO (named pipe), not a regular file"));
  }
  SUBCASE("a link to /dev/urandom, whose data never ends") {
    fs::create_symlink("/dev/urandom", dir + "/train-images-idx3-ubyte.gz");
    CHECK(contains(error_of([&] { open_idx(dir); }),
                   "train-images-idx3-ubyte.gz is a character device, not a regular file"));
  }
  SUBCASE("a link to nothing") {
    fs::create_symlink(dir + "/gone", dir + "/train-images-idx3-ubyte");
    CHECK(contains(error_of([&] { open_idx(dir); }),
                   "train-images-idx3-ubyte is a symbolic link to a missing file"));
  }
}

TEST_CASE("CIFAR files, Tiny-ImageNet's lists and packs that are FIFOs are refused too") {
  const std::string dir = testing::scratch_dir("others");
  REQUIRE(mkfifo((dir + "/data_batch_1.bin").c_str(), 0644) == 0);
  CHECK(contains(error_of([&] { open_cifar10(dir); }),
                 "data_batch_1.bin: it is a FIFO (named pipe), not a regular file"));

  const std::string tiny = testing::scratch_dir("tiny");
  write_text(tiny + "/train/n01/images/a.JPEG", "");
  REQUIRE(mkfifo((tiny + "/wnids.txt").c_str(), 0644) == 0);
  CHECK(contains(error_of([&] { open_tiny_imagenet(tiny, 3); }),
                 "wnids.txt: it is a FIFO (named pipe), not a regular file"));

  const std::string packed = testing::scratch_dir("packed");
  REQUIRE(mkfifo((packed + "/train.rddp-pack").c_str(), 0644) == 0);
  CHECK(contains(error_of([&] { open_packed(packed); }),
                 "train.rddp-pack: it is a FIFO (named pipe), not a regular file"));
}

TEST_CASE("control characters in a file name are escaped in messages") {
  const std::string dir = testing::scratch_dir("names");
  const std::string name = dir + "/bad\nname\x1b[31m.png";
  write_text(name, "not an image");
  const std::string message = error_of([&] { decode_image_file(name, 3); });
  CHECK(contains(message, "bad\\nname\\x1b[31m.png"));
  CHECK(message.find('\n') == std::string::npos);
  CHECK(message.find('\x1b') == std::string::npos);
  // Loader messages name the sample with the data set's source(), escaped as well.
  const DatasetPtr files = make_file_dataset("test", {{name, 0}}, 1, 3);
  CHECK(files->source(0) == dir + "/bad\\nname\\x1b[31m.png");
}

TEST_CASE("an image file larger than any image can be is refused before it is read") {
  const std::string dir = testing::scratch_dir("huge");
  const std::string path = dir + "/huge.png";
  write_text(path, "");
  fs::resize_file(path, kMaxImageFileBytes + 1);  // sparse: no disk space
  const std::string message = error_of([&] { decode_image_file(path, 3); });
  CHECK(contains(message, "huge.png is 2147483649 bytes, more than the 2147483648 bytes that an "
                          "image of at most 178,956,970 pixels"));
}
