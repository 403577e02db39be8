#include <string>

#include "class_difference.h"
#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

void check_channels(int channels) {
  if (channels != 1 && channels != 3)
    fail("image folders decode to 3 channels (RGB) or 1 (greyscale), not ", channels);
}

// "; N symbolic link(s) ... not followed (...)" for a description, or "".
std::string note(const FolderListing& listing) {
  const std::string text = skipped_links_note(listing);
  return text.empty() ? "" : "; " + text;
}

}  // namespace

Splits open_image_folder(const std::string& dir, int channels, const FolderLister& list) {
  check_channels(channels);
  if (!is_directory(dir)) fail("data directory ", dir, " does not exist");
  const std::string train_dir = join_path(dir, "train");
  if (!is_directory(train_dir))
    fail("image folder data set ", dir, " has no train/ subdirectory: it must hold train/<class>/"
         "<images> and, for validation, val/<class>/<images> (docs/data.md)");
  FolderListing train = list(train_dir, false);
  const int num_classes = int(train.classes.size());
  // Described before the files move into the data set: arguments are evaluated in no set order.
  std::string train_description = "image folder train (" + train_dir + ", " +
                                  std::to_string(train.files.size()) + " images, " +
                                  std::to_string(num_classes) + " classes" +
                                  note(train) + ")";
  Splits splits;
  splits.train = make_file_dataset(std::move(train_description), std::move(train.files),
                                   num_classes, channels);

  const std::string val_dir = join_path(dir, "val");
  FolderListing val = list(val_dir, true);
  if (!val.present) return splits;
  // Labels are positions in the sorted class list, so both splits need the same list or the
  // same label would mean different classes.
  if (val.classes != train.classes)
    fail("the class folders of ", val_dir, " (", val.classes.size(), ") differ from those of ",
         train_dir, " (", train.classes.size(), "): ",
         class_difference("train/", train.classes, "val/", val.classes),
         "; both splits need the same class folders (an empty class folder needs at least one "
         "image)");
  std::string val_description = "image folder val (" + val_dir + ", " +
                                std::to_string(val.files.size()) + " images" + note(val) + ")";
  splits.val = make_file_dataset(std::move(val_description), std::move(val.files), num_classes,
                                 channels);
  return splits;
}

}  // namespace rddp::data
