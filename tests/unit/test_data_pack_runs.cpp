// resnet_ddp_pack into a folder that holds an earlier pack: no split of another run is left
// beside the new one, a failed run leaves the earlier pack as it was, what killed runs left is
// removed, and training refuses a val pack of another run.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/pack.h"
#include "resnet_ddp/data/readers.h"
#include "resnet_ddp/error.h"
#include "support/scratch_dir.h"

using namespace rddp;
using namespace rddp::data;
namespace fs = std::filesystem;

namespace {

// A binary PPM of `value`-coloured pixels: the images of two runs differ by it.
void write_ppm(const std::string& path, int width, int height, uint8_t value) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << "P6\n" << width << " " << height << "\n255\n";
  out << std::string(size_t(width) * height * 3, char(value));
}

std::string make_folder(const std::string& name, uint8_t value, bool with_val = true) {
  const std::string root = testing::scratch_dir(name);
  for (const char* cls : {"ant", "bee"}) {
    write_ppm(root + "/train/" + cls + "/1.ppm", 12, 10, value);
    write_ppm(root + "/train/" + cls + "/2.ppm", 10, 14, value);
    if (with_val) write_ppm(root + "/val/" + cls + "/v.ppm", 11, 11, value);
  }
  return root;
}

std::vector<PackedSplit> pack(const std::string& input, const std::string& output,
                              std::vector<std::string>* notes = nullptr) {
  PackOptions options;
  options.size = 8;
  if (notes) options.note = [notes](const std::string& line) { notes->push_back(line); };
  return pack_dataset(input, output, options);
}

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

const std::set<std::string> kBothSplits = {"train.rddp-pack", "val.rddp-pack"};

}  // namespace

TEST_CASE("packing again without a validation split removes the earlier val.rddp-pack") {
  const std::string input = make_folder("no_val_input", 50);
  const std::string out = testing::scratch_dir("no_val_out");
  pack(input, out);
  CHECK(names_in(out) == kBothSplits);
  fs::remove_all(input + "/val");
  const std::vector<PackedSplit> packed = pack(input, out);
  CHECK(packed.size() == 1);
  CHECK(packed[0].path == out + "/train.rddp-pack");
  CHECK(names_in(out) == std::set<std::string>{"train.rddp-pack"});
  CHECK(open_packed(out).val == nullptr);
}

TEST_CASE("a val pack written by another run is refused beside the train pack") {
  const std::string first = testing::scratch_dir("first_out"), second = testing::scratch_dir("second_out");
  pack(make_folder("first_input", 50), first);
  pack(make_folder("second_input", 200), second);
  CHECK_NOTHROW(open_packed(second));
  const PackedDataset one(first + "/train.rddp-pack", "t"), two(second + "/train.rddp-pack", "t");
  CHECK(one.info().version == 2);
  CHECK(one.info().run_id != two.info().run_id);
  fs::copy_file(first + "/val.rddp-pack", second + "/val.rddp-pack",
                fs::copy_options::overwrite_existing);
  CHECK_THROWS_WITH_AS(open_packed(second),
                       doctest::Contains("val.rddp-pack' was written by another resnet_ddp_pack "
                                         "run than"),
                       Error);
}

TEST_CASE("a run that fails leaves the earlier pack as it was, and nothing of its own") {
  const std::string input = make_folder("fail_input", 50);
  const std::string out = testing::scratch_dir("fail_out");
  pack(input, out);
  const std::vector<uint8_t> train = read_file(out + "/train.rddp-pack");
  const std::vector<uint8_t> val = read_file(out + "/val.rddp-pack");
  // The new run's train split would pack; its val split fails on a broken image.
  write_ppm(input + "/train/ant/3.ppm", 9, 9, 100);
  std::ofstream(input + "/val/bee/broken.ppm") << "not an image";
  CHECK_THROWS_WITH_AS(pack(input, out), doctest::Contains("broken.ppm"), Error);
  CHECK(names_in(out) == kBothSplits);
  CHECK(read_file(out + "/train.rddp-pack") == train);
  CHECK(read_file(out + "/val.rddp-pack") == val);
}

TEST_CASE("what a killed run left is removed; a running pack's folder is not touched") {
  const std::string input = make_folder("leftover_input", 50);
  const std::string out = testing::scratch_dir("leftover_out");
  // A process that has ended: its pid names no running pack.
  const pid_t ended = fork();
  REQUIRE(ended >= 0);
  if (ended == 0) _exit(0);
  waitpid(ended, nullptr, 0);
  const std::string staging = out + "/rddp-pack.tmp." + std::to_string(ended);
  fs::create_directories(staging);
  std::ofstream(staging + "/train.rddp-pack.tmp." + std::to_string(ended)) << "half a pack";
  std::ofstream(out + "/val.rddp-pack.tmp." + std::to_string(ended)) << "an older temporary";
  std::ofstream(out + "/notes.txt") << "the user's own file";
  std::vector<std::string> notes;
  pack(input, out, &notes);
  CHECK(names_in(out) == std::set<std::string>{"train.rddp-pack", "val.rddp-pack", "notes.txt"});
  size_t removals = 0;
  for (const std::string& note : notes)
    removals += note.find("left by a resnet_ddp_pack run that was stopped") != std::string::npos;
  CHECK(removals == 2);

  // A running resnet_ddp_pack (here `sleep` under that name) owns its staging folder.
  const std::string fake = testing::scratch_dir("fake_program") + "/resnet_ddp_pack";
  fs::copy_file("/bin/sleep", fake);
  const pid_t running = fork();
  REQUIRE(running >= 0);
  if (running == 0) {
    execl(fake.c_str(), "resnet_ddp_pack", "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  usleep(200 * 1000);  // until the exec has named the process
  const std::string owned = out + "/rddp-pack.tmp." + std::to_string(running);
  fs::create_directories(owned);
  const std::string refusal =
      "another resnet_ddp_pack (process " + std::to_string(running) + ") is writing into";
  CHECK_THROWS_WITH_AS(pack(input, out), doctest::Contains(refusal.c_str()), Error);
  CHECK(fs::exists(owned));
  kill(running, SIGKILL);
  waitpid(running, nullptr, 0);
}

TEST_CASE("version 1 packs are still read in pairs, and refused beside a version 2 one") {
  const std::string corpus =
      std::string(RDDP_SOURCE_DIR) + "/tests/fuzz/corpus/pack/rgb-v1.rddp-pack";
  const std::string dir = testing::scratch_dir("versions");
  fs::copy_file(corpus, dir + "/train.rddp-pack");
  fs::copy_file(corpus, dir + "/val.rddp-pack");
  const Splits old = open_packed(dir);
  CHECK(old.val != nullptr);
  CHECK(dynamic_cast<const PackedDataset&>(*old.train).info().version == 1);

  PackInfo info;
  info.short_side = 4;
  info.classes = {"ant", "bee"};
  info.run_id = 77;
  PackWriter writer(dir + "/val.rddp-pack", info);
  Image image(4, 6, 3);
  writer.add(image, 1);
  writer.finish();
  CHECK_THROWS_WITH_AS(open_packed(dir), doctest::Contains("(format versions 2 and 1)"), Error);
}
