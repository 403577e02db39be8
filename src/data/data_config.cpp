#include "resnet_ddp/data/data_config.h"

#include <algorithm>
#include <cctype>

#include "resnet_ddp/data/pack.h"
#include "resnet_ddp/data/sampler.h"
#include "resnet_ddp/data/split.h"
#include "resnet_ddp/data/worker_count.h"
#include "resnet_ddp/error.h"

namespace rddp::data {

namespace {

// Image folders hold images of any size; this is what torchvision's ImageNet recipe crops to.
constexpr int kFolderImageSize = 224;

Splits read(DatasetKind kind, const DataConfig& config) {
  const int channels = config.channels == 0 ? 3 : config.channels;
  const FolderLister list = config.list_folder ? config.list_folder : FolderLister(list_image_folder);
  switch (kind) {
    case DatasetKind::cifar10: return open_cifar10(config.path);
    case DatasetKind::cifar100: return open_cifar100(config.path);
    case DatasetKind::idx: return open_idx(config.path);
    case DatasetKind::image_folder: return open_image_folder(config.path, channels, list);
    case DatasetKind::tiny_imagenet: return open_tiny_imagenet(config.path, channels, list);
    case DatasetKind::synthetic: return make_synthetic(config.synthetic);
    case DatasetKind::packed: return open_packed(config.path);
    case DatasetKind::automatic: break;
  }
  RDDP_ASSERT(false);
  return {};
}

bool decodes_files(DatasetKind kind) {
  return kind == DatasetKind::image_folder || kind == DatasetKind::tiny_imagenet;
}

// MNIST and Fashion-MNIST share the idx format; only the directory name tells them apart.
std::string default_normalization(DatasetKind kind, const std::string& path, int channels) {
  std::string lower = path;
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  switch (kind) {
    case DatasetKind::cifar10: return "cifar10";
    case DatasetKind::cifar100: return "cifar100";
    case DatasetKind::idx: return lower.find("fashion") != std::string::npos ? "fashion-mnist" : "mnist";
    case DatasetKind::image_folder:
    case DatasetKind::tiny_imagenet:
    case DatasetKind::packed: return channels == 3 ? "imagenet" : "none";
    case DatasetKind::synthetic:
    case DatasetKind::automatic: break;
  }
  return "none";
}

DistributedSampler make_sampler(const Dataset& dataset, int rank, int world_size, bool shuffle,
                                uint64_t seed, bool drop_last) {
  try {
    return DistributedSampler(dataset.size(), world_size, rank, shuffle, seed, drop_last);
  } catch (const Error& e) {
    fail(dataset.description(), ": ", e.what());
  }
}

LoaderOptions loader_options(const DataConfig& config, const OpenedData& data,
                             const Transform& transform) {
  LoaderOptions options;
  options.batch_size = config.batch_size;
  options.workers = resolve_worker_count(config.workers, config.ranks_on_node).count;
  options.batches_per_worker = config.batches_per_worker;
  options.transform = transform;
  options.seed = config.seed;
  options.make_float = config.make_float;
  options.normalization = data.normalization;
  return options;
}

}  // namespace

OpenedData open_data(const DataConfig& config) {
  OpenedData data;
  data.kind = config.kind == DatasetKind::automatic ? detect_dataset_kind(config.path) : config.kind;
  if (config.channels != 0 && !decodes_files(data.kind))
    fail("the channel setting applies to image folders; ", to_string(data.kind),
         " data has the channels it is stored with");
  Splits splits = read(data.kind, config);
  if (const auto* pack = dynamic_cast<const PackedDataset*>(splits.train.get())) {
    data.class_names = pack->info().classes;
    data.pack_run_id = pack->info().run_id;
  }
  if (config.val_fraction > 0)
    splits = split_for_validation(splits.train, config.val_fraction, config.val_seed);
  if (config.limit_train > 0) splits.train = take_first(splits.train, config.limit_train);
  if (config.limit_val > 0 && splits.val) splits.val = take_first(splits.val, config.limit_val);
  data.train = splits.train;
  data.val = splits.val;
  data.num_classes = data.train->num_classes();
  data.channels = data.train->channels();

  const bool fixed_size = data.train->height() > 0;
  int size = config.image_size;
  if (size == 0) {
    if (!fixed_size) {
      size = kFolderImageSize;
    } else if (data.train->height() == data.train->width()) {
      size = data.train->height();
    } else {
      fail(data.train->description(), " has ", data.train->width(), "x", data.train->height(),
           " images; batches are square, so set the image size");
    }
  }
  // Fixed-size data at its own size goes in as it is; anything else is resized the ImageNet way.
  Transform eval;
  eval.kind = Transform::Kind::center;
  eval.size = size;
  const bool natural = fixed_size && data.train->height() == size && data.train->width() == size;
  eval.resize = natural ? 0 : fixed_size ? size : eval_resize_for(size);
  data.eval_transform = eval;

  AugmentMode mode = config.augment;
  if (mode == AugmentMode::automatic)
    mode = fixed_size ? AugmentMode::crop_flip : AugmentMode::resized_crop_flip;
  Transform train;
  train.size = size;
  switch (mode) {
    case AugmentMode::none: train = eval; break;
    case AugmentMode::crop_flip: train.kind = Transform::Kind::random_crop_flip; break;
    case AugmentMode::resized_crop_flip: train.kind = Transform::Kind::random_resized_crop_flip; break;
    case AugmentMode::automatic: RDDP_ASSERT(false);
  }
  train.validate();
  const int smallest = std::min(data.train->height(), data.train->width());
  if (train.kind == Transform::Kind::random_crop_flip && fixed_size &&
      smallest + 2 * train.padding < size)
    fail(data.train->description(), ": a ", data.train->width(), "x", data.train->height(),
         " image padded by ", train.padding, " is smaller than the ", size, "x", size,
         " random crop; choose a smaller image size or the resized-crop-flip augmentation");
  data.train_transform = train;

  const std::string normalization = config.normalization == "auto"
      ? default_normalization(data.kind, config.path, data.channels)
      : config.normalization;
  data.normalization = normalization_preset(normalization, data.channels);
  return data;
}

std::unique_ptr<Loader> make_train_loader(const DataConfig& config, const OpenedData& data,
                                          int rank, int world_size,
                                          std::shared_ptr<HostAllocator> allocator) {
  DistributedSampler sampler = make_sampler(*data.train, rank, world_size, config.shuffle,
                                            config.seed, config.sampler_drop_last);
  if (steps_per_epoch(sampler.num_samples(), config.batch_size, config.drop_last) == 0)
    fail("the batch size ", config.batch_size, " is larger than the ", sampler.num_samples(),
         " training samples each of the ", world_size, " ranks gets per epoch, and drop_last "
         "leaves no batch: use a smaller batch size or turn drop_last off");
  return std::make_unique<Loader>(data.train, std::move(sampler),
                                  loader_options(config, data, data.train_transform),
                                  std::move(allocator));
}

std::unique_ptr<Loader> make_val_loader(const DataConfig& config, const OpenedData& data,
                                        int rank, int world_size,
                                        std::shared_ptr<HostAllocator> allocator) {
  if (!data.val)
    fail(data.train->description(), " has no validation split: hold part of the training set "
         "out with a validation fraction");
  // As a PyTorch validation loop: no shuffling, every sample (the sampler pads to a multiple
  // of the world size), and the last short batch kept.
  DistributedSampler sampler = make_sampler(*data.val, rank, world_size, false, 0, false);
  return std::make_unique<Loader>(data.val, std::move(sampler),
                                  loader_options(config, data, data.eval_transform),
                                  std::move(allocator));
}

}  // namespace rddp::data
