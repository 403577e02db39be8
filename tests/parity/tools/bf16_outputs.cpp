// Writes what our bfloat16 maths (include/resnet_ddp/kernel_math/bf16.h, through the host loops of
// dist/bf16_gradients.h) makes of float32 values, for tests/parity/test_bf16_parity.py:
//   bf16_outputs round IN OUT            OUT[i] = bits of bf16(IN[i])
//   bf16_outputs compress IN OUT W       OUT[i] = bits of bf16(bf16(IN[i]) * (1/W)), one rank's
//                                        share under --grad-allreduce bf16
// IN is raw little-endian float32, OUT raw little-endian uint16, as numpy's tofile/fromfile.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "resnet_ddp/ddp/bf16_gradients.h"
#include "resnet_ddp/error.h"

using namespace rddp;

namespace {

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail("bf16_outputs: cannot open input file ", path);
  const auto bytes = static_cast<size_t>(in.tellg());
  if (bytes % sizeof(float) != 0) fail("bf16_outputs: ", path, " holds ", bytes, " bytes, not whole float32 values");
  std::vector<float> values(bytes / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(bytes));
  if (!in) fail("bf16_outputs: cannot read ", path);
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (!((mode == "round" && argc == 4) || (mode == "compress" && argc == 5)))
      fail("usage: bf16_outputs round IN OUT | bf16_outputs compress IN OUT W");
    const std::vector<float> values = read_floats(argv[2]);
    float share = 1.0f;
    if (mode == "compress") {
      const int world = std::stoi(argv[4]);
      if (world < 1) fail("bf16_outputs: W must be at least 1, got ", argv[4]);
      share = 1.0f / static_cast<float>(world);  // as the reducer computes it
    }
    std::vector<uint16_t> bits(values.size());
    // round is compress with a share of 1: multiplying a bfloat16 by 1 rounds nothing.
    ddp::compress_bf16(values.data(), bits.data(), values.size(), share);
    std::ofstream out(argv[3], std::ios::binary);
    out.write(reinterpret_cast<const char*>(bits.data()), static_cast<std::streamsize>(bits.size() * 2));
    if (!out) fail("bf16_outputs: cannot write ", argv[3]);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
}
