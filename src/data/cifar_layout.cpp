// Where CIFAR-10 and CIFAR-100 are under a path, in which layout, and so which reader reads
// them: cifar_reader.cpp the binary version, cifar_python_reader.cpp the Python version.
#include "cifar_layout.h"

#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/regular_file.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/data/tar_archive.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

struct LayoutNames {
  const char* name;                // "CIFAR-10"
  const char* binary_file;         // a file only the binary version has
  const char* binary_companion;    // and a second one where that name alone is too common
  const char* binary_folder;       // what the binary archive unpacks to
  const char* binary_archive;
  const char* python_file;
  const char* python_companion;
  const char* python_folder;       // what the Python archive unpacks to
  const char* python_archive;      // torchvision's download
};

const LayoutNames& names_of(CifarVersion version) {
  static const LayoutNames cifar10{"CIFAR-10", "data_batch_1.bin", nullptr,
                                   "cifar-10-batches-bin", "cifar-10-binary.tar.gz",
                                   "data_batch_1", nullptr, "cifar-10-batches-py",
                                   "cifar-10-python.tar.gz"};
  static const LayoutNames cifar100{"CIFAR-100", "train.bin", "test.bin", "cifar-100-binary",
                                    "cifar-100-binary.tar.gz", "train", "meta",
                                    "cifar-100-python", "cifar-100-python.tar.gz"};
  return version == CifarVersion::cifar10 ? cifar10 : cifar100;
}

// Anything of that name counts: the reader then refuses what is not a regular file, saying what
// it is.
bool holds(const std::string& dir, const char* file, const char* companion) {
  return path_exists(join_path(dir, file)) &&
         (!companion || path_exists(join_path(dir, companion)));
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

Splits open_cifar(const std::string& path, CifarVersion version) {
  const CifarLocation found = locate_cifar(path, version);
  switch (found.layout) {
    case CifarLayout::binary: return read_cifar_binary(found.path, version);
    case CifarLayout::python_folder:
    case CifarLayout::python_archive: return read_cifar_python(found, version);
    case CifarLayout::none: break;
  }
  const LayoutNames& names = names_of(version);
  if (!is_directory(path) && !is_regular_file(path))
    fail("data directory ", path, " does not exist");
  fail("no ", names.name, " files in ", path, ": looked for ", cifar_layouts_looked_for(version),
       ". Download ", names.python_archive, " (what torchvision downloads; read as it is or "
       "unpacked) or ", names.binary_archive, " from https://www.cs.toronto.edu/~kriz/cifar.html; "
       "docs/data.md shows the layouts");
}

}  // namespace

CifarLocation locate_cifar(const std::string& path, CifarVersion version) {
  const LayoutNames& names = names_of(version);
  if (is_regular_file(path)) {
    const std::string folder = names.python_folder;
    bool archive = base_name(path) == names.python_archive;
    if (!archive) {
      const std::optional<std::string> first = first_tar_entry(path);
      archive = first && (*first == folder || first->rfind(folder + "/", 0) == 0);
    }
    return archive ? CifarLocation{CifarLayout::python_archive, path} : CifarLocation{};
  }
  if (!is_directory(path)) return {};
  const std::string binary_folder = join_path(path, names.binary_folder);
  const std::string python_folder = join_path(path, names.python_folder);
  const std::string archive = join_path(path, names.python_archive);
  if (holds(path, names.binary_file, names.binary_companion)) return {CifarLayout::binary, path};
  if (holds(binary_folder, names.binary_file, nullptr)) return {CifarLayout::binary, binary_folder};
  if (holds(path, names.python_file, names.python_companion))
    return {CifarLayout::python_folder, path};
  if (holds(python_folder, names.python_file, nullptr))
    return {CifarLayout::python_folder, python_folder};
  if (is_regular_file(archive)) return {CifarLayout::python_archive, archive};
  return {};
}

std::string cifar_layouts_looked_for(CifarVersion version) {
  const LayoutNames& n = names_of(version);
  auto files = [](const char* file, const char* companion) {
    return std::string(file) + (companion ? std::string(" and ") + companion : "");
  };
  return files(n.binary_file, n.binary_companion) + " (" + n.name + " binary, also in " +
         n.binary_folder + "/), " + files(n.python_file, n.python_companion) + " (" + n.name +
         " as torchvision downloads it, also in " + n.python_folder + "/) and " +
         n.python_archive + " (read in place)";
}

Splits open_cifar10(const std::string& path) { return open_cifar(path, CifarVersion::cifar10); }

Splits open_cifar100(const std::string& path) { return open_cifar(path, CifarVersion::cifar100); }

}  // namespace rddp::data
