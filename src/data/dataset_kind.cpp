#include "resnet_ddp/data/dataset_kind.h"

#include "cifar_layout.h"
#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/regular_file.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

struct KindName {
  DatasetKind kind;
  const char* name;
};
constexpr KindName kKindNames[] = {
    {DatasetKind::automatic, "auto"},         {DatasetKind::cifar10, "cifar10"},
    {DatasetKind::cifar100, "cifar100"},      {DatasetKind::idx, "idx"},
    {DatasetKind::image_folder, "imagefolder"}, {DatasetKind::tiny_imagenet, "tiny-imagenet"},
    {DatasetKind::synthetic, "synthetic"},     {DatasetKind::packed, "packed"},
};

// What to do when nothing matched.
constexpr const char* kLayouts =
    "Point to the folder that holds the data (or to a CIFAR .tar.gz), or name the format "
    "(cifar10, cifar100, idx, imagefolder, tiny-imagenet, packed, synthetic); docs/data.md "
    "shows each layout";

// Anything of that name counts: a reader then refuses what is not a regular file, saying what
// it is, where "cannot tell which data set" would hide it.
bool holds_file(const std::string& dir, const char* name) {
  return path_exists(join_path(dir, name));
}

}  // namespace

const char* to_string(DatasetKind kind) {
  for (const KindName& entry : kKindNames)
    if (entry.kind == kind) return entry.name;
  return "?";
}

DatasetKind parse_dataset_kind(const std::string& text) {
  std::string choices;
  for (const KindName& entry : kKindNames) {
    if (text == entry.name) return entry.kind;
    choices += std::string(choices.empty() ? "" : ", ") + entry.name;
  }
  fail("unknown data format '", text, "': choose one of ", choices);
}

DatasetKind detect_dataset_kind(const std::string& dir) {
  if (dir.empty()) fail("no data directory given: name one, or choose the synthetic format");
  if (is_regular_file(dir)) {
    if (locate_cifar(dir, CifarVersion::cifar10).layout != CifarLayout::none)
      return DatasetKind::cifar10;
    if (locate_cifar(dir, CifarVersion::cifar100).layout != CifarLayout::none)
      return DatasetKind::cifar100;
    fail(dir, " is a file, and the only files read as a data set are CIFAR's Python version "
         "as torchvision downloads it, cifar-10-python.tar.gz and cifar-100-python.tar.gz; unpack "
         "any other archive. ",
         kLayouts);
  }
  if (!is_directory(dir)) fail("data directory ", dir, " does not exist or is not a directory");
  // First: a pack is often written next to the folder it was made from.
  if (holds_file(dir, "train.rddp-pack")) return DatasetKind::packed;
  const std::string raw = join_path(dir, "raw");
  if (locate_cifar(dir, CifarVersion::cifar10).layout != CifarLayout::none)
    return DatasetKind::cifar10;
  if (locate_cifar(dir, CifarVersion::cifar100).layout != CifarLayout::none)
    return DatasetKind::cifar100;
  for (const std::string& folder : {dir, raw})
    if (holds_file(folder, "train-images-idx3-ubyte") ||
        holds_file(folder, "train-images-idx3-ubyte.gz"))
      return DatasetKind::idx;
  if (holds_file(dir, "wnids.txt") && holds_file(dir, "val/val_annotations.txt"))
    return DatasetKind::tiny_imagenet;
  if (is_directory(join_path(dir, "train"))) return DatasetKind::image_folder;
  fail("cannot tell which data set ", dir, " holds: looked for ",
       cifar_layouts_looked_for(CifarVersion::cifar10), ", ",
       cifar_layouts_looked_for(CifarVersion::cifar100), ", "
       "train-images-idx3-ubyte[.gz] (idx, also in raw/), wnids.txt with "
       "val/val_annotations.txt (Tiny-ImageNet), a train/ folder (image folder) and "
       "train.rddp-pack (packed by resnet_ddp_pack). ", kLayouts);
}

}  // namespace rddp::data
