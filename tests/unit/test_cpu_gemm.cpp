#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "resnet_ddp/cpu/gemm.h"
#include "resnet_ddp/rng.h"
#include "support/test_tensors.h"

using namespace rddp;
using rddp::testing::random_uniform;

namespace {

struct GemmCase {
  bool transpose_a = false, transpose_b = false;
  int m = 1, n = 1, k = 1;
  double alpha = 1.0, beta = 0.0;
  int pad = 3;  // extra elements per stored row, so that the leading dimensions matter
};

// Runs one GEMM on random data with strided storage and checks every element of C against a
// triple loop in double, within the classical bound for a k-term dot product:
//   |error| <= (k + 2) * eps * (|alpha| * sum |a||b| + |beta * c|).
// C starts as NaN when beta == 0 (it must not be read) and the row padding of C must survive.
template <typename T>
void check_gemm(const GemmCase& g, uint64_t seed, cpu::GemmKernel kernel) {
  const std::string kernel_name = cpu::to_string(kernel);
  CAPTURE(kernel_name);
  CAPTURE(g.transpose_a);
  CAPTURE(g.transpose_b);
  CAPTURE(g.m);
  CAPTURE(g.n);
  CAPTURE(g.k);
  CAPTURE(g.alpha);
  CAPTURE(g.beta);
  Rng rng(seed);
  const int a_rows = g.transpose_a ? g.k : g.m, a_cols = g.transpose_a ? g.m : g.k;
  const int b_rows = g.transpose_b ? g.n : g.k, b_cols = g.transpose_b ? g.k : g.n;
  const int lda = a_cols + g.pad, ldb = b_cols + g.pad, ldc = g.n + g.pad;
  const auto a = random_uniform<T>(rng, size_t(a_rows) * lda);
  const auto b = random_uniform<T>(rng, size_t(b_rows) * ldb);
  std::vector<T> c = g.beta == 0.0 ? testing::nan_filled<T>(size_t(g.m) * ldc)
                                   : random_uniform<T>(rng, size_t(g.m) * ldc);
  const T sentinel = T(12345);
  for (int i = 0; i < g.m; ++i)
    for (int j = g.n; j < ldc; ++j) c[size_t(i) * ldc + j] = sentinel;
  const std::vector<T> c_before = c;

  cpu::gemm_using<T>(kernel, g.transpose_a, g.transpose_b, g.m, g.n, g.k, T(g.alpha), a.data(),
                     lda, b.data(), ldb, T(g.beta), c.data(), ldc);

  const double eps = std::numeric_limits<T>::epsilon();
  int failures = 0;
  for (int i = 0; i < g.m; ++i) {
    for (int j = 0; j < g.n; ++j) {
      double sum = 0.0, magnitude = 0.0;
      for (int p = 0; p < g.k; ++p) {
        const double a_ip = g.transpose_a ? a[size_t(p) * lda + i] : a[size_t(i) * lda + p];
        const double b_pj = g.transpose_b ? b[size_t(j) * ldb + p] : b[size_t(p) * ldb + j];
        sum += a_ip * b_pj;
        magnitude += std::fabs(a_ip * b_pj);
      }
      const double c_in = g.beta == 0.0 ? 0.0 : double(c_before[size_t(i) * ldc + j]);
      const double expected = g.alpha * sum + g.beta * c_in;
      const double bound =
          (g.k + 2) * eps * (std::fabs(g.alpha) * magnitude + std::fabs(g.beta * c_in));
      const double got = c[size_t(i) * ldc + j];
      if (!(std::fabs(got - expected) <= bound) && failures++ < 3)
        FAIL_CHECK("C[" << i << ", " << j << "] = " << got << ", expected " << expected
                        << " within " << bound);
    }
    for (int j = g.n; j < ldc; ++j)
      if (c[size_t(i) * ldc + j] != sentinel && failures++ < 3)
        FAIL_CHECK("row padding C[" << i << ", " << j << "] was overwritten");
  }
  CHECK(failures == 0);
}

// The kernels this build and this CPU can run: each is checked on its own.
std::vector<cpu::GemmKernel> available_kernels() {
  std::vector<cpu::GemmKernel> kernels;
  for (cpu::GemmKernel kernel : {cpu::GemmKernel::portable, cpu::GemmKernel::avx2})
    if (cpu::gemm_kernel_available(kernel)) kernels.push_back(kernel);
  return kernels;
}

}  // namespace

TEST_CASE_TEMPLATE("gemm matches a triple loop for every transpose and odd sizes", T, float,
                   double) {
  const int sizes[] = {1, 7, 33, 130};
  const double scalings[][2] = {{1.0, 0.0}, {0.5, -1.5}, {-2.0, 1.0}, {1.0, 0.25}};
  for (cpu::GemmKernel kernel : available_kernels()) {
    uint64_t seed = 100;
    int scaling = 0;
    for (bool transpose_a : {false, true})
      for (bool transpose_b : {false, true})
        for (int m : sizes)
          for (int n : sizes)
            for (int k : sizes) {
              const auto& ab = scalings[scaling++ % 4];
              check_gemm<T>({transpose_a, transpose_b, m, n, k, ab[0], ab[1]}, seed++, kernel);
            }
  }
}

