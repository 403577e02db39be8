// The factory: from a DataConfig to data sets, transforms and loaders.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "resnet_ddp/data/data_config.h"
#include "resnet_ddp/error.h"
#include "support/scratch_dir.h"

using namespace rddp;
using namespace rddp::data;
namespace fs = std::filesystem;

namespace {

// A CIFAR-10 binary tree with `per_file` black images of label 3 in each file.
std::string write_cifar10(const std::string& name, size_t per_file) {
  const std::string dir = testing::scratch_dir(name);
  std::vector<char> record(3073, 0);
  record[0] = 3;
  for (const char* file : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                           "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"}) {
    std::ofstream out(dir + "/" + file, std::ios::binary);
    for (size_t i = 0; i < per_file; ++i) out.write(record.data(), std::streamsize(record.size()));
  }
  return dir;
}

DataConfig synthetic_config() {
  DataConfig config;
  config.kind = DatasetKind::synthetic;
  config.synthetic.train_count = 100;
  config.synthetic.val_count = 30;
  config.batch_size = 16;
  config.workers = 1;
  return config;
}

}  // namespace

TEST_CASE("CIFAR is detected and prepared the CIFAR way") {
  DataConfig config;
  config.path = write_cifar10("cifar", 4);
  config.batch_size = 8;
  config.workers = 2;
  const OpenedData data = open_data(config);
  CHECK(data.kind == DatasetKind::cifar10);
  CHECK(data.train->size() == 20);
  CHECK(data.val->size() == 4);
  CHECK(data.num_classes == 10);
  CHECK(data.channels == 3);
  CHECK(data.train_transform.kind == Transform::Kind::random_crop_flip);
  CHECK(data.train_transform.size == 32);
  CHECK(data.train_transform.padding == 4);
  CHECK(data.eval_transform.kind == Transform::Kind::center);
  CHECK(data.eval_transform.resize == 0);
  CHECK(data.normalization.name == "cifar10");
  CHECK(to_string(data.train_transform) == "RandomCrop(32, padding=4) + RandomHorizontalFlip(0.5)");

  const auto train = make_train_loader(config, data, 1, 2, make_plain_allocator());
  CHECK(train->sampler().num_samples() == 10);
  CHECK(train->steps_per_epoch() == 2);
  CHECK(train->workers() == 2);
  train->start_epoch(0);
  const Loader::Lease batch = train->next();
  CHECK(batch->labels[0] == 3);
  // A black image normalised: (0 - mean) / std in the red channel.
  CHECK(batch->input[0] == doctest::Approx(-0.4914 / 0.2470));

  const auto val = make_val_loader(config, data, 0, 2, make_plain_allocator());
  CHECK(val->sampler().num_samples() == 2);
  val->start_epoch(0);
  CHECK(val->next()->indices[1] == 2);  // in order, rank 0 takes 0, 2
}

TEST_CASE("image folders get RandomResizedCrop(224) and Resize(256) + CenterCrop(224)") {
  const std::string dir = testing::scratch_dir("folder");
  fs::create_directories(dir + "/train/a");
  {
    // A 2x2 binary PPM.
    std::ofstream out(dir + "/train/a/x.ppm", std::ios::binary);
    out << "P6\n2 2\n255\n" << std::string(12, '\x7f');
  }
  DataConfig config;
  config.path = dir;
  const OpenedData data = open_data(config);
  CHECK(data.kind == DatasetKind::image_folder);
  CHECK(data.val == nullptr);
  CHECK(data.train_transform.kind == Transform::Kind::random_resized_crop_flip);
  CHECK(data.train_transform.size == 224);
  CHECK(data.eval_transform.resize == 256);
  CHECK(data.eval_transform.size == 224);
  CHECK(data.normalization.name == "imagenet");
  CHECK_THROWS_WITH_AS(make_val_loader(config, data, 0, 1, make_plain_allocator()),
                       doctest::Contains("has no validation split"), Error);

  config.channels = 1;
  config.image_size = 64;
  config.augment = AugmentMode::none;
  const OpenedData grey = open_data(config);
  CHECK(grey.channels == 1);
  CHECK(grey.normalization.name == "none");
  CHECK(grey.train_transform.kind == Transform::Kind::center);
  CHECK(grey.eval_transform.resize == 73);  // 64 * 256 / 224
  const auto loader = make_train_loader(config, grey, 0, 1, make_plain_allocator());
  loader->start_epoch(0);
  const Loader::Lease batch = loader->next();
  CHECK(batch->height == 64);
  CHECK(batch->channels == 1);
  CHECK(batch->pixels[64 * 64 - 1] == 0x7f);  // a flat image stays flat when enlarged
}

