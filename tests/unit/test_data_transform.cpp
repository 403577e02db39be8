#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "resnet_ddp/data/file_io.h"
#include "resnet_ddp/data/image_decode.h"
#include "resnet_ddp/data/normalize.h"
#include "resnet_ddp/data/resize.h"
#include "resnet_ddp/data/transform.h"
#include "resnet_ddp/error.h"
#include "resnet_ddp/rng.h"

using namespace rddp;
using namespace rddp::data;

namespace {

Image random_image(int height, int width, int channels, Rng& rng) {
  Image image(height, width, channels);
  for (uint8_t& p : image.pixels) p = uint8_t(rng.below(256));
  return image;
}

uint8_t pixel_or_zero(const Image& image, int y, int x, int c) {
  if (y < 0 || x < 0 || y >= image.height || x >= image.width) return 0;
  return image.at(y, x)[c];
}

// Is `out` the size x size window of `image` at (top, left), zero outside, maybe mirrored?
bool is_window(const Image& out, const Image& image, int top, int left, bool mirrored) {
  for (int y = 0; y < out.height; ++y)
    for (int x = 0; x < out.width; ++x)
      for (int c = 0; c < out.channels; ++c) {
        const int source_x = left + (mirrored ? out.width - 1 - x : x);
        if (out.at(y, x)[c] != pixel_or_zero(image, top + y, source_x, c)) return false;
      }
  return true;
}

// Antialiased bilinear resampling in double precision in one step, rounded once at the end:
// a triangle filter widened by the scale factor when shrinking, weights normalised to 1.
double reference_resample(const Image& image, int out_h, int out_w, int y, int x, int c) {
  auto weights = [](int in, int out, int o, std::vector<std::pair<int, double>>& w) {
    const double scale = double(in) / out, support = std::max(scale, 1.0);
    const double center = (o + 0.5) * scale;
    double total = 0;
    for (int i = 0; i < in; ++i) {
      const double v = std::max(0.0, 1.0 - std::fabs((i + 0.5 - center) / support));
      if (v > 0) w.push_back({i, v}), total += v;
    }
    for (auto& entry : w) entry.second /= total;
  };
  std::vector<std::pair<int, double>> wy, wx;
  weights(image.height, out_h, y, wy);
  weights(image.width, out_w, x, wx);
  double sum = 0;
  for (const auto& [iy, vy] : wy)
    for (const auto& [ix, vx] : wx) sum += vy * vx * image.at(iy, ix)[c];
  return sum;
}

}  // namespace

TEST_CASE("RandomCrop with padding: a window of the zero-padded image, mirrored about half the time") {
  Rng rng(1);
  const Image image = random_image(32, 32, 3, rng);
  Transform transform;
  transform.kind = Transform::Kind::random_crop_flip;
  transform.size = 32;
  transform.padding = 4;
  std::set<std::pair<int, int>> offsets;
  int mirrored_count = 0;
  const int trials = 600;
  for (int i = 0; i < trials; ++i) {
    const Image out = apply_transform(transform, image, 7, 0, uint64_t(i));
    REQUIRE(out.height == 32);
    REQUIRE(out.width == 32);
    // Find the window by search: every offset in [-4, 4] and both orientations.
    int found = 0;
    for (int top = -4; top <= 4; ++top)
      for (int left = -4; left <= 4; ++left)
        for (bool mirrored : {false, true})
          if (is_window(out, image, top, left, mirrored)) {
            ++found;
            offsets.insert({top, left});
            mirrored_count += mirrored;
          }
    CHECK(found == 1);  // random pixels make every window distinct
  }
  CHECK(offsets.size() == 81);  // every offset of the 9 x 9 occurs in 600 draws
  CHECK(std::abs(mirrored_count - trials / 2) < 60);  // about 5 standard deviations
}

