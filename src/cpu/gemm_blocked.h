#pragma once
// The blocked GEMM behind rddp::cpu::gemm, included once by each source file that compiles it
// for an instruction set (gemm_portable.cpp, gemm_avx2.cpp). Everything here has internal
// linkage and uses no standard-library template that could be emitted out of line: the linker
// keeps one copy of such a function for the whole program, and the AVX2 file's copy must never
// be the one a CPU without AVX2 runs.
//
// Goto/BLIS-style blocking: a KC x NC slice of op(B) is packed once and shared by every
// thread, each thread packs the MC x KC block of op(A) it works on, and a register-tiled
// micro-kernel multiplies MR-row strips of A by NR-column strips of B. The micro-kernel is
// plain loops over fixed-size arrays so that the compiler vectorises it for the instruction
// set its file is built for.
//
// Determinism: every element of C is owned by exactly one tile, and its sum over k runs in
// the same order (KC blocks, then p within the block) whatever the number of threads and
// whatever MR and NR, and each product is rounded before it is added (the files are built
// without contraction into fused multiply-adds). So every element comes out with the same bits
// with 1 or 64 threads, and from either instruction set's file.
#include <omp.h>

#include <cstddef>
#include <cstdint>

namespace rddp::cpu {
namespace {

constexpr int kMC = 96, kKC = 256, kNC = 2048, kNT = 256;

// Below this many multiply-adds, starting threads costs more than it saves.
constexpr int64_t kParallelThreshold = int64_t(64) * 64 * 64;

inline int smaller(int a, int b) { return a < b ? a : b; }

// An uninitialised array freed on scope exit.
template <typename T>
class Scratch {
 public:
  explicit Scratch(size_t count) : data_(new T[count]) {}
  ~Scratch() { delete[] data_; }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* get() const { return data_; }

 private:
  T* data_;
};

// Packs op(A)[i0 : i0 + rows, p0 : p0 + depth] into MR-row strips, each stored k-major
// (strip[p * MR + i]); rows past the matrix are zero so the micro-kernel needs no edge case.
template <typename T, int MR>
void pack_a(bool transpose, const T* a, int lda, int i0, int rows, int p0, int depth, T* out) {
  for (int strip = 0; strip < rows; strip += MR) {
    const int height = smaller(MR, rows - strip);
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

// C = alpha * op(A) * op(B) + beta * C for m, n, k >= 1 and alpha != 0 (gemm.cpp checks the
// arguments and handles the rest). MR x NR is the micro-kernel's tile, sized to the registers.
template <typename T, int MR, int NR>
void gemm_blocked(bool transpose_a, bool transpose_b, int m, int n, int k, T alpha, const T* a,
                  int lda, const T* b, int ldb, T beta, T* c, int ldc) {
  const int b_strips_max = (smaller(n, kNC) + NR - 1) / NR;
  const Scratch<T> b_pack(static_cast<size_t>(b_strips_max) * NR * smaller(k, kKC));
  const bool parallel = static_cast<int64_t>(m) * n * k >= kParallelThreshold;
  const int threads = parallel ? omp_get_max_threads() : 1;
  const int a_rows_max = (smaller(m, kMC) + MR - 1) / MR * MR;
  const Scratch<T> a_packs(static_cast<size_t>(threads) * a_rows_max * smaller(k, kKC));

#pragma omp parallel num_threads(threads) if (parallel)
  {
    T* a_pack = a_packs.get() + static_cast<size_t>(omp_get_thread_num()) * a_rows_max *
                                    smaller(k, kKC);
    for (int j0 = 0; j0 < n; j0 += kNC) {
      const int width = smaller(kNC, n - j0);
      const int b_strips = (width + NR - 1) / NR;
      for (int p0 = 0; p0 < k; p0 += kKC) {
        const int depth = smaller(kKC, k - p0);
        // Later K blocks add onto what the first one wrote.
        const T block_beta = p0 == 0 ? beta : T(1);

        // Dynamic schedules: a thread that loses its core to another process (several ranks
        // on one node, a busy CI machine) then delays the team by one strip or tile, not by
        // its whole static share. Which thread computes a tile does not change its bits.
#pragma omp for schedule(dynamic)
        for (int strip = 0; strip < b_strips; ++strip) {
          const int col = strip * NR;
          pack_b_strip<T, NR>(transpose_b, b, ldb, p0, depth, j0 + col,
                              smaller(NR, width - col), b_pack.get() + col * depth);
        }

        // Tiles of MC rows by NT columns: enough of them to keep every thread busy even when
        // one of m and n is small (a 64-channel convolution, a thin fully connected layer).
        const int row_tiles = (m + kMC - 1) / kMC, col_tiles = (width + kNT - 1) / kNT;
        int packed_row_tile = -1;
#pragma omp for schedule(dynamic)
        for (int tile = 0; tile < row_tiles * col_tiles; ++tile) {
          const int row_tile = tile / col_tiles, col_tile = tile % col_tiles;
          const int i0 = row_tile * kMC, rows = smaller(kMC, m - i0);
          if (row_tile != packed_row_tile) {
            pack_a<T, MR>(transpose_a, a, lda, i0, rows, p0, depth, a_pack);
            packed_row_tile = row_tile;
          }
          const int c0 = col_tile * kNT, c1 = smaller(width, c0 + kNT);
          for (int col = c0; col < c1; col += NR) {
            const T* b_strip = b_pack.get() + col * depth;
            for (int row = 0; row < rows; row += MR) {
              T* c_tile = c + static_cast<int64_t>(i0 + row) * ldc + j0 + col;
              micro_kernel<T, MR, NR>(depth, a_pack + row * depth, b_strip, alpha, block_beta,
                                      c_tile, ldc, smaller(MR, rows - row),
                                      smaller(NR, c1 - col));
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace rddp::cpu
