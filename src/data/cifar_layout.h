#pragma once
// Where a path holds CIFAR-10 or CIFAR-100, and in which of the layouts users have it: the
// binary version, or the Python version as torchvision downloads it (the unpacked folder or
// the .tar.gz archive itself, read in place).
#include <string>

#include "resnet_ddp/data/dataset.h"

namespace rddp::data {

enum class CifarVersion { cifar10, cifar100 };

enum class CifarLayout {
  none,            // not found
  binary,          // data_batch_1.bin ... / train.bin, test.bin
  python_folder,   // cifar-10-batches-py/ or cifar-100-python/ as unpacked
  python_archive,  // cifar-10-python.tar.gz or cifar-100-python.tar.gz
};

struct CifarLocation {
  CifarLayout layout = CifarLayout::none;
  std::string path;  // the folder holding the files, or the archive
};

// Looks, in this order, for the binary files in `path` and in its cifar-10-batches-bin/
// (cifar-100-binary/); the Python files in `path` and in its cifar-10-batches-py/
// (cifar-100-python/); the archive cifar-10-python.tar.gz (cifar-100-python.tar.gz) in `path`.
// A `path` that is a file is the archive when it has that name or its first entry is that
// folder. Looks only at names; nothing is read but a file's first tar header.
CifarLocation locate_cifar(const std::string& path, CifarVersion version);

// What locate_cifar looked for, for messages: "data_batch_1.bin (CIFAR-10 binary, also in
// cifar-10-batches-bin/), data_batch_1 (... as torchvision downloads it ...)".
std::string cifar_layouts_looked_for(CifarVersion version);

// The readers of each layout, given the folder or archive locate_cifar found.
Splits read_cifar_binary(const std::string& dir, CifarVersion version);
Splits read_cifar_python(const CifarLocation& location, CifarVersion version);

}  // namespace rddp::data
