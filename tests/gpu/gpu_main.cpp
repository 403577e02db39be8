// The GPU test program: runs the doctest cases of tests/gpu/ on device 0, or reports itself
// skipped (exit status 77, which CTest counts as skipped) when no CUDA device answers, so a
// machine without a GPU still passes the suite and says visibly what it left out.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    const std::string reason = status != cudaSuccess
                                   ? std::string(cudaGetErrorName(status)) + ": " +
                                         cudaGetErrorString(status)
                                   : std::string("cudaGetDeviceCount found 0 devices");
    std::printf("SKIPPED: gpu tests: no CUDA device answers (%s)\n", reason.c_str());
    return 77;
  }
  cudaDeviceProp properties;
  if (cudaGetDeviceProperties(&properties, 0) != cudaSuccess) {
    std::printf("gpu tests: device 0 does not report its properties\n");
    return 1;
  }
  std::printf("gpu tests on device 0 of %d: %s (compute capability %d.%d)\n", devices,
              properties.name, properties.major, properties.minor);
  std::fflush(stdout);
  doctest::Context context;
  // Each case's seconds by default: time on a GPU is scarce, and where it went is the first
  // thing the next run needs to know (--duration=false turns it off).
  context.setOption("duration", true);
  context.applyCommandLine(argc, argv);
  return context.run();
}
