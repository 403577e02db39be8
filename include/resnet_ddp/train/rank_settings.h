#pragma once
// What a rank was started with and what it found, as named values that every rank compares
// with rank 0's before any work (rank_agreement.h). Ranks that differ would wait in a
// collective the others never join, crash on a message of another size, or train to the end
// with settings other than the ones rank 0 reports.
#include <cstdint>
#include <string>
#include <vector>

#include "resnet_ddp/data/data_config.h"
#include "resnet_ddp/engine.h"
#include "resnet_ddp/train/options.h"

namespace rddp {

struct RankSetting {
  std::string name;  // a flag ("--max-steps"), or what a value found is ("training samples")
  std::string value;
};
using RankSettings = std::vector<RankSetting>;

// A flag that each rank may set its own way, and why it may.
struct PerRankFlag {
  const char* flag;
  const char* reason;
};
const std::vector<PerRankFlag>& per_rank_flags();

// Every flag the command line gave, as parsing takes it (the last of each; a switch's value is
// empty), but those of per_rank_flags(); then the program's version and the device it trains
// on. A flag left out is absent, so one rank giving a flag that another leaves to its default
// differs, even where the value given is the default: the ranks were started differently.
RankSettings command_line_settings(const TrainOptions& options, DeviceKind device);

// What the data and the model turned out to be, without paths (each node may read its own
// copy of the data): the kind, the sample counts, the classes and their names where the files
// name them, the pack run, the transforms, the normalisation, the model and the steps.
RankSettings data_settings(const data::OpenedData& data, const EngineConfig& engine,
                           int64_t steps_per_epoch);

// Bytes to send to other ranks and back; decode_settings throws Error on bytes
// encode_settings did not write.
std::string encode_settings(const RankSettings& settings);
RankSettings decode_settings(const std::string& bytes);

// A setting whose value differs, shown as the user sees it: the text given, "not given" for an
// absent flag, "given" for a switch.
struct SettingDifference {
  std::string name, rank0_value, other_value;
};
// In rank 0's order, then the settings rank 0 lacks. Numbers are equal by value ("1e-3" and
// "0.001" do not differ).
std::vector<SettingDifference> setting_differences(const RankSettings& rank0,
                                                   const RankSettings& other);

// "--max-steps: 3 on rank 1, not given on rank 0; --seed: ..." with `other` "on rank 1" and
// `reference` "on rank 0" (values made printable and, where long, cut to the part around their
// first difference).
std::string describe_differences(const std::vector<SettingDifference>& differences,
                                 const std::string& other, const std::string& reference);

}  // namespace rddp
