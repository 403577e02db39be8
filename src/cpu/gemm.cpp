#include "resnet_ddp/cpu/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "resnet_ddp/error.h"

// Goto/BLIS-style blocking: a KC x NC slice of op(B) is packed once and shared by every
// thread, each thread packs the MC x KC block of op(A) it works on, and a register-tiled
// micro-kernel multiplies MR-row strips of A by NR-column strips of B. The micro-kernel is
// plain loops over fixed-size arrays so that the compiler vectorises it for whatever
// baseline the build targets.
//
// Determinism: every element of C is owned by exactly one tile, and its sum over k runs in
// the same order (KC blocks, then p within the block) whatever the number of threads, so the
// result is bitwise identical with 1 or 64 threads.
namespace rddp::cpu {

namespace {

template <typename T>
struct Blocking;

// Float: 6x8 accumulators are twelve 4-wide vectors, leaving room in 16 SSE registers for a
// row of B and a broadcast of A.
template <>
struct Blocking<float> {
  static constexpr int mr = 6, nr = 8, mc = 96, kc = 256, nc = 2048, nt = 256;
};
// Double: half the lanes per register, so half the columns.
template <>
struct Blocking<double> {
  static constexpr int mr = 6, nr = 4, mc = 96, kc = 256, nc = 2048, nt = 256;
};

// Below this many multiply-adds, starting threads costs more than it saves.
constexpr int64_t kParallelThreshold = int64_t(64) * 64 * 64;

// Packs op(A)[i0 : i0 + rows, p0 : p0 + depth] into MR-row strips, each stored k-major
// (strip[p * MR + i]); rows past the matrix are zero so the micro-kernel needs no edge case.
template <typename T, int MR>
void pack_a(bool transpose, const T* a, int lda, int i0, int rows, int p0, int depth, T* out) {
  for (int strip = 0; strip < rows; strip += MR) {
    const int height = std::min(MR, rows - strip);
    T* dst = out + static_cast<int64_t>(strip) * depth;
    for (int p = 0; p < depth; ++p) {
      for (int i = 0; i < height; ++i) {
        const int64_t row = i0 + strip + i, col = p0 + p;
        dst[p * MR + i] = transpose ? a[col * lda + row] : a[row * lda + col];
      }
      for (int i = height; i < MR; ++i) dst[p * MR + i] = T(0);
    }
  }
}

// Packs one NR-column strip of op(B)[p0 : p0 + depth, j0 : j0 + cols], k-major.
template <typename T, int NR>
void pack_b_strip(bool transpose, const T* b, int ldb, int p0, int depth, int j0, int cols,
                  T* out) {
  for (int p = 0; p < depth; ++p) {
    for (int j = 0; j < cols; ++j) {
      const int64_t row = p0 + p, col = j0 + j;
      out[p * NR + j] = transpose ? b[col * ldb + row] : b[row * ldb + col];
    }
    for (int j = cols; j < NR; ++j) out[p * NR + j] = T(0);
  }
}

// C tile (rows x cols of it valid) = alpha * A strip * B strip + beta * C tile. `beta == 0`
// writes without reading, so C may hold NaN on entry.
template <typename T, int MR, int NR>
void micro_kernel(int depth, const T* __restrict a, const T* __restrict b, T alpha, T beta,
                  T* __restrict c, int ldc, int rows, int cols) {
  T acc[MR][NR] = {};
  for (int p = 0; p < depth; ++p) {
    const T* a_p = a + p * MR;
    const T* b_p = b + p * NR;
    for (int i = 0; i < MR; ++i) {
      const T a_i = a_p[i];
      // Without the hint GCC vectorises across i with shuffles; along j it is one
      // broadcast, NR/lanes multiplies and adds per row.
#pragma omp simd
      for (int j = 0; j < NR; ++j) acc[i][j] += a_i * b_p[j];
    }
  }
  for (int i = 0; i < rows; ++i) {
    T* c_row = c + static_cast<int64_t>(i) * ldc;
    if (beta == T(0)) {
      for (int j = 0; j < cols; ++j) c_row[j] = alpha * acc[i][j];
    } else {
      for (int j = 0; j < cols; ++j) c_row[j] = alpha * acc[i][j] + beta * c_row[j];
    }
  }
}

template <typename T>
void scale_c(int m, int n, T beta, T* c, int ldc) {
  for (int i = 0; i < m; ++i) {
    T* row = c + static_cast<int64_t>(i) * ldc;
    for (int j = 0; j < n; ++j) row[j] = beta == T(0) ? T(0) : beta * row[j];
  }
}

}  // namespace

template <typename T>
void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, T alpha, const T* a, int lda,
          const T* b, int ldb, T beta, T* c, int ldc) {
  using B = Blocking<T>;
  constexpr int MR = B::mr, NR = B::nr, MC = B::mc, KC = B::kc, NC = B::nc, NT = B::nt;
  RDDP_ASSERT(m >= 0 && n >= 0 && k >= 0);
  RDDP_ASSERT(lda >= std::max(1, transpose_a ? m : k));
  RDDP_ASSERT(ldb >= std::max(1, transpose_b ? k : n));
  RDDP_ASSERT(ldc >= std::max(1, n));
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == T(0)) {
    scale_c(m, n, beta, c, ldc);
    return;
  }

  const int b_strips_max = (std::min(n, NC) + NR - 1) / NR;
  std::vector<T> b_pack(static_cast<size_t>(b_strips_max) * NR * std::min(k, KC));
  const bool parallel = static_cast<int64_t>(m) * n * k >= kParallelThreshold;
  const int threads = parallel ? omp_get_max_threads() : 1;
  const int a_rows_max = (std::min(m, MC) + MR - 1) / MR * MR;
  std::vector<T> a_packs(static_cast<size_t>(threads) * a_rows_max * std::min(k, KC));

