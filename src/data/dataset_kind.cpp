#include "resnet_ddp/data/dataset_kind.h"

#include "resnet_ddp/data/file_io.h"
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

bool holds_file(const std::string& dir, const char* name) {
  return is_regular_file(join_path(dir, name));
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
  if (!is_directory(dir)) fail("data directory ", dir, " does not exist or is not a directory");
  // First: a pack is often written next to the folder it was made from.
  if (holds_file(dir, "train.rddp-pack")) return DatasetKind::packed;
  const std::string cifar10 = join_path(dir, "cifar-10-batches-bin");
  const std::string cifar100 = join_path(dir, "cifar-100-binary");
  const std::string raw = join_path(dir, "raw");
  if (holds_file(dir, "data_batch_1.bin") || holds_file(cifar10, "data_batch_1.bin"))
    return DatasetKind::cifar10;
  if ((holds_file(dir, "train.bin") && holds_file(dir, "test.bin")) ||
      holds_file(cifar100, "train.bin"))
    return DatasetKind::cifar100;
  for (const std::string& folder : {dir, raw})
    if (holds_file(folder, "train-images-idx3-ubyte") ||
        holds_file(folder, "train-images-idx3-ubyte.gz"))
      return DatasetKind::idx;
  if (holds_file(dir, "wnids.txt") && is_regular_file(join_path(dir, "val/val_annotations.txt")))
    return DatasetKind::tiny_imagenet;
  if (is_directory(join_path(dir, "train"))) return DatasetKind::image_folder;
  fail("cannot tell which data set ", dir, " holds: looked for data_batch_1.bin (CIFAR-10, also "
       "in cifar-10-batches-bin/), train.bin and test.bin (CIFAR-100, also in cifar-100-binary/), "
       "train-images-idx3-ubyte[.gz] (idx, also in raw/), wnids.txt with "
       "val/val_annotations.txt (Tiny-ImageNet), a train/ folder (image folder) and "
       "train.rddp-pack (packed by resnet_ddp_pack). Point to "
       "the folder that holds them, or name the format (cifar10, cifar100, idx, imagefolder, "
       "tiny-imagenet, packed, synthetic); data/README.md shows each layout");
}

}  // namespace rddp::data
