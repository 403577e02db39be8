#pragma once
// Everything the command line says about data, and the factory that turns it into data sets,
// transforms and loaders.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "resnet_ddp/data/dataset.h"
#include "resnet_ddp/data/dataset_kind.h"
#include "resnet_ddp/data/host_allocator.h"
#include "resnet_ddp/data/loader.h"
#include "resnet_ddp/data/normalize.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/data/transform.h"

namespace rddp::data {

struct DataConfig {
  std::string path;                           // the data directory; unused for synthetic
  DatasetKind kind = DatasetKind::automatic;  // automatic: detected from what path holds
  size_t batch_size = 128;                    // per rank
  int workers = 0;                            // 0: see resolve_worker_count
  int ranks_on_node = 1;                      // ranks sharing this node's CPUs
  AugmentMode augment = AugmentMode::automatic;
  int image_size = 0;        // 0: the data set's own size, 224 for image folders
  int channels = 0;          // image folders: 0 or 3 decode RGB, 1 greyscale
  std::string normalization = "auto";  // a preset name (normalize.h) or auto for the kind's
  // When above 0, this fraction of the training set is held out for validation
  // (split_for_validation), in place of the data set's own validation split if it has one.
  double val_fraction = 0;
  uint64_t val_seed = 0;
  uint64_t seed = 0;               // sampler shuffle and augmentation
  bool shuffle = true;             // training sampler: a new order each epoch (seed + epoch)
  bool drop_last = false;          // training DataLoader's drop_last
  bool sampler_drop_last = false;  // DistributedSampler's drop_last
  size_t limit_train = 0;          // above 0: only the first so many training samples
  size_t limit_val = 0;            // above 0: only the first so many validation samples
  int batches_per_worker = 2;
  bool make_float = true;          // see LoaderOptions::make_float
  SyntheticSpec synthetic;         // for kind synthetic
  // How image folders (and Tiny-ImageNet's train/) are listed; empty: list_image_folder, here.
  FolderLister list_folder;
};

// The data sets and how their images are prepared.
struct OpenedData {
  DatasetKind kind = DatasetKind::automatic;  // as detected
  DatasetPtr train;
  DatasetPtr val;  // null where there is no validation split
  int num_classes = 0;
  int channels = 0;
  Transform train_transform;
  Transform eval_transform;
  Normalization normalization;
  // What tells these files from others of the same sizes, where they say it (packs: their
  // class names and the id of the resnet_ddp_pack run that wrote them); empty, 0 elsewhere.
  std::vector<std::string> class_names;
  uint64_t pack_run_id = 0;
};

// Reads (or, for image folders, lists) the data. Throws Error naming what is wrong.
OpenedData open_data(const DataConfig& config);

// Loaders for one rank: training shuffles (seed + epoch, unless shuffle is off) and augments;
// validation keeps the order, never drops a batch and prepares images with eval_transform.
// Throws Error when a split has fewer samples than there are ranks, or when there is no
// validation split.
std::unique_ptr<Loader> make_train_loader(const DataConfig& config, const OpenedData& data,
                                          int rank, int world_size,
                                          std::shared_ptr<HostAllocator> allocator);
std::unique_ptr<Loader> make_val_loader(const DataConfig& config, const OpenedData& data,
                                        int rank, int world_size,
                                        std::shared_ptr<HostAllocator> allocator);

}  // namespace rddp::data
