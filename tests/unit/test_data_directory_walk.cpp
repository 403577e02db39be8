// Image folders whose symbolic links lead back into themselves: each folder is listed once, the
// walk ends, every image keeps the class it lies in, and the skipped links are said.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/error.h"
#include "support/finishes_within.h"
#include "support/scratch_dir.h"
#include "support/test_files.h"

using namespace rddp;
using namespace rddp::data;
namespace fs = std::filesystem;

namespace {

// Listing needs no pixels: an empty file with an image's extension is listed as one.
void touch(const std::string& path) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << "";
}

// (path below root, label) of each listed file, in order.
std::vector<std::pair<std::string, int>> listed(const FolderListing& listing,
                                                const std::string& root) {
  std::vector<std::pair<std::string, int>> files;
  for (const LabelledFile& file : listing.files)
    files.emplace_back(file.path.substr(root.size() + 1), int(file.label));
  return files;
}

FolderListing list_in_time(const std::string& root) {
  FolderListing listing;
  testing::finishes_within(60, "listing a folder with symbolic link loops",
                           [&] { listing = list_image_folder(root); });
  return listing;
}

}  // namespace

TEST_CASE("links back into the data set are skipped: the walk ends and labels stay right") {
  const std::string data = testing::scratch_dir("loops");
  const std::string train = data + "/train";
  touch(train + "/a/1.png");
  touch(train + "/a/sub/2.png");
  touch(train + "/b/3.png");
  touch(data + "/val/b/4.png");
  fs::create_directory_symlink("..", train + "/a/up1");       // the split: a loop
  fs::create_directory_symlink("..", train + "/a/up2");       // two of them: 2^depth paths
  fs::create_directory_symlink(".", train + "/a/sub/self");   // a folder itself
  fs::create_directory_symlink("../b", train + "/a/to_b");    // another class
  fs::create_directory_symlink("../../..", train + "/a/sub/top");  // above the split (holds val/)

  const FolderListing listing = list_in_time(train);
  CHECK(listing.classes == std::vector<std::string>{"a", "b"});
  CHECK(listed(listing, train) ==
        std::vector<std::pair<std::string, int>>{{"a/1.png", 0}, {"a/sub/2.png", 0}, {"b/3.png", 1}});
  CHECK(listing.skipped_links == 5);
  CHECK(listing.first_skipped_link == train + "/a/sub/self -> .");
  CHECK(skipped_links_note(listing) ==
        "5 symbolic link(s) to folders already listed not followed (first: " + train +
            "/a/sub/self -> .)");
  // Rank 0's listing, sent to the other ranks, keeps the count.
  const FolderListing round_trip = decode_listing(encode_listing(listing));
  CHECK(round_trip.skipped_links == 5);
  CHECK(round_trip.first_skipped_link == listing.first_skipped_link);
}

TEST_CASE("a link to a folder outside the data set is followed once, in the link's class") {
  const std::string data = testing::scratch_dir("outside");
  const std::string train = data + "/train", outside = data + "/elsewhere";
  touch(train + "/a/1.png");
  touch(train + "/b/3.png");
  touch(outside + "/5.png");
  touch(outside + "/x/4.png");
  fs::create_directory_symlink(outside, train + "/a/ext");
  fs::create_directory_symlink(outside, train + "/b/ext2");  // the same folder again
  fs::create_directory_symlink(outside + "/x", train + "/b/ext3");  // inside one already walked

  const FolderListing listing = list_in_time(train);
  // sorted(os.walk(a, followlinks=True)): a, a/ext, a/ext/x, each folder's files sorted.
  CHECK(listed(listing, train) == std::vector<std::pair<std::string, int>>{
                                      {"a/1.png", 0}, {"a/ext/5.png", 0}, {"a/ext/x/4.png", 0},
                                      {"b/3.png", 1}});
  CHECK(listing.skipped_links == 2);
  CHECK(listing.first_skipped_link == train + "/b/ext2 -> " + outside);
}

