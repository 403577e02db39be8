#pragma once
// The launchers of probe_kernels.cu (see there); pointers are memory from cudaMalloc.
namespace emu_probe {

void block_sum(const int* in, int* out, int blocks);  // 256 threads a block
void warp_intrinsics(int* out);                       // 5 * 32 results
void block_votes(int* out);                           // 2 results, 96 threads
void early_exit(int* out);                            // 128 threads
void divergent_barrier(int* out);                     // 128 threads
void shuffle_after_exit(int* out);                    // 32 threads
void hang(int* out);                                  // 64 threads
void write_past_end(int count, int* out);
void vector_load(const float* in, float* out);
void racy_neighbour(const int* in, int* out);  // 64 threads
void reused_partials(const int* in, int* out); // 64 threads, 128 results
void chained_blocks(int* out, int blocks);     // one thread a block
void too_many_threads(int* out);  // a block of 2048 threads

}  // namespace emu_probe
