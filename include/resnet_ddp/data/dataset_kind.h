#pragma once
// The on-disk formats the readers understand, and telling them apart from what a directory
// holds when the user gives only --data DIR.
#include <string>

namespace rddp::data {

enum class DatasetKind {
  automatic,      // detect from the directory's contents
  cifar10,        // cifar-10-batches-bin/ (data_batch_1..5.bin, test_batch.bin) or the Python
                  // version: cifar-10-batches-py/, cifar-10-python.tar.gz
  cifar100,       // cifar-100-binary/ (train.bin, test.bin) or the Python version:
                  // cifar-100-python/, cifar-100-python.tar.gz
  idx,            // MNIST-style idx files, plain or gzip (MNIST, Fashion-MNIST, KMNIST...)
  image_folder,   // torchvision ImageFolder: train/<class>/..., val/<class>/...
  tiny_imagenet,  // Tiny-ImageNet-200 as distributed: wnids.txt, train/, val/val_annotations.txt
  synthetic,      // deterministic random images; needs no files
  packed,         // train.rddp-pack (and val.rddp-pack) written by resnet_ddp_pack
};

const char* to_string(DatasetKind kind);
// Throws Error listing the accepted names.
DatasetKind parse_dataset_kind(const std::string& text);

// Looks at what `path` holds and names its format; throws Error saying what was looked for.
// `path` is a directory, or a CIFAR Python archive (cifar-10-python.tar.gz...).
DatasetKind detect_dataset_kind(const std::string& path);

}  // namespace rddp::data
