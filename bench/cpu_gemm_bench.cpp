// Throughput of the CPU GEMM for each thread count from 1 to the OpenMP maximum, for each
// kernel this build and CPU can run (portable, avx2):
//   cpu_gemm_bench [m n k]      (default 512 512 512, float and double, no transposes)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "resnet_ddp/cpu/gemm.h"
#include "resnet_ddp/rng.h"

namespace {

template <typename T>
double gflops(rddp::cpu::GemmKernel kernel, int m, int n, int k, int threads) {
  rddp::Rng rng(1);
  std::vector<T> a(static_cast<size_t>(m) * k), b(static_cast<size_t>(k) * n),
      c(static_cast<size_t>(m) * n);
  for (T& value : a) value = static_cast<T>(rng.uniform(-1, 1));
  for (T& value : b) value = static_cast<T>(rng.uniform(-1, 1));
  omp_set_num_threads(threads);
  const auto run = [&] {
    rddp::cpu::gemm_using<T>(kernel, false, false, m, n, k, T(1), a.data(), k, b.data(), n, T(0),
                             c.data(), n);
  };
  run();  // warm the caches and the thread pool
  // Best of several repetitions of at least 0.2 s each: the machine may be shared.
  double best = 0;
  for (int trial = 0; trial < 5; ++trial) {
    int reps = 0;
    const auto start = std::chrono::steady_clock::now();
    double seconds = 0;
    do {
      run();
      ++reps;
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } while (seconds < 0.2);
    best = std::max(best, 2.0 * m * n * k * reps / seconds * 1e-9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 1 && argc != 4) {
    std::fprintf(stderr, "usage: %s [m n k]\n", argv[0]);
    return 2;
  }
  const int m = argc == 4 ? std::atoi(argv[1]) : 512;
  const int n = argc == 4 ? std::atoi(argv[2]) : 512;
  const int k = argc == 4 ? std::atoi(argv[3]) : 512;
  if (m < 1 || n < 1 || k < 1) {
    std::fprintf(stderr, "%s: m, n and k must be positive integers\n", argv[0]);
    return 2;
  }
  const int max_threads = omp_get_max_threads();
  std::printf("gemm m=%d n=%d k=%d (C = A * B, row-major); gemm() runs the %s kernel here\n", m,
              n, k, rddp::cpu::to_string(rddp::cpu::gemm_kernel()));
  std::printf("%9s %8s %16s %16s\n", "kernel", "threads", "float GFLOP/s", "double GFLOP/s");
  for (rddp::cpu::GemmKernel kernel : {rddp::cpu::GemmKernel::portable, rddp::cpu::GemmKernel::avx2}) {
    if (!rddp::cpu::gemm_kernel_available(kernel)) continue;
    for (int threads = 1; threads <= max_threads; threads *= 2) {
      std::printf("%9s %8d %16.1f %16.1f\n", rddp::cpu::to_string(kernel), threads,
                  gflops<float>(kernel, m, n, k, threads), gflops<double>(kernel, m, n, k, threads));
      if (threads < max_threads && threads * 2 > max_threads) threads = max_threads / 2;
    }
  }
  return 0;
}