TEST_CASE("augmentation depends on (seed, epoch, sample index) only") {
  Rng rng(2);
  const Image image = random_image(40, 50, 3, rng);
  Transform transform;
  transform.kind = Transform::Kind::random_resized_crop_flip;
  transform.size = 24;
  const Image a = apply_transform(transform, image, 1, 2, 3);
  CHECK(apply_transform(transform, image, 1, 2, 3).pixels == a.pixels);
  CHECK(apply_transform(transform, image, 1, 3, 3).pixels != a.pixels);
  CHECK(apply_transform(transform, image, 1, 2, 4).pixels != a.pixels);
  CHECK(apply_transform(transform, image, 2, 2, 3).pixels != a.pixels);
  CHECK(augment_seed(1, 2, 3) != augment_seed(1, 3, 2));
}

TEST_CASE("RandomResizedCrop boxes lie in the image with torchvision's area and ratio ranges") {
  Rng rng(3);
  int fallbacks = 0;
  for (int i = 0; i < 2000; ++i) {
    const int height = 1 + int(rng.below(400)), width = 1 + int(rng.below(400));
    const CropBox box = random_resized_crop_box(height, width, 0.08, 1.0, 3.0 / 4, 4.0 / 3, rng);
    REQUIRE(box.top >= 0);
    REQUIRE(box.left >= 0);
    REQUIRE(box.height >= 1);
    REQUIRE(box.width >= 1);
    REQUIRE(box.top + box.height <= height);
    REQUIRE(box.left + box.width <= width);
    const double area = double(box.height) * box.width / (double(height) * width);
    const double ratio = double(box.width) / box.height;
    // Rounding each side to whole pixels moves area and ratio a little, more on small sides.
    const double slack_w = 0.5 / box.width, slack_h = 0.5 / box.height;
    const bool sampled = area >= 0.08 * (1 - slack_w) * (1 - slack_h) &&
                         ratio >= 0.75 * (1 - slack_w) / (1 + slack_h) &&
                         ratio <= 4.0 / 3 * (1 + slack_w) / (1 - slack_h);
    if (!sampled) {
      ++fallbacks;
      // The fallback is centred and keeps the full extent along one side.
      CHECK((box.height == height || box.width == width));
    }
  }
  CHECK(fallbacks < 200);

  // Ten misses are certain on a 1000 x 10 strip: the fallback is the centred 10 x round(40/3).
  const CropBox strip = random_resized_crop_box(10, 1000, 0.5, 1.0, 3.0 / 4, 4.0 / 3, rng);
  CHECK(strip.height == 10);
  CHECK(strip.width == 13);
  CHECK(strip.top == 0);
  CHECK(strip.left == (1000 - 13) / 2);
  const CropBox tall = random_resized_crop_box(1000, 10, 0.5, 1.0, 3.0 / 4, 4.0 / 3, rng);
  CHECK(tall.width == 10);
  CHECK(tall.height == 13);  // round(10 / 0.75) = round(13.33)
}

TEST_CASE("CenterCrop rounds odd margins half to even, as Python's round does") {
  // (5 - 2) / 2 = 1.5 -> 2; (7 - 2) / 2 = 2.5 -> 2; (9 - 2) / 2 = 3.5 -> 4.
  CHECK(center_crop_box(5, 5, 2, 2).top == 2);
  CHECK(center_crop_box(7, 7, 2, 2).top == 2);
  CHECK(center_crop_box(9, 9, 2, 2).left == 4);
  CHECK(center_crop_box(256, 341, 224, 224).left == 58);  // 58.5 -> 58
  // A crop larger than the image pads (crop - size) // 2 before.
  CHECK(center_crop_box(3, 10, 8, 4).top == -2);
  Rng rng(4);
  const Image image = random_image(3, 10, 1, rng);
  const Image out = crop(image, center_crop_box(3, 10, 8, 4));
  CHECK(is_window(out, image, -2, 3, false));
  CHECK(out.at(0, 0)[0] == 0);
}

TEST_CASE("Resize(int) sets the shorter side and truncates the longer") {
  Rng rng(5);
  const Image landscape = random_image(375, 500, 3, rng);
  const Image resized = resize_shorter_side(landscape, 256);
  CHECK(resized.height == 256);
  CHECK(resized.width == 341);  // int(256 * 500 / 375) = int(341.33)
  const Image portrait = resize_shorter_side(random_image(100, 30, 1, rng), 64);
  CHECK(portrait.width == 64);
  CHECK(portrait.height == 213);  // int(64 * 100 / 30) = int(213.33)
  CHECK(resize_shorter_side(landscape, 375).pixels == landscape.pixels);
  CHECK(eval_resize_for(224) == 256);
}

