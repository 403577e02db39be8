#pragma once
// The folders of an image folder's classes, walked as torchvision's
// sorted(os.walk(class_dir, followlinks=True)) walks them, but each directory once by its
// (device, inode), so that no symbolic link can make the walk endless or list a folder twice:
//   - every real folder below a class folder is walked, in the class it lies in;
//   - a symbolic link to a folder is followed, as os.walk(followlinks=True) does, after every
//     real folder of the split is known, unless it leads to a folder already walked: the split
//     itself, a class folder, any folder inside the split (whose images keep their own class),
//     or the target of an earlier link. Those links are skipped and counted.
// So a link loop ends at once, no image is listed under two classes, and a link to a folder
// outside the data set brings its images into the class the link is in.
#include <cstddef>
#include <string>
#include <vector>

namespace rddp::data {

struct WalkedFolder {
  std::string path;                // as reached: the class folder joined with names and links
  std::vector<std::string> files;  // names of the entries that are no folder, sorted
  std::vector<std::string> special_files;  // of those, FIFOs, sockets and devices
};

struct SplitWalk {
  // Per top folder (class), its folders sorted by path, the top first.
  std::vector<std::vector<WalkedFolder>> folders;
  size_t skipped_links = 0;
  std::string first_skipped_link;  // "path -> target" of the first one skipped
};

// Walks each of `tops` (folders inside `root`). Throws Error naming a folder it cannot list.
SplitWalk walk_split(const std::string& root, const std::vector<std::string>& tops);

// The names of the folders directly inside `dir` (following links), sorted: the classes.
std::vector<std::string> list_subfolders(const std::string& dir);

}  // namespace rddp::data
