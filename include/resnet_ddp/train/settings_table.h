#pragma once
// The settings table a run prints at start (rank 0): what the user chose and can change (data,
// model, batch, steps, optimizer, precision, layout, devices, ranks and nodes, checkpoints);
// with --verbose also how it runs (GEMM kernel, buffers and memory tuning, communication).
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "resnet_ddp/data/data_config.h"
#include "resnet_ddp/engine.h"
#include "resnet_ddp/gpu_peaks.h"
#include "resnet_ddp/train/options.h"

namespace rddp {

// What the trainer knows once its data and engine are ready.
struct SettingsFacts {
  SettingsFacts(const TrainOptions& run_options, const EngineConfig& engine_config,
                const data::OpenedData& opened, const data::DataConfig& config)
      : options(run_options), engine(engine_config), data(opened), data_config(config) {}

  const TrainOptions& options;
  const EngineConfig& engine;
  const data::OpenedData& data;
  const data::DataConfig& data_config;
  int world_size = 1;
  int nodes = 1;
  std::string communication;  // ProcessGroup::describe()
  DeviceKind device = DeviceKind::cpu;
  std::string device_reason, device_name;
  // What the precision means on this device (tf32 on a GPU without TF32 units is plain float32);
  // empty: its name.
  std::string precision_meaning;
  size_t parameters = 0;
  DevicePeak peak;
  double flops_per_image = 0;
  std::string start;  // the starting weights: torchvision's init, a file, or a checkpoint
  int64_t steps_per_epoch = 0;
  int loader_workers = 0;
  std::string batch_buffers;  // HostAllocator::description()
};

std::vector<std::pair<std::string, std::string>> settings_rows(const SettingsFacts& facts);

// The flags of our fastest measured step that this run leaves out, space-separated; empty when
// it uses them all.
std::string faster_flags(const TrainOptions& options);

}  // namespace rddp
