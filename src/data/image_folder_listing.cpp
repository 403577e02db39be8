// The file list of torchvision's ImageFolder (torchvision/datasets/folder.py: find_classes and
// make_dataset): classes are the sorted names of the root's subdirectories; each class
// directory is walked as sorted(os.walk(class_dir, followlinks=True)) does it, that is, every
// folder below it ordered by its full path, and in each folder the sorted file names.
#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/image_decode.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace fs = std::filesystem;

namespace {

struct Entries {
  std::vector<std::string> directories;  // names, sorted
  std::vector<std::string> files;
};

Entries read_directory(const std::string& dir) {
  Entries entries;
  std::error_code error;
  fs::directory_iterator it(dir, error), end;
  if (error) fail("cannot list ", dir, ": ", error.message());
  for (; it != end; it.increment(error)) {
    // is_directory follows symbolic links, as os.walk(followlinks=True) does.
    std::error_code kind_error;
    if (it->is_directory(kind_error))
      entries.directories.push_back(it->path().filename().string());
    else
      entries.files.push_back(it->path().filename().string());
  }
  if (error) fail("cannot list ", dir, ": ", error.message());
  std::sort(entries.directories.begin(), entries.directories.end());
  std::sort(entries.files.begin(), entries.files.end());
  return entries;
}

void collect_folders(const std::string& dir, std::vector<std::string>& folders) {
  folders.push_back(dir);
  for (const std::string& name : read_directory(dir).directories)
    collect_folders(join_path(dir, name), folders);
}

}  // namespace

FolderListing list_image_folder(const std::string& root, bool may_be_absent) {
  FolderListing listing;
  if (!is_directory(root)) {
    if (!may_be_absent) fail("image folder ", root, " does not exist or is not a directory");
    listing.present = false;
    return listing;
  }
  listing.classes = read_directory(root).directories;
  if (listing.classes.empty())
    fail("image folder ", root, " has no class subdirectories: it must hold one folder per "
         "class with that class's images in it (ImageFolder's layout, data/README.md)");

  std::vector<std::string> empty_classes, undecodable;
  for (size_t label = 0; label < listing.classes.size(); ++label) {
    std::vector<std::string> folders;
    collect_folders(join_path(root, listing.classes[label]), folders);
    // Python compares the strings code point by code point, which for UTF-8 is byte order,
    // std::string's order too.
    std::sort(folders.begin(), folders.end());
    const size_t before = listing.files.size();
    for (const std::string& folder : folders) {
      for (const std::string& name : read_directory(folder).files) {
        const std::string path = join_path(folder, name);
        if (has_decodable_extension(name))
          listing.files.push_back({path, int32_t(label)});
        else if (has_undecodable_image_extension(name))
          undecodable.push_back(path);
      }
    }
    if (listing.files.size() == before) empty_classes.push_back(listing.classes[label]);
  }
  if (!undecodable.empty())
    fail("image folder ", root, " holds ", undecodable.size(), " TIFF or WebP images (first: ",
         undecodable.front(), ") that PyTorch would read but resnet_ddp does not decode; convert "
         "them to PNG or JPEG, or remove them");
  if (!empty_classes.empty()) {
    std::string names;
    for (size_t i = 0; i < empty_classes.size() && i < 5; ++i)
      names += (i ? ", " : "") + join_path(root, empty_classes[i]);
    if (empty_classes.size() > 5) names += " and " + std::to_string(empty_classes.size() - 5) + " more";
    fail("image folder ", root, ": no images in the class folder(s) ", names,
         "; images need one of the extensions .jpg .jpeg .png .ppm .bmp .pgm (any case). "
         "Add images or remove the empty folders");
  }
  return listing;
}

}  // namespace rddp::data