TEST_CASE("bilinear resizing matches a double-precision antialiased reference within a level") {
  Rng rng(6);
  struct Case {
    int in_h, in_w, out_h, out_w, channels;
  };
  for (const Case& c : {Case{40, 30, 17, 11, 3}, Case{13, 9, 30, 25, 1}, Case{64, 64, 32, 32, 3},
                        Case{7, 50, 7, 13, 3}, Case{50, 7, 9, 7, 1}, Case{5, 5, 224, 224, 3}}) {
    const Image image = random_image(c.in_h, c.in_w, c.channels, rng);
    const Image out = resize_bilinear(image, c.out_h, c.out_w);
    REQUIRE(out.height == c.out_h);
    REQUIRE(out.width == c.out_w);
    int worst = 0;
    for (int y = 0; y < c.out_h; ++y)
      for (int x = 0; x < c.out_w; ++x)
        for (int ch = 0; ch < c.channels; ++ch) {
          const double expected = reference_resample(image, c.out_h, c.out_w, y, x, ch);
          worst = std::max(worst, int(std::ceil(std::fabs(out.at(y, x)[ch] - expected) - 0.5)));
        }
    CAPTURE(c.in_h);
    CAPTURE(c.out_h);
    CHECK(worst <= 1);  // two passes each round once
  }
  // A flat image stays flat, up or down.
  Image flat(20, 30, 3);
  std::fill(flat.pixels.begin(), flat.pixels.end(), 201);
  for (const Image& out : {resize_bilinear(flat, 7, 9), resize_bilinear(flat, 41, 77)})
    CHECK(std::all_of(out.pixels.begin(), out.pixels.end(), [](uint8_t p) { return p == 201; }));
  const Image same = random_image(9, 9, 3, rng);
  CHECK(resize_bilinear(same, 9, 9).pixels == same.pixels);
}

TEST_CASE("evaluation images: Resize then CenterCrop, or untouched at the data set's size") {
  Rng rng(7);
  Transform eval;
  eval.size = 224;
  eval.resize = 256;
  const Image out = apply_transform(eval, random_image(375, 500, 3, rng), 0, 0, 0);
  CHECK(out.height == 224);
  CHECK(out.width == 224);
  Transform identity;
  identity.size = 32;
  const Image small = random_image(32, 32, 3, rng);
  CHECK(apply_transform(identity, small, 0, 0, 0).pixels == small.pixels);
}

TEST_CASE("a random crop larger than the padded image is refused") {
  Rng rng(8);
  CHECK_THROWS_WITH_AS(random_crop_box(20, 20, 32, 4, rng), doctest::Contains("smaller than the 32x32"), Error);
  CHECK_NOTHROW(random_crop_box(24, 24, 32, 4, rng));
  Transform bad;
  bad.scale_min = 0;
  CHECK_THROWS_AS(bad.validate(), Error);
  CHECK(parse_augment_mode("crop-flip") == AugmentMode::crop_flip);
  CHECK_THROWS_WITH_AS(parse_augment_mode("random"), doctest::Contains("none, crop-flip"), Error);
}

TEST_CASE("ToTensor + Normalize: NCHW floats (x / 255 - mean) / std") {
  Rng rng(9);
  const Image a = random_image(3, 4, 3, rng), b = random_image(3, 4, 3, rng);
  std::vector<uint8_t> batch(a.pixels);
  batch.insert(batch.end(), b.pixels.begin(), b.pixels.end());
  const Normalization cifar = normalization_preset("cifar10", 3);
  std::vector<float> out(2 * 3 * 12);
  normalize_to_nchw(batch.data(), 2, 3, 4, 3, cifar, out.data());
  const double mean[] = {0.4914, 0.4822, 0.4465}, stddev[] = {0.2470, 0.2435, 0.2616};
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 3; ++y)
        for (int x = 0; x < 4; ++x) {
          const Image& image = n == 0 ? a : b;
          const double expected = (image.at(y, x)[c] / 255.0 - mean[c]) / stddev[c];
          CHECK(out[size_t(((n * 3 + c) * 3 + y) * 4 + x)] == doctest::Approx(expected).epsilon(1e-6));
        }
  CHECK(normalization_preset("none", 1).stddev == std::vector<float>{1.0f});
  CHECK_THROWS_WITH_AS(normalization_preset("mnist", 3), doctest::Contains("1-channel"), Error);
  CHECK_THROWS_WITH_AS(normalization_preset("svhn", 3), doctest::Contains("imagenet, cifar10"), Error);
}