#pragma omp parallel num_threads(threads) if (parallel)
  {
    T* a_pack = a_packs.data() + static_cast<size_t>(omp_get_thread_num()) * a_rows_max *
                                     std::min(k, KC);
    for (int j0 = 0; j0 < n; j0 += NC) {
      const int width = std::min(NC, n - j0);
      const int b_strips = (width + NR - 1) / NR;
      for (int p0 = 0; p0 < k; p0 += KC) {
        const int depth = std::min(KC, k - p0);
        // Later K blocks add onto what the first one wrote.
        const T block_beta = p0 == 0 ? beta : T(1);

        // Dynamic schedules: a thread that loses its core to another process (several ranks
        // on one node, a busy CI machine) then delays the team by one strip or tile, not by
        // its whole static share. Which thread computes a tile does not change its bits.
#pragma omp for schedule(dynamic)
        for (int strip = 0; strip < b_strips; ++strip) {
          const int col = strip * NR;
          pack_b_strip<T, NR>(transpose_b, b, ldb, p0, depth, j0 + col,
                              std::min(NR, width - col), b_pack.data() + col * depth);
        }

        // Tiles of MC rows by NT columns: enough of them to keep every thread busy even when
        // one of m and n is small (a 64-channel convolution, a thin fully connected layer).
        const int row_tiles = (m + MC - 1) / MC, col_tiles = (width + NT - 1) / NT;
        int packed_row_tile = -1;
#pragma omp for schedule(dynamic)
        for (int tile = 0; tile < row_tiles * col_tiles; ++tile) {
          const int row_tile = tile / col_tiles, col_tile = tile % col_tiles;
          const int i0 = row_tile * MC, rows = std::min(MC, m - i0);
          if (row_tile != packed_row_tile) {
            pack_a<T, MR>(transpose_a, a, lda, i0, rows, p0, depth, a_pack);
            packed_row_tile = row_tile;
          }
          const int c0 = col_tile * NT, c1 = std::min(width, c0 + NT);
          for (int col = c0; col < c1; col += NR) {
            const T* b_strip = b_pack.data() + col * depth;
            for (int row = 0; row < rows; row += MR) {
              T* c_tile = c + static_cast<int64_t>(i0 + row) * ldc + j0 + col;
              micro_kernel<T, MR, NR>(depth, a_pack + row * depth, b_strip, alpha, block_beta,
                                      c_tile, ldc, std::min(MR, rows - row),
                                      std::min(NR, c1 - col));
            }
          }
        }
      }
    }
  }
}

template void gemm<float>(bool, bool, int, int, int, float, const float*, int, const float*, int,
                          float, float*, int);
template void gemm<double>(bool, bool, int, int, int, double, const double*, int, const double*,
                           int, double, double*, int);

}  // namespace rddp::cpu
