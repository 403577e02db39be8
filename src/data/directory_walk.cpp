#include "directory_walk.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/printable.h"

namespace rddp::data {

namespace fs = std::filesystem;

namespace {

using Key = std::pair<dev_t, ino_t>;

bool key_of(const std::string& path, Key& key) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return false;
  key = {info.st_dev, info.st_ino};
  return true;
}

struct Entries {
  std::vector<std::string> folders;         // real folders, not links
  std::vector<std::string> linked_folders;  // symbolic links to folders
  std::vector<std::string> files;           // everything else
  std::vector<std::string> special_files;
};

// One folder's entries by name, sorted. The entry types come from the directory itself where
// the file system records them, so only links cost a stat.
Entries read_entries(const std::string& dir) {
  Entries entries;
  std::error_code error;
  fs::directory_iterator it(dir, error), end;
  if (error) fail("cannot list ", printable(dir), ": ", error.message());
  for (; it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    std::error_code kind_error;
    const fs::file_type type = it->symlink_status(kind_error).type();
    // An entry that cannot be looked at (a path too long to name) would drop its images unsaid;
    // one that vanished since the listing has none.
    if (kind_error && kind_error != std::errc::no_such_file_or_directory)
      fail("cannot list ", printable(it->path().string()), ": ", kind_error.message());
    if (type == fs::file_type::directory) {
      entries.folders.push_back(name);
    } else if (type == fs::file_type::symlink && it->is_directory(kind_error)) {
      entries.linked_folders.push_back(name);
    } else {
      entries.files.push_back(name);
      if (type == fs::file_type::fifo || type == fs::file_type::socket ||
          type == fs::file_type::block || type == fs::file_type::character)
        entries.special_files.push_back(name);
    }
  }
  if (error) fail("cannot list ", printable(dir), ": ", error.message());
  std::sort(entries.folders.begin(), entries.folders.end());
  std::sort(entries.linked_folders.begin(), entries.linked_folders.end());
  std::sort(entries.files.begin(), entries.files.end());
  std::sort(entries.special_files.begin(), entries.special_files.end());
  return entries;
}

class SplitWalker {
 public:
  explicit SplitWalker(size_t tops) { walk_.folders.resize(tops); }

  // Marks a folder as walked; false if it was already.
  bool mark(const Key& key) { return visited_.insert(key).second; }

  void walk(size_t top, const std::string& dir) {
    Entries entries = read_entries(dir);
    for (const std::string& name : entries.folders) {
      const std::string path = join_path(dir, name);
      Key key;
      // A folder seen twice without a link is a bind mount looping back; one that vanished
      // since it was listed has nothing to walk. Any other failure (a path too long to open)
      // would drop its images unsaid.
      if (!key_of(path, key)) {
        if (errno == ENOENT) continue;
        fail("cannot list ", printable(path), ": ", std::strerror(errno));
      }
      if (mark(key)) {
        walk(top, path);
      } else {
        skip(path, "a folder already listed");
      }
    }
    for (const std::string& name : entries.linked_folders)
      pending_.push_back({top, join_path(dir, name)});
    walk_.folders[top].push_back(
        {dir, std::move(entries.files), std::move(entries.special_files)});
  }

  // Links last, once every real folder of the split is known.
  void follow_links() {
    for (size_t i = 0; i < pending_.size(); ++i) {
      const auto [top, path] = pending_[i];
      Key key;
      std::error_code error;
      const std::string target = fs::read_symlink(path, error).string();
      if (!key_of(path, key) || !mark(key)) {
        skip(path, target);
        continue;
      }
      walk(top, path);
    }
  }

  SplitWalk finish() {
    for (auto& folders : walk_.folders)
      // Python compares the strings code point by code point, which for UTF-8 is byte order,
      // std::string's order too.
      std::sort(folders.begin(), folders.end(),
                [](const WalkedFolder& a, const WalkedFolder& b) { return a.path < b.path; });
    return std::move(walk_);
  }

 private:
  void skip(const std::string& path, const std::string& target) {
    if (walk_.skipped_links++ == 0) walk_.first_skipped_link = path + " -> " + target;
  }

  SplitWalk walk_;
  std::set<Key> visited_;
  std::vector<std::pair<size_t, std::string>> pending_;
};

}  // namespace

std::vector<std::string> list_subfolders(const std::string& dir) {
  Entries entries = read_entries(dir);
  std::vector<std::string> names = std::move(entries.folders);
  names.insert(names.end(), entries.linked_folders.begin(), entries.linked_folders.end());
  std::sort(names.begin(), names.end());
  return names;
}

SplitWalk walk_split(const std::string& root, const std::vector<std::string>& tops) {
  SplitWalker walker(tops.size());
  // The split and every folder above it: a link to any of them leads back into the split.
  std::vector<Key> split_and_above;
  Key key;
  std::string up = root;
  while (split_and_above.size() < 4096 && key_of(up, key) &&
         (split_and_above.empty() || key != split_and_above.back())) {
    split_and_above.push_back(key);
    walker.mark(key);
    up = join_path(up, "..");
  }
  std::vector<Key> top_keys(tops.size());
  for (size_t t = 0; t < tops.size(); ++t) {
    if (!key_of(tops[t], top_keys[t]))
      fail("cannot list ", printable(tops[t]), ": it vanished while the data set was listed");
    for (size_t u = 0; u < t; ++u)
      if (top_keys[u] == top_keys[t])
        fail("the class folders ", printable(tops[u]), " and ", printable(tops[t]),
             " are the same folder (one is a symbolic link to the other): each class needs a "
             "folder of its own");
    if (std::find(split_and_above.begin(), split_and_above.end(), top_keys[t]) !=
        split_and_above.end())
      fail("the class folder ", printable(tops[t]), " is a symbolic link to ", printable(root),
           " or a folder above it, which holds every class: each class needs a folder of its "
           "own");
  }
  for (const Key& top_key : top_keys) walker.mark(top_key);
  for (size_t t = 0; t < tops.size(); ++t) walker.walk(t, tops[t]);
  walker.follow_links();
  return walker.finish();
}

}  // namespace rddp::data