TEST_CASE("gemm is right across several blocks of every dimension") {
  // Past the packing blocks in k (256) and m (96), and the 2048-column panel in n.
  for (cpu::GemmKernel kernel : available_kernels()) {
    for (bool transpose_a : {false, true})
      for (bool transpose_b : {false, true})
        check_gemm<float>({transpose_a, transpose_b, 100, 2057, 515, 1.0, 0.0, 1}, 7, kernel);
    check_gemm<double>({false, true, 101, 300, 600, -0.75, 0.5, 2}, 8, kernel);
  }
}

TEST_CASE_TEMPLATE("gemm with beta == 0 overwrites NaN in C, also when k or alpha is 0", T,
                   float, double) {
  const int m = 5, n = 6, k = 4;
  Rng rng(3);
  const auto a = random_uniform<T>(rng, m * k), b = random_uniform<T>(rng, k * n);
  std::vector<T> c = testing::nan_filled<T>(m * n);
  cpu::gemm<T>(false, false, m, n, 0, T(1), a.data(), k, b.data(), n, T(0), c.data(), n);
  for (T value : c) CHECK(value == T(0));

  c = testing::nan_filled<T>(m * n);
  cpu::gemm<T>(false, false, m, n, k, T(0), a.data(), k, b.data(), n, T(0), c.data(), n);
  for (T value : c) CHECK(value == T(0));

  // alpha == 0 with beta != 0 only scales C.
  std::vector<T> c_scaled = random_uniform<T>(rng, m * n);
  const std::vector<T> c_original = c_scaled;
  cpu::gemm<T>(true, true, m, n, k, T(0), a.data(), m, b.data(), k, T(2), c_scaled.data(), n);
  for (int i = 0; i < m * n; ++i) CHECK(c_scaled[i] == T(2) * c_original[i]);
}

TEST_CASE("gemm gives the same bits with any number of threads") {
  const int m = 150, n = 300, k = 700;
  Rng rng(11);
  const auto a = random_uniform<float>(rng, size_t(m) * k);
  const auto b = random_uniform<float>(rng, size_t(k) * n);
  const int saved_threads = omp_get_max_threads();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3, 5}) {
    omp_set_num_threads(threads);
    std::vector<float> c = testing::nan_filled<float>(size_t(m) * n);
    cpu::gemm<float>(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), n);
    results.push_back(c);
  }
  omp_set_num_threads(saved_threads);
  for (size_t r = 1; r < results.size(); ++r)
    CHECK(std::memcmp(results[r].data(), results[0].data(), results[0].size() * sizeof(float)) ==
          0);
  CHECK(testing::count_non_finite(results[0]) == 0);
}

// The CPU executor's results, and the tests' expected bits, must not depend on which CPU ran
// them: the kernels differ in tile width only, never in the order or rounding of a sum.
TEST_CASE_TEMPLATE("every GEMM kernel gives the same bits", T, float, double) {
  MESSAGE("gemm() runs the " << std::string(cpu::to_string(cpu::gemm_kernel())) << " kernel on this CPU");
  if (!cpu::gemm_kernel_available(cpu::GemmKernel::avx2)) {
    MESSAGE("SKIPPED: only the portable GEMM kernel runs here (no AVX2 in this build or CPU)");
    return;
  }
  struct Shape {
    int m, n, k;
  };
  // Edges of both kernels' tiles (6 rows; 4, 8 or 16 columns), the 256-deep K blocks, the
  // 2048-column panels, and convolution shapes.
  const Shape shapes[] = {{1, 1, 1},     {6, 16, 3},    {7, 17, 255},   {13, 9, 257},
                          {97, 33, 513}, {64, 2100, 27}, {512, 64, 4608}, {10, 1000, 512}};
  uint64_t seed = 300;
  for (const Shape& s : shapes)
    for (bool transpose_a : {false, true})
      for (bool transpose_b : {false, true})
        for (double beta : {0.0, 0.75}) {
          CAPTURE(s.m);
          CAPTURE(s.n);
          CAPTURE(s.k);
          CAPTURE(transpose_a);
          CAPTURE(transpose_b);
          CAPTURE(beta);
          Rng rng(seed++);
          const int lda = transpose_a ? s.m : s.k, ldb = transpose_b ? s.k : s.n;
          const auto a = random_uniform<T>(rng, size_t(s.m) * s.k);
          const auto b = random_uniform<T>(rng, size_t(s.k) * s.n);
          const auto c_in = random_uniform<T>(rng, size_t(s.m) * s.n);
          std::vector<T> portable = c_in, avx2 = c_in;
          cpu::gemm_using<T>(cpu::GemmKernel::portable, transpose_a, transpose_b, s.m, s.n, s.k,
                             T(-1.25), a.data(), lda, b.data(), ldb, T(beta), portable.data(),
                             s.n);
          cpu::gemm_using<T>(cpu::GemmKernel::avx2, transpose_a, transpose_b, s.m, s.n, s.k,
                             T(-1.25), a.data(), lda, b.data(), ldb, T(beta), avx2.data(), s.n);
          CHECK(testing::bitwise_equal(avx2, portable));
        }
}