TEST_CASE("synthetic data, validation fractions and limits") {
  DataConfig config = synthetic_config();
  const OpenedData data = open_data(config);
  CHECK(data.train->size() == 100);
  CHECK(data.val->size() == 30);
  CHECK(data.normalization.name == "none");
  CHECK(data.train_transform.kind == Transform::Kind::random_crop_flip);

  config.val_fraction = 0.25;
  config.val_seed = 4;
  const OpenedData held_out = open_data(config);
  CHECK(held_out.train->size() == 75);
  CHECK(held_out.val->size() == 25);
  CHECK(held_out.val->source(0) == data.train->source(size_t(torch_randperm(100, 4)[0])));

  config.limit_train = 10;
  const OpenedData limited = open_data(config);
  CHECK(limited.train->size() == 10);
  CHECK(limited.val->size() == 25);
  config.limit_val = 7;
  CHECK(open_data(config).val->size() == 7);
}

TEST_CASE("the factory refuses what cannot work, saying why") {
  DataConfig config = synthetic_config();
  const OpenedData data = open_data(config);
  CHECK_THROWS_WITH_AS(make_train_loader(config, data, 0, 101, make_plain_allocator()),
                       doctest::Contains("synthetic train (100 images"), Error);
  CHECK_THROWS_WITH_AS(make_val_loader(config, data, 0, 31, make_plain_allocator()),
                       doctest::Contains("30 samples for 31 ranks"), Error);
  config.batch_size = 60;
  config.drop_last = true;
  CHECK_THROWS_WITH_AS(make_train_loader(config, data, 0, 2, make_plain_allocator()),
                       doctest::Contains("batch size 60 is larger than the 50"), Error);

  DataConfig cifar;
  cifar.path = write_cifar10("cifar_channels", 1);
  cifar.channels = 1;
  CHECK_THROWS_WITH_AS(open_data(cifar), doctest::Contains("channel setting applies to image folders"), Error);
  cifar.channels = 0;
  cifar.normalization = "mnist";
  CHECK_THROWS_WITH_AS(open_data(cifar), doctest::Contains("1-channel images"), Error);
  cifar.normalization = "auto";
  cifar.image_size = 48;  // a 48-pixel crop of a 32-pixel image padded by 4 cannot be
  CHECK_THROWS_WITH_AS(open_data(cifar), doctest::Contains("smaller than the 48x48"), Error);
  cifar.augment = AugmentMode::resized_crop_flip;  // resizing can make any size
  CHECK(open_data(cifar).eval_transform.resize == 48);

  DataConfig nothing;
  CHECK_THROWS_WITH_AS(open_data(nothing), doctest::Contains("no data directory"), Error);
}

TEST_CASE("without shuffling, rank r trains on samples r, r + W, ... padded from the start") {
  // DistributedSampler(shuffle=False): 5 samples on 2 ranks are 0, 2, 4 and 1, 3, 0; the
  // loader's batches hold exactly those images, unaugmented, in that order.
  DataConfig config = synthetic_config();
  config.synthetic.train_count = 5;
  config.batch_size = 8;
  config.augment = AugmentMode::none;
  config.shuffle = false;
  const OpenedData data = open_data(config);
  const std::vector<std::vector<int64_t>> expected = {{0, 2, 4}, {1, 3, 0}};
  for (int rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    const auto loader = make_train_loader(config, data, rank, 2, make_plain_allocator());
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {
      loader->start_epoch(epoch);
      const Loader::Lease batch = loader->next();
      REQUIRE(batch);
      REQUIRE(batch->count == 3);
      for (size_t i = 0; i < batch->count; ++i) {
        const int64_t index = expected[size_t(rank)][i];
        CHECK(batch->indices[i] == index);
        const Sample sample = data.train->get(size_t(index));
        CHECK(batch->labels[i] == sample.label);
        const size_t bytes = sample.image.pixels.size();
        CHECK(std::equal(batch->pixels + i * bytes, batch->pixels + (i + 1) * bytes,
                         sample.image.pixels.begin()));
      }
    }
  }
  // Shuffled (the default), the first epoch's order is torch.randperm(5, seed 0)'s.
  config.shuffle = true;
  const auto shuffled = make_train_loader(config, data, 0, 2, make_plain_allocator());
  CHECK(shuffled->sampler().indices(0) != expected[0]);
}
