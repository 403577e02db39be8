// The file list of torchvision's ImageFolder (torchvision/datasets/folder.py: find_classes and
// make_dataset): classes are the sorted names of the root's subdirectories; each class
// directory is walked as sorted(os.walk(class_dir, followlinks=True)) does it, that is, every
// folder below it ordered by its full path, and in each folder the sorted file names. Where
// symbolic links lead back into the data set, each folder is walked once (directory_walk.h).
#include <string>
#include <vector>

#include "directory_walk.h"
#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/image_decode.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/printable.h"

namespace rddp::data {

namespace {

// "a, b, c and 4 more", each printable.
std::string first_few(const std::vector<std::string>& items) {
  std::string names;
  for (size_t i = 0; i < items.size() && i < 5; ++i) names += (i ? ", " : "") + printable(items[i]);
  if (items.size() > 5) names += " and " + std::to_string(items.size() - 5) + " more";
  return names;
}

}  // namespace

FolderListing list_image_folder(const std::string& root, bool may_be_absent) {
  FolderListing listing;
  if (!is_directory(root)) {
    if (!may_be_absent) fail("image folder ", root, " does not exist or is not a directory");
    listing.present = false;
    return listing;
  }
  listing.classes = list_subfolders(root);
  if (listing.classes.empty())
    fail("image folder ", root, " has no class subdirectories: it must hold one folder per "
         "class with that class's images in it (ImageFolder's layout, docs/data.md)");

  std::vector<std::string> tops;
  for (const std::string& name : listing.classes) tops.push_back(join_path(root, name));
  const SplitWalk walk = walk_split(root, tops);
  listing.skipped_links = walk.skipped_links;
  listing.first_skipped_link = printable(walk.first_skipped_link);

  std::vector<std::string> empty_classes, undecodable, special;
  for (size_t label = 0; label < listing.classes.size(); ++label) {
    const size_t before = listing.files.size();
    for (const WalkedFolder& folder : walk.folders[label]) {
      for (const std::string& name : folder.special_files)
        if (has_decodable_extension(name) || has_undecodable_image_extension(name))
          special.push_back(join_path(folder.path, name));
      for (const std::string& name : folder.files) {
        const std::string path = join_path(folder.path, name);
        if (has_decodable_extension(name))
          listing.files.push_back({path, int32_t(label)});
        else if (has_undecodable_image_extension(name))
          undecodable.push_back(path);
      }
    }
    if (listing.files.size() == before) empty_classes.push_back(tops[label]);
  }
  if (!special.empty())
    fail("image folder ", root, " holds ", special.size(), " entries named like images that are "
         "FIFOs, sockets or devices, not files (", first_few(special), "): reading one could "
         "block forever; replace them with the image files or remove them");
  if (!undecodable.empty())
    fail("image folder ", root, " holds ", undecodable.size(), " TIFF or WebP images (first: ",
         printable(undecodable.front()), ") that PyTorch would read but resnet_ddp does not "
         "decode; convert them to PNG or JPEG, or remove them");
  if (!empty_classes.empty())
    fail("image folder ", root, ": no images in the class folder(s) ", first_few(empty_classes),
         "; images need one of the extensions .jpg .jpeg .png .ppm .bmp .pgm (any case). "
         "Add images or remove the empty folders");
  return listing;
}

std::string skipped_links_note(const FolderListing& listing) {
  if (listing.skipped_links == 0) return "";
  return std::to_string(listing.skipped_links) + " symbolic link(s) to folders already listed "
         "not followed (first: " + listing.first_skipped_link + ")";
}

}  // namespace rddp::data
