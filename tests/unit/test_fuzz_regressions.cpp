// Replays the fuzz harnesses' seed corpora (tests/fuzz/corpus/<target>/) and every input that
// once broke a harness (tests/fuzz/regressions/<target>/) through the harnesses' own entry
// points (tests/fuzz/fuzz_targets.h), in the ordinary build and without clang: each input must
// be read or refused with rddp::Error, never anything else, and the seeds, being real files,
// must be read. Cut and damaged copies of the seeds are replayed too, so that every build
// tries a few bad inputs of each format.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "fuzz/fuzz_targets.h"
#include "resnet_ddp/data/image_decode.h"
#include "support/image_bytes.h"
#include "resnet_ddp/rng.h"
#include "resnet_ddp/train/checkpoint.h"

using namespace rddp;
namespace fs = std::filesystem;

namespace {

const fs::path kFuzzDir = fs::path(RDDP_SOURCE_DIR) / "tests" / "fuzz";

std::vector<fs::path> inputs_in(const fs::path& dir) {
  std::vector<fs::path> inputs;
  if (!fs::is_directory(dir)) return inputs;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file()) inputs.push_back(entry.path());
  std::sort(inputs.begin(), inputs.end());
  return inputs;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string scratch_base() {
  const fs::path base = fs::path(RDDP_TEST_TMP) / "fuzz_regressions";
  fs::create_directories(base);
  return base.string();
}

// How a target answered one input: how many of its readers accepted it, or what escaped.
struct Outcome {
  int accepted = 0;
  std::string escaped;  // empty when only rddp::Error was thrown, if anything
};

template <typename Target>
Outcome replay(const Target& target, const std::string& bytes) {
  try {
    return {target.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), ""};
  } catch (const fuzz::BrokenPromise& broken) {
    return {0, broken.what()};
  } catch (const std::exception& other) {
    return {0, std::string("an exception that is not rddp::Error: ") + other.what()};
  } catch (...) {
    return {0, "an exception that is not even a std::exception"};
  }
}

// Copies of a seed cut short at a few places and with a few bytes changed, all the same on
// every machine (rddp::Rng).
std::vector<std::string> damaged_copies(const std::string& seed, uint64_t stream) {
  std::vector<std::string> copies;
  for (size_t part = 0; part < 4; ++part) copies.push_back(seed.substr(0, seed.size() * part / 4));
  Rng rng(derive_seed(stream, "damaged copies"));
  for (int copy = 0; copy < 4 && !seed.empty(); ++copy) {
    std::string damaged = seed;
    for (int change = 0; change < 1 + copy; ++change)
      damaged[rng.below(damaged.size())] = static_cast<char>(rng.below(256));
    copies.push_back(damaged);
  }
  return copies;
}

template <typename Target>
void replay_all() {
  const Target target(scratch_base());
  const std::vector<fs::path> seeds = inputs_in(kFuzzDir / "corpus" / Target::kName);
  CHECK_MESSAGE(!seeds.empty(), "no seeds in tests/fuzz/corpus/", Target::kName);
  uint64_t stream = 0;
  for (const fs::path& seed : seeds) {
    INFO("seed ", seed.string());
    const std::string bytes = read_bytes(seed);
    const Outcome outcome = replay(target, bytes);
    CHECK(outcome.escaped == "");
    CHECK_MESSAGE(outcome.accepted > 0, "a seed is a real file, which the readers must accept");
    for (const std::string& copy : damaged_copies(bytes, ++stream)) {
      INFO("a copy of ", copy.size(), " bytes, cut or damaged");
      CHECK(replay(target, copy).escaped == "");
    }
  }
  for (const fs::path& input : inputs_in(kFuzzDir / "regressions" / Target::kName)) {
    INFO("regression input ", input.string());
    CHECK(replay(target, read_bytes(input)).escaped == "");
  }
}

}  // namespace

