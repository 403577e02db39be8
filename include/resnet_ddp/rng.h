#pragma once
// Portable, reproducible random numbers. std::mt19937_64's output is fixed by the standard,
// but the std:: distributions are not (libstdc++ and libc++ differ), so the distributions
// are written here: the same seed gives the same weights and augmentations everywhere.
#include <cmath>
#include <cstdint>
#include <random>
#include <string_view>

namespace rddp {

// A stable 64-bit seed for a named stream: derive_seed(seed, "layer1.0.conv1.weight").
inline uint64_t derive_seed(uint64_t seed, std::string_view tag) {
  uint64_t hash = 0xcbf29ce484222325ull ^ seed;  // FNV-1a over the tag, keyed by the seed
  for (char c : tag) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  // splitmix64 finaliser: spreads nearby seeds far apart.
  hash += 0x9e3779b97f4a7c15ull;
  hash = (hash ^ (hash >> 30)) * 0xbf58476d1ce4e5b9ull;
  hash = (hash ^ (hash >> 27)) * 0x94d049bb133111ebull;
  return hash ^ (hash >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  uint64_t next_u64() { return engine_(); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  double uniform(double low, double high) { return low + (high - low) * uniform(); }
  // Uniform integer in [0, n), without modulo bias.
  uint64_t below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t draw;
    do draw = engine_(); while (draw >= limit);
    return draw % n;
  }
  // Standard normal by Box-Muller; the second value of each pair is kept for the next call.
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1;
    do u1 = uniform(); while (u1 <= 0.0);
    const double u2 = uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 6.283185307179586 * u2;
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
  }

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace rddp
