#include "resnet_ddp/train/rank_settings.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "resnet_ddp/error.h"
#include "resnet_ddp/printable.h"
#include "resnet_ddp/version.h"
#include "resnet_ddp/weights.h"

namespace rddp {

namespace {

constexpr const char* kNotGiven = "not given";

// The value of a number given in any spelling ("1e-3", "0.001", "007"), for comparing; false
// for text that is not one.
bool as_number(const std::string& text, double& value) {
  if (text.empty()) return false;
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return *end == '\0' && std::isfinite(value);
}

bool same_value(const std::string& a, const std::string& b) {
  if (a == b) return true;
  double x = 0, y = 0;
  return as_number(a, x) && as_number(b, y) && x == y;
}

bool is_flag(const std::string& name) { return name.rfind("--", 0) == 0; }

// A value as the differences show it; `present` false for a flag the rank was not given.
std::string shown(const std::string& name, const std::string* value) {
  if (!value) return kNotGiven;
  if (is_flag(name) && value->empty()) return "given";
  return *value;
}

// A long value (a list of class names) cut to the part around its first difference from
// `other`, so that the message says where two lists part without printing both whole.
std::string around_difference(const std::string& value, const std::string& other) {
  constexpr size_t kMost = 96, kBefore = 24;
  if (value.size() <= kMost) return printable(value);
  size_t first = 0;
  while (first < value.size() && first < other.size() && value[first] == other[first]) ++first;
  const size_t from = first > kBefore ? first - kBefore : 0;
  const size_t length = std::min(kMost, value.size() - from);
  return (from > 0 ? "..." : "") + printable(value.substr(from, length)) +
         (from + length < value.size() ? "..." : "") + " (" + std::to_string(value.size()) +
         " characters)";
}

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::string floats(const std::vector<float>& values) {
  std::string text;
  char number[32];
  for (float value : values) {
    std::snprintf(number, sizeof number, "%.9g", static_cast<double>(value));
    text += (text.empty() ? "" : ",") + std::string(number);
  }
  return text;
}

}  // namespace

const std::vector<PerRankFlag>& per_rank_flags() {
  static const std::vector<PerRankFlag> flags = {
      {"--num-workers",
       "loader threads are sized to each node's cores; the batches are the same "
       "with any number"},
      {"--data",
       "each node may read its own copy of the data, at its own path; what was read is "
       "compared once it is open (data_settings)"},
      {"--init",
       "rank 0's starting weights reach every rank before the first step "
       "(ProcessGroup::attach), and each node may read its own copy of the file"},
      {"--save-weights", "only the ranks that write read it, each its own file with {rank}"},
      {"--log-json", "rank 0 alone writes the metrics log"},
      {"--print-every", "rank 0's value is sent to every rank"},
      {"--keep-checkpoints", "rank 0 alone writes checkpoints and removes old ones"},
      {"--profile-steps", "a profiler may watch one rank alone; it only marks steps on this rank"},
  };
  return flags;
}

RankSettings command_line_settings(const TrainOptions& options, DeviceKind device) {
  std::map<std::string, std::string> last;  // sorted by flag: one order on every rank
  for (const auto& [flag, value] : options.given_values) last[flag] = value;
  for (const PerRankFlag& per_rank : per_rank_flags()) last.erase(per_rank.flag);
  RankSettings settings;
  for (auto& [flag, value] : last) settings.push_back({flag, std::move(value)});
  // Two builds in one job (an MPMD launch of two programs) may differ in defaults and formats.
  settings.push_back({"program version", kVersion});
  // --device auto may find a GPU on one node and none on another.
  settings.push_back({"device", to_string(device)});
  return settings;
}

RankSettings data_settings(const data::OpenedData& data, const EngineConfig& engine,
                           int64_t steps_per_epoch) {
  RankSettings settings = {
      {"data kind", to_string(data.kind)},
      {"training samples", std::to_string(data.train->size())},
      {"validation samples", data.val ? std::to_string(data.val->size()) : "none"},
      {"classes", std::to_string(data.num_classes)},
  };
  if (!data.class_names.empty()) {
    std::string names;
    for (const std::string& name : data.class_names) names += (names.empty() ? "" : ",") + name;
    settings.push_back({"class names", names});
  }
  if (data.pack_run_id != 0) settings.push_back({"pack run id", hex(data.pack_run_id)});
  settings.push_back({"image channels", std::to_string(data.channels)});
  settings.push_back({"training transform", data::to_string(data.train_transform)});
  settings.push_back({"evaluation transform", data::to_string(data.eval_transform)});
  settings.push_back({"normalisation", data.normalization.name + " mean " +
                                           floats(data.normalization.mean) + " std " +
                                           floats(data.normalization.stddev)});
  settings.push_back({"model", spec_summary(engine.spec)});
  settings.push_back(
      {"image size", std::to_string(engine.height) + "x" + std::to_string(engine.width)});
  settings.push_back({"training steps per epoch", std::to_string(steps_per_epoch)});
  return settings;
}

std::string encode_settings(const RankSettings& settings) {
  std::string bytes;
  const auto put = [&bytes](const std::string& text) {
    bytes += std::to_string(text.size()) + ":" + text;
  };
  for (const RankSetting& setting : settings) {
    put(setting.name);
    put(setting.value);
  }
  return bytes;
}

RankSettings decode_settings(const std::string& bytes) {
  size_t at = 0;
  const auto take = [&]() {
    const size_t colon = bytes.find(':', at);
    if (colon == std::string::npos || colon == at || colon - at > 12 ||
        bytes.find_first_not_of("0123456789", at) != colon)
      fail("the settings another rank sent are malformed at byte ", at);
    const size_t length = std::stoull(bytes.substr(at, colon - at));
    if (length > bytes.size() - colon - 1)
      fail("the settings another rank sent are cut short at byte ", at);
    at = colon + 1 + length;
    return bytes.substr(colon + 1, length);
  };
  RankSettings settings;
  while (at < bytes.size()) {
    std::string name = take();
    if (at >= bytes.size()) fail("the settings another rank sent end after a name");
    settings.push_back({std::move(name), take()});
  }
  return settings;
}

std::vector<SettingDifference> setting_differences(const RankSettings& rank0,
                                                   const RankSettings& other) {
  const auto find = [](const RankSettings& settings,
                       const std::string& name) -> const std::string* {
    for (const RankSetting& setting : settings)
      if (setting.name == name) return &setting.value;
    return nullptr;
  };
  std::vector<SettingDifference> differences;
  const auto compare = [&](const std::string& name) {
    const std::string* mine = find(rank0, name);
    const std::string* theirs = find(other, name);
    if (mine && theirs && same_value(*mine, *theirs)) return;
    differences.push_back({name, shown(name, mine), shown(name, theirs)});
  };
  for (const RankSetting& setting : rank0) compare(setting.name);
  for (const RankSetting& setting : other)
    if (!find(rank0, setting.name)) compare(setting.name);
  return differences;
}

std::string describe_differences(const std::vector<SettingDifference>& differences,
                                 const std::string& other, const std::string& reference) {
  std::string text;
  for (const SettingDifference& d : differences)
    text += (text.empty() ? "" : "; ") + printable(d.name) + ": " +
            around_difference(d.other_value, d.rank0_value) + " " + other + ", " +
            around_difference(d.rank0_value, d.other_value) + " " + reference;
  return text;
}

}  // namespace rddp