TEST_CASE("the data set's description says how many links were skipped") {
  const std::string data = testing::scratch_dir("description");
  touch(data + "/train/a/1.png");
  touch(data + "/train/b/2.png");
  touch(data + "/val/a/3.png");
  touch(data + "/val/b/4.png");
  fs::create_directory_symlink("..", data + "/train/b/loop");
  Splits splits;
  testing::finishes_within(60, "opening an image folder with a link loop",
                           [&] { splits = open_image_folder(data, 3); });
  CHECK(splits.train->size() == 2);
  CHECK(splits.train->description().find("1 symbolic link(s) to folders already listed not "
                                          "followed (first: " + data + "/train/b/loop -> ..)") !=
        std::string::npos);
  CHECK(splits.val->description().find("symbolic link") == std::string::npos);
}

TEST_CASE("a class folder that is another class, or the split itself, is refused") {
  const std::string data = testing::scratch_dir("class_links");
  const std::string train = data + "/train";
  touch(train + "/a/1.png");
  touch(train + "/b/2.png");
  SUBCASE("two classes, one folder") {
    fs::create_directory_symlink("a", train + "/c");
    CHECK_THROWS_WITH_AS(list_in_time(train), doctest::Contains("are the same folder"), Error);
  }
  SUBCASE("a class that is the split") {
    fs::create_directory_symlink(".", train + "/c");
    CHECK_THROWS_WITH_AS(list_in_time(train), doctest::Contains("/train/c is a symbolic link to"),
                         Error);
  }
}

TEST_CASE("FIFOs, sockets and devices named like images are refused when listed") {
  const std::string data = testing::scratch_dir("special");
  const std::string train = data + "/train";
  touch(train + "/a/1.png");
  touch(train + "/b/2.png");
  SUBCASE("a FIFO") {
    REQUIRE(mkfifo((train + "/a/pipe.jpg").c_str(), 0644) == 0);
    CHECK_THROWS_WITH_AS(list_in_time(train), doctest::Contains("pipe.jpg"), Error);
  }
  SUBCASE("a socket") {
    const std::string path = train + "/b/socket.png";
    testing::make_socket(path);
    CHECK_THROWS_WITH_AS(list_in_time(train),
                         doctest::Contains(("FIFOs, sockets or devices, not files (" + path).c_str()),
                         Error);
  }
  // A file that is a link to a FIFO is listed, and refused when read (test_data_regular_file).
}

TEST_CASE("a folder too deep to name is refused, not left out unsaid") {
  // rm, which walks by descriptor, removes what std::filesystem cannot name (also after a run
  // that stopped before its end).
  const std::string parent = std::string(RDDP_TEST_TMP) + "/data_directory_walk";
  const std::string remove = "rm -rf '" + parent + "/deep'";
  REQUIRE(std::system(remove.c_str()) == 0);
  const std::string data = testing::scratch_dir("deep");
  touch(data + "/train/a/1.png");
  touch(data + "/train/b/2.png");
  // 900 levels of 5 characters: paths past PATH_MAX (4096), made one level at a time.
  int fd = open((data + "/train/a").c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(fd >= 0);
  bool made = true;
  for (int level = 0; level < 900 && made; ++level) {
    made = mkdirat(fd, "dddd", 0755) == 0;
    const int next = openat(fd, "dddd", O_RDONLY | O_DIRECTORY);
    close(fd);
    fd = next;
    made = made && fd >= 0;
  }
  REQUIRE(made);
  const int image = openat(fd, "deep.png", O_WRONLY | O_CREAT, 0644);
  CHECK(image >= 0);
  close(image);
  close(fd);
  CHECK_THROWS_WITH_AS(list_in_time(data + "/train"), doctest::Contains("File name too long"),
                       Error);
  CHECK(std::system(remove.c_str()) == 0);
}