// Not a test of its own: tests/parity/test_augment_parity.py and test_decode_parity.py run it
// with a request file and compare the images it writes with torchvision's. Request lines
// (outputs are raw HWC bytes, or float32 NCHW for normalize; decode writes the error message
// instead when the file is refused):
//   decode IN OUT CHANNELS
//   decode_crop IN OUT CHANNELS TOP LEFT HEIGHT WIDTH   (decode_image_crop: only the region)
//   eval IN OUT CHANNELS SIZE RESIZE
//   resized_crop IN OUT CHANNELS TOP LEFT HEIGHT WIDTH SIZE
//   crop_flip IN OUT CHANNELS TOP LEFT SIZE FLIP
//   normalize IN OUT CHANNELS PRESET
TEST_CASE("parity export: image transforms" * doctest::skip()) {
  const char* request_path = std::getenv("RDDP_PARITY_REQUEST");
  REQUIRE_MESSAGE(request_path, "set RDDP_PARITY_REQUEST");
  std::ifstream request(request_path);
  REQUIRE(request);
  std::string line;
  while (std::getline(request, line)) {
    std::istringstream fields(line);
    std::string what, in, out_path;
    int channels = 0;
    fields >> what >> in >> out_path >> channels;
    std::ofstream out(out_path, std::ios::binary);
    auto write_image = [&](const Image& result) {
      out.write(reinterpret_cast<const char*>(result.pixels.data()), std::streamsize(result.pixels.size()));
    };
    if (what == "decode" || what == "decode_crop") {
      CropBox box;
      if (what == "decode_crop") fields >> box.top >> box.left >> box.height >> box.width;
      REQUIRE_MESSAGE(!fields.fail(), "cannot parse: ", line);
      try {
        if (what == "decode") {
          write_image(decode_image_file(in, channels));
        } else {
          const std::vector<uint8_t> bytes = read_file(in);
          write_image(decode_image_crop(bytes.data(), bytes.size(), channels,
                                        [&](int, int) { return box; }, in));
        }
      } catch (const Error& error) {
        std::ofstream(out_path + ".error") << error.what();
      }
      continue;
    }
    const Image image = decode_image_file(in, channels);
    if (what == "eval") {
      Transform eval;
      fields >> eval.size >> eval.resize;
      write_image(apply_transform(eval, image, 0, 0, 0));
    } else if (what == "resized_crop") {
      CropBox box;
      int size = 0;
      fields >> box.top >> box.left >> box.height >> box.width >> size;
      write_image(resize_bilinear(crop(image, box), size, size));
    } else if (what == "crop_flip") {
      CropBox box;
      int flip = 0;
      fields >> box.top >> box.left >> box.height >> flip;
      box.width = box.height;
      Image result = crop(image, box);
      if (flip) flip_horizontal(result);
      write_image(result);
    } else if (what == "normalize") {
      std::string preset;
      fields >> preset;
      std::vector<float> result(image.pixels.size());
      normalize_to_nchw(image.pixels.data(), 1, image.height, image.width, channels,
                        normalization_preset(preset, channels), result.data());
      out.write(reinterpret_cast<const char*>(result.data()), std::streamsize(result.size() * sizeof(float)));
    } else {
      FAIL("unknown request: ", line);
    }
    REQUIRE_MESSAGE(!fields.fail(), "cannot parse: ", line);
    CHECK(out.good());
  }
}
