#pragma once
// The order in which the emulator runs the threads of a block and the blocks of a grid. A GPU
// promises no order, and the emulator has no memory model: a thread runs until it exits or
// waits, so a missing barrier between a store and a load passes whenever the order happens to
// put the store first. The kernel tests therefore run twice, once in each order:
//   forward  thread 0, 1, 2, ... and block 0, 1, 2, ...; every thread has its turn before a warp
//            intrinsic or a barrier releases, so the warps move in step from one wait to the
//            next (the gentlest order for shared memory);
//   reverse  the blocks last to first; in a block the last warp first, its lanes last to first,
//            and each warp runs on through its warp intrinsics until it exits or reaches a
//            barrier before the next warp starts, so a warp gets a whole phase ahead of the
//            others, as it may on a GPU.
// Between them every pair of threads runs both ways round, and a warp that stores into shared
// memory another warp has yet to read (a barrier left out after a load) is caught.
//
// RDDP_EMU_THREAD_ORDER=forward (the default) or reverse sets it for a process; any other value
// fails the first launch, saying so.
namespace emu {

enum class ThreadOrder { forward, reverse };

ThreadOrder thread_order();
void set_thread_order(ThreadOrder order);
const char* to_string(ThreadOrder order);

}  // namespace emu