TEST_CASE("fuzz inputs: CIFAR binary") { replay_all<fuzz::CifarTarget>(); }
TEST_CASE("fuzz inputs: CIFAR's Python version, pickles and archives") {
  replay_all<fuzz::CifarPickleTarget>();
}
TEST_CASE("fuzz inputs: idx files, plain and gzip") { replay_all<fuzz::IdxTarget>(); }
TEST_CASE("fuzz inputs: images") { replay_all<fuzz::ImageTarget>(); }
TEST_CASE("fuzz inputs: Tiny-ImageNet val_annotations.txt") {
  replay_all<fuzz::TinyImageNetTarget>();
}
TEST_CASE("fuzz inputs: weights and checkpoints") { replay_all<fuzz::TensorFileTarget>(); }
TEST_CASE("fuzz inputs: command line") { replay_all<fuzz::OptionsTarget>(); }
TEST_CASE("fuzz inputs: packed data sets") { replay_all<fuzz::PackTarget>(); }

TEST_CASE("every folder of fuzz inputs belongs to a target replayed here") {
  const std::set<std::string> targets = {
      fuzz::CifarTarget::kName,        fuzz::CifarPickleTarget::kName,  fuzz::IdxTarget::kName,
      fuzz::ImageTarget::kName,        fuzz::TinyImageNetTarget::kName,
      fuzz::TensorFileTarget::kName,   fuzz::OptionsTarget::kName,
      fuzz::PackTarget::kName};
  for (const char* kind : {"corpus", "regressions"}) {
    if (!fs::is_directory(kFuzzDir / kind)) continue;
    for (const fs::directory_entry& entry : fs::directory_iterator(kFuzzDir / kind)) {
      INFO(entry.path().string());
      CHECK(targets.count(entry.path().filename().string()) == 1);
    }
  }
}

TEST_CASE("the targets' helpers: refusals, broken promises, split inputs, repaired CRCs") {
  // rddp::Error is a refusal and counts as one; a broken promise (an accepted input with, say,
  // a label beyond the class count) is what the targets exist to catch, and escapes.
  CHECK(fuzz::count_accepted([] {}, [] { fail("refused"); }) == 1);
  CHECK_THROWS_AS(fuzz::count_accepted([] { fuzz::promise(false, "label 11 of 10 classes"); }),
                  fuzz::BrokenPromise);
  const std::string two_files = std::string("first") + fuzz::kFileSeparator + "second";
  const std::vector<std::string> parts = fuzz::split_files(
      reinterpret_cast<const uint8_t*>(two_files.data()), two_files.size(), 3);
  CHECK(parts == std::vector<std::string>{"first", "second", ""});

  // A weights file with one value changed fails its record's CRC; repaired, it reads again.
  // The last 16 bytes are fc.bias's two floats and the end marker.
  const std::string weights = read_bytes(kFuzzDir / "corpus" / "tensor_file" / "weights.rddp");
  std::string changed = weights;
  changed[changed.size() - 12] ^= 0x40;
  const fs::path path = fs::path(scratch_base()) / "repaired.rddp";
  for (const auto& [bytes, reads] : {std::pair{changed, false},
                                     std::pair{fuzz::with_crcs_repaired(changed), true},
                                     std::pair{fuzz::with_crcs_repaired(weights), true}}) {
    fuzz::write_file(path, bytes.data(), bytes.size());
    CHECK(fuzz::count_accepted([&] { read_tensor_file(path.string()); }) == int(reads));
  }
  CHECK(fuzz::with_crcs_repaired(weights) == weights);
}

// The fixes behind some of the regression inputs, each checked on its own below.

namespace {

data::Image decode(const std::string& file, int channels) {
  return test::decode_bytes(file, channels, "test image");
}

std::string error_of(const std::string& file) { return test::decode_error(file, "test image"); }

// Where each segment of a JPEG starts (its 0xFF), up to the first scan: a plain walk, enough
// for the files Pillow writes.
std::vector<size_t> jpeg_segments(const std::string& jpeg) {
  std::vector<size_t> starts;
  size_t at = 2;
  while (at + 4 <= jpeg.size() && static_cast<uint8_t>(jpeg[at]) == 0xFF) {
    starts.push_back(at);
    if (static_cast<uint8_t>(jpeg[at + 1]) == 0xDA) break;
    at += 2 + (static_cast<uint8_t>(jpeg[at + 2]) << 8 | static_cast<uint8_t>(jpeg[at + 3]));
  }
  return starts;
}

}  // namespace

