#pragma once
// Readers for each on-disk format. Each returns the training split and, where the format has
// one, the validation split. Array formats (CIFAR, idx) are read into memory whole at open;
// image files are decoded when a sample is asked for.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "resnet_ddp/data/dataset.h"

namespace rddp::data {

// CIFAR in either version from https://www.cs.toronto.edu/~kriz/cifar.html. `path` holds the
// binary version's .bin files, or cifar-10-batches-bin/ (cifar-100-binary/) with them; or the
// Python version torchvision downloads: its files, cifar-10-batches-py/ (cifar-100-python/)
// with them, or the archive cifar-10-python.tar.gz (cifar-100-python.tar.gz), read in place;
// `path` may also be that archive. Both versions give the same samples in the same order.
Splits open_cifar10(const std::string& path);
Splits open_cifar100(const std::string& path);  // labels are the fine (100-class) labels

// train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
// t10k-labels-idx1-ubyte, each plain or with .gz. The class count is the largest training
// label plus one.
Splits open_idx(const std::string& dir);

// The image files torchvision's ImageFolder would list, with their labels (list_image_folder):
// classes are the sorted subdirectory names of `root`; each class directory is walked
// recursively, folders in sorted order, files sorted, extensions matched case-insensitively.
// Files with an extension torchvision accepts but we cannot decode (.tif, .tiff, .webp) are
// refused rather than skipped, so that the data set never silently differs from PyTorch's.
// Symbolic links to folders are followed as os.walk(followlinks=True) follows them, except
// those that lead back to a folder already listed (a loop, the split itself, another class):
// those are skipped and counted, so no walk is endless and no image is listed under two
// classes (src/data/directory_walk.h). FIFOs, sockets and devices named like images are
// refused.
struct LabelledFile {
  std::string path;
  int32_t label = 0;
};
struct FolderListing {
  bool present = true;  // false: the folder does not exist (and may_be_absent was set)
  std::vector<std::string> classes;
  std::vector<LabelledFile> files;
  size_t skipped_links = 0;        // symbolic links to folders not followed
  std::string first_skipped_link;  // "path -> target" of the first, printable
};

// "N symbolic link(s) ... not followed (first: ...)", or "" when none was skipped.
std::string skipped_links_note(const FolderListing& listing);

// A listing as bytes and back, to send it to other ranks. decode_listing throws Error on bytes
// encode_listing did not write.
std::string encode_listing(const FolderListing& listing);
FolderListing decode_listing(const std::string& bytes);

// How the readers below list a folder of images: list_image_folder here, or, in a job of many
// ranks, rank 0's listing shared with the others (train/shared_folder_listing.h).
// `may_be_absent`: a folder that does not exist gives a listing with present == false.
using FolderLister = std::function<FolderListing(const std::string& root, bool may_be_absent)>;
FolderListing list_image_folder(const std::string& root, bool may_be_absent = false);

// torchvision ImageFolder over dir/train and dir/val. `channels` is 3 (decoded as RGB, as
// torchvision's loader converts every image) or 1 (greyscale).
Splits open_image_folder(const std::string& dir, int channels,
                         const FolderLister& list = list_image_folder);
Splits open_tiny_imagenet(const std::string& dir, int channels,
                          const FolderLister& list = list_image_folder);

// Random images whose colour depends on the class, so a network can learn them: each class
// has a mean colour drawn from the seed, each pixel adds uniform noise. The same seed gives
// the same samples on every machine; sample i does not depend on any other.
struct SyntheticSpec {
  size_t train_count = 1024;
  size_t val_count = 256;
  int num_classes = 10;
  int height = 32;
  int width = 32;
  int channels = 3;
  uint64_t seed = 0;
};
Splits make_synthetic(const SyntheticSpec& spec);

// Image files decoded on demand; what open_image_folder and open_tiny_imagenet return.
// height and width are the size every image is expected to have, or 0 where they may differ.
DatasetPtr make_file_dataset(std::string description, std::vector<LabelledFile> files,
                             int num_classes, int channels, int height = 0, int width = 0);

}  // namespace rddp::data
