// rank_settings: what the ranks compare at start. Every flag given counts but the few that may
// differ per rank, numbers compare by value, and a difference is described with both values.
#include <doctest/doctest.h>

#include <set>
#include <sstream>
#include <string>

#include "resnet_ddp/error.h"
#include "resnet_ddp/train/options.h"
#include "resnet_ddp/train/rank_settings.h"

using namespace rddp;

namespace {

// The flags --help lists: the same table parsing reads.
std::set<std::string> flags_in_help() {
  std::set<std::string> flags;
  std::istringstream text(usage());
  for (std::string word; text >> word;)
    if (word.rfind("--", 0) == 0 &&
        word.find_first_not_of("-abcdefghijklmnopqrstuvwxyz0123456789") == std::string::npos)
      flags.insert(word);
  flags.erase("--help");
  flags.erase("--version");
  return flags;
}

const std::string* value_of(const RankSettings& settings, const std::string& name) {
  for (const RankSetting& setting : settings)
    if (setting.name == name) return &setting.value;
  return nullptr;
}

}  // namespace

TEST_CASE("every flag on the command line is compared, but those that may differ per rank") {
  const std::set<std::string> flags = flags_in_help();
  REQUIRE(flags.size() > 40);
  std::set<std::string> per_rank;
  for (const PerRankFlag& flag : per_rank_flags()) {
    CAPTURE(flag.flag);
    CHECK(flags.count(flag.flag) == 1);  // a flag that exists
    CHECK(std::string(flag.reason).size() > 20);
    per_rank.insert(flag.flag);
  }
  TrainOptions options;
  for (const std::string& flag : flags) options.given_values.emplace_back(flag, "1");
  const RankSettings settings = command_line_settings(options, DeviceKind::cpu);
  for (const std::string& flag : flags) {
    CAPTURE(flag);
    CHECK((value_of(settings, flag) == nullptr) == (per_rank.count(flag) == 1));
  }
  REQUIRE(value_of(settings, "device"));
  CHECK(*value_of(settings, "device") == "cpu");
  CHECK(value_of(settings, "program version"));
}

TEST_CASE("the last value of a flag given twice counts, as parsing takes it") {
  TrainOptions options;
  options.given_values = {{"--seed", "1"}, {"--epochs", "3"}, {"--seed", "2"}};
  const RankSettings settings = command_line_settings(options, DeviceKind::cpu);
  REQUIRE(value_of(settings, "--seed"));
  CHECK(*value_of(settings, "--seed") == "2");
}

TEST_CASE("differences: numbers by value, absent flags and switches shown as such") {
  const RankSettings rank0 = {
      {"--lr", "0.001"}, {"--epochs", "3"}, {"--nesterov", ""}, {"device", "cpu"}};
  const RankSettings same = {
      {"--lr", "1e-3"}, {"--epochs", "3.0"}, {"--nesterov", ""}, {"device", "cpu"}};
  CHECK(setting_differences(rank0, same).empty());

  const RankSettings other = {
      {"--lr", "0.002"}, {"--epochs", "3"}, {"device", "cuda"}, {"--seed", "7"}};
  const std::vector<SettingDifference> differences = setting_differences(rank0, other);
  REQUIRE(differences.size() == 4);
  CHECK(differences[0].name == "--lr");
  CHECK(differences[1].name == "--nesterov");
  CHECK(differences[3].name == "--seed");
  CHECK(describe_differences(differences, "on rank 3", "on rank 0") ==
        "--lr: 0.002 on rank 3, 0.001 on rank 0; --nesterov: not given on rank 3, given on rank 0; "
        "device: cuda on rank 3, cpu on rank 0; --seed: 7 on rank 3, not given on rank 0");
}

TEST_CASE("a long value is shown around its first difference, control characters written out") {
  std::string names, other;
  for (int k = 0; k < 200; ++k) {
    names += "class" + std::to_string(k) + ",";
    other += (k == 150 ? "CLASS" : "class") + std::to_string(k) + ",";
  }
  const std::string text =
      describe_differences(setting_differences({{"class names", names}}, {{"class names", other}}),
                           "on rank 1", "on rank 0");
  CHECK(text.find("CLASS150") != std::string::npos);
  CHECK(text.find("class150") != std::string::npos);
  CHECK(text.find("class3,") == std::string::npos);  // the start of the lists is left out
  CHECK(text.size() < 400);
  const std::string path =
      describe_differences({{"--checkpoint-dir", "a\nb\x1b[2J", "a"}}, "on rank 1", "on rank 0");
  CHECK(path.find('\n') == std::string::npos);
  CHECK(path.find('\x1b') == std::string::npos);
  CHECK(path.find("a on rank 1, a\\nb\\x1b[2J on rank 0") != std::string::npos);
}

TEST_CASE("settings survive the trip to another rank, and damaged bytes are refused") {
  const RankSettings settings = {
      {"--data", std::string("/d\0x:9", 6)}, {"--nesterov", ""}, {"", "x"}};
  const RankSettings back = decode_settings(encode_settings(settings));
  REQUIRE(back.size() == settings.size());
  for (size_t i = 0; i < back.size(); ++i) {
    CHECK(back[i].name == settings[i].name);
    CHECK(back[i].value == settings[i].value);
  }
  const std::string bytes = encode_settings(settings);
  for (size_t cut = 1; cut < bytes.size(); ++cut) {
    CAPTURE(cut);
    const std::string head = bytes.substr(0, cut);
    try {
      decode_settings(head);  // a cut at a boundary between settings decodes to fewer
    } catch (const Error&) {
    }
  }
  CHECK_THROWS_AS(decode_settings("99:abc"), Error);
  CHECK_THROWS_AS(decode_settings("x:abc"), Error);
  CHECK_THROWS_AS(decode_settings("3:abc"), Error);  // a name without a value
}