TEST_CASE("a JPEG Huffman table of more than 256 codes is refused, naming the file") {
  const std::string jpeg = read_bytes(kFuzzDir / "corpus" / "image" / "baseline.jpg");
  size_t table = 0;
  for (size_t start : jpeg_segments(jpeg))
    if (static_cast<uint8_t>(jpeg[start + 1]) == 0xC4) table = start;
  REQUIRE(table > 0);
  // 16 code counts follow the length and the class/id byte: raise one so that they sum past 256.
  std::string damaged = jpeg;
  damaged[table + 5 + 15] = static_cast<char>(0xFF);
  const std::string error = error_of(damaged);
  CHECK(error.find("cannot decode image test image") != std::string::npos);
  CHECK(error.find("Huffman table") != std::string::npos);  // libjpeg's words

  // The same bytes inside a comment are no table: the image decodes as before.
  std::string comment = std::string("\xFF\xC4\x00\x20\x00", 5) + std::string(16, '\xFF');
  comment = std::string("\xFF\xFE") + char(0) + char(comment.size() + 2) + comment;
  const std::string commented = jpeg.substr(0, 2) + comment + jpeg.substr(2);
  CHECK(decode(commented, 3).pixels == decode(jpeg, 3).pixels);
}

TEST_CASE("PGM/PPM headers: no size, numbers beyond int, pixels cut short, 16 bits") {
  CHECK(error_of("P5").find("not an image of the format") != std::string::npos);
  CHECK(error_of("P5\n").find("header ends before") != std::string::npos);
  CHECK(error_of("P6\n5222222222222 4\n255\n").find("longer than 10 digits") !=
        std::string::npos);
  CHECK(error_of("P6\n2222222222 2222222222\n255\n").find("more than the") !=
        std::string::npos);
  const std::string header = "P5\n# a comment\n4 3\n255\n";
  std::string pixels;
  for (int i = 0; i < 12; ++i) pixels.push_back(static_cast<char>(20 * i));
  CHECK(error_of(header + pixels.substr(0, 11)).find("truncated") != std::string::npos);
  // 16-bit samples, big-endian as the format says: 200 is 0x00 0xC8, 5000 is 0x13 0x88. A
  // 16-bit PGM is Pillow's mode "I", which converting clips at 255.
  std::string wide;
  for (int i = 0; i < 6; ++i) wide += std::string("\x00\xC8\x13\x88", 4);
  const data::Image clipped = decode("P5\n4 3\n65535\n" + wide, 1);
  CHECK(clipped.pixels == std::vector<uint8_t>{200, 255, 200, 255, 200, 255,
                                               200, 255, 200, 255, 200, 255});
  const data::Image grey = decode(header + pixels, 1);
  CHECK(grey.width == 4);
  CHECK(grey.height == 3);
  CHECK(std::string(grey.pixels.begin(), grey.pixels.end()) == pixels);
}

TEST_CASE("image headers give the size; more pixels than Pillow reads are refused") {
  // make_corpus.py writes rgb.png at 24x20 and rgb.bmp at 16x12.
  for (const auto& [name, width, height] :
       {std::tuple{"rgb.png", 24, 20}, std::tuple{"rgb.bmp", 16, 12}}) {
    const std::string bytes = read_bytes(kFuzzDir / "corpus" / "image" / name);
    const data::ImageHeader header = data::read_image_header(
        reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), name);
    CHECK(header.width == width);
    CHECK(header.height == height);
    CHECK(header.channels == 3);
  }
  // A 54-byte BMP header of 20000 x 10000 pixels: 200 million, over Pillow's 178956970.
  std::string bmp = read_bytes(kFuzzDir / "corpus" / "image" / "rgb.bmp");
  auto put_le32 = [&](size_t at, uint32_t value) {
    for (int i = 0; i < 4; ++i) bmp[at + i] = static_cast<char>(value >> (8 * i));
  };
  put_le32(18, 20000);
  put_le32(22, 10000);
  CHECK(error_of(bmp).find("more than the 178956970") != std::string::npos);
}

TEST_CASE("checkpoint files whose step has too many digits are not checkpoints") {
  const fs::path dir = fs::path(RDDP_TEST_TMP) / "fuzz_regressions" / "long_step";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* name : {"checkpoint-0000000012.rddp", "checkpoint-99999999999999999999.rddp"})
    std::ofstream(dir / name) << "x";
  std::vector<std::string> found;
  REQUIRE_NOTHROW(found = list_checkpoints(dir.string()));
  CHECK(found == std::vector<std::string>{(dir / "checkpoint-0000000012.rddp").string()});
}
