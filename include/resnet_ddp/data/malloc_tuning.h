#pragma once
// Loader threads allocate and free a few image-sized buffers per image (a decoded photo, a
// crop, the resize's passes: 0.1 to 1 MB each). glibc serves blocks above its mmap threshold
// (128 KiB, raised only by some frees) with fresh mappings and returns freed heap tops to the
// kernel, so each image pays page faults and zeroing again: measured here, 30 to 40 % of an
// image folder loader's images/s and 5 to 10 % of a pack's (bench/loader_bench --data).
// Keeping such blocks in the heap for reuse removes that cost.
#include <string>

namespace rddp::data {

// Once per process: blocks up to 64 MiB from the heap, and freed memory returned to the
// kernel only beyond 256 MiB at a heap's top. Does nothing where the user set glibc's malloc
// tunables (GLIBC_TUNABLES with glibc.malloc.*), or on a C library other than glibc. Returns
// what is in force, for the settings table.
std::string keep_freed_image_memory();

}  // namespace rddp::data
