// Tiny-ImageNet-200 as distributed (tiny-imagenet-200.zip): wnids.txt lists the 200 classes;
// train/<wnid>/images/*.JPEG; val/images/*.JPEG with val/val_annotations.txt giving each
// file's wnid; every image 64x64. Labels follow the sorted train/ folder names, as
// ImageFolder(train/) numbers them, so a model trained either way means the same by label k.
#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "class_difference.h"
#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/data/regular_file.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/printable.h"

namespace rddp::data {

namespace {

constexpr int kSide = 64;
// wnids.txt and val_annotations.txt hold a few hundred kilobytes.
constexpr uint64_t kMaxListBytes = uint64_t(1) << 28;

// The file's text, read as a regular file (regular_file.h), so that a pipe named like it
// cannot block the run. `missing` says what is lost when there is no such file.
std::istringstream read_list(const std::string& path, const char* missing) {
  if (!path_exists(path)) fail("cannot open ", path, ": ", missing);
  const std::vector<uint8_t> bytes =
      read_file(path, kMaxListBytes, "that a Tiny-ImageNet list may have (it holds a few "
                "hundred kilobytes)");
  return std::istringstream(std::string(bytes.begin(), bytes.end()));
}

std::vector<std::string> read_wnids(const std::string& path) {
  std::istringstream in = read_list(path, "Tiny-ImageNet's class list is missing");
  std::vector<std::string> wnids;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string wnid;
    if (fields >> wnid) wnids.push_back(wnid);
  }
  return wnids;
}

}  // namespace

Splits open_tiny_imagenet(const std::string& dir, int channels, const FolderLister& list) {
  if (channels != 1 && channels != 3)
    fail("Tiny-ImageNet decodes to 3 channels (RGB) or 1 (greyscale), not ", channels);
  if (!is_directory(dir)) fail("data directory ", dir, " does not exist");
  const std::string wnids_path = join_path(dir, "wnids.txt");
  std::vector<std::string> wnids = read_wnids(wnids_path);
  FolderListing train = list(join_path(dir, "train"), false);
  std::sort(wnids.begin(), wnids.end());
  if (wnids != train.classes)
    fail(wnids_path, " lists ", wnids.size(), " classes but ", join_path(dir, "train"), " has ",
         train.classes.size(), " class folders, not the same ones (",
         class_difference("wnids.txt", wnids, "train/", train.classes),
         "): unpack tiny-imagenet-200.zip again");
  const int num_classes = int(train.classes.size());
  std::map<std::string, int32_t> label_of;
  for (size_t i = 0; i < train.classes.size(); ++i) label_of[train.classes[i]] = int32_t(i);

  // Described before the files move into the data set: arguments are evaluated in no set order.
  const std::string skipped = skipped_links_note(train);
  std::string train_description = "Tiny-ImageNet train (" + dir + ", " +
                                  std::to_string(train.files.size()) + " images" +
                                  (skipped.empty() ? "" : "; " + skipped) + ")";
  Splits splits;
  splits.train = make_file_dataset(std::move(train_description), std::move(train.files),
                                   num_classes, channels, kSide, kSide);

  const std::string annotations = join_path(dir, "val/val_annotations.txt");
  std::istringstream in =
      read_list(annotations, "Tiny-ImageNet's validation labels are missing");
  std::vector<LabelledFile> val;
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    std::istringstream fields(line);
    std::string file, wnid;
    if (!(fields >> file)) continue;  // blank line
    if (!(fields >> wnid))
      fail(annotations, " line ", number, ": expected a file name and a wnid, found '",
           printable(line), "'");
    const auto found = label_of.find(wnid);
    if (found == label_of.end())
      fail(annotations, " line ", number, ": class ", printable(wnid), " of ", printable(file),
           " is not one of the ",
           num_classes, " training classes");
    val.push_back({join_path(dir, "val/images/" + file), found->second});
  }
  if (val.empty()) fail(annotations, " lists no images");
  std::string val_description =
      "Tiny-ImageNet val (" + dir + ", " + std::to_string(val.size()) + " images)";
  splits.val = make_file_dataset(std::move(val_description), std::move(val), num_classes,
                                 channels, kSide, kSide);
  return splits;
}

}  // namespace rddp::data
