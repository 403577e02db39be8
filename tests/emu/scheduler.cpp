// Runs an emulated grid: blocks one after another, the threads of a block as fibers taken in
// turn (thread 0, 1, ...), each until it exits or waits. A thread waits at __syncthreads until
// every thread of the block that has not exited is there, and at a warp intrinsic until every
// lane its mask names is at the same intrinsic (lanes in lockstep). When no thread can run and
// no wait can end, the GPU would hang or read lanes that are not there: the launch fails with
// what each thread waits for.
//
// Threads and blocks run in the order thread_order.h sets: forward, the warps in step, or
// reversed with each warp running ahead (forward_turns, reverse_turns).
//
// Most kernels never wait. So a block starts on one fiber, the runner, which takes its threads
// one after another while none waits; the first thread to wait keeps the runner, and the threads
// after it get fibers of their own. The order in which threads run is the same either way.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "call_log.h"
#include "cuda_emu.h"
#include "fiber.h"
#include "launch_fault.h"
#include "thread_order.h"

namespace emu::detail {

ThreadPlace* current_place = nullptr;
uint3 block_idx;
dim3 block_dim, grid_dim;

void check_all_guards(const Config& config);  // host_runtime.cpp
void set_last_error(cudaError_t error);       // host_runtime.cpp

namespace {

constexpr int kWarpSize = 32;
constexpr unsigned kMaxThreadsPerBlock = 1024;

enum class State { ready, block_barrier, warp_collective, exited };

struct EmuThread {
  ThreadPlace place;
  Fiber fiber;                // its own, once it needs one
  Fiber* runs_on = nullptr;   // its own fiber or the block's runner; null until it starts
  int linear = 0;
  State state = State::ready;
  BlockBarrier barrier = BlockBarrier::sync;
  WarpOp op = WarpOp::sync;
  const char* op_name = "";
  const char* barrier_file = "";  // where the thread's __syncthreads is written
  int barrier_line = 0;
  unsigned mask = 0;
  int source = 0;
  uint64_t value = 0, result = 0;
};

struct Grid {
  const Config* config = nullptr;
  void (*body)(void*) = nullptr;
  void* context = nullptr;
  std::vector<EmuThread> threads;  // kept between launches with their fibers
  int count = 0, live = 0;
  EmuThread* running = nullptr;
  Fiber scheduler;
  Fiber runner;
  bool reverse = false;     // thread_order() of this launch
  int next_for_runner = 0;  // the first turn (nth_thread) not yet started
  bool runner_kept = false;  // a thread waited on the runner: it takes no more threads
  FiberStacks stacks;
  std::string fault;  // set by a thread that cannot go on
};

Grid& grid() {
  static Grid g;
  return g;
}

// The k-th thread the runner starts: the order in which forward_turns or reverse_turns first
// reach the threads.
int nth_thread(const Grid& g, int k) { return g.reverse ? g.count - 1 - k : k; }

std::string where(const Config& c) {
  std::ostringstream out;
  out << "kernel " << c.kernel << " (launched at " << c.file << ":" << c.line << "), block ("
      << block_idx.x << "," << block_idx.y << "," << block_idx.z << ") of (" << grid_dim.x << ","
      << grid_dim.y << "," << grid_dim.z << "), " << block_dim.x << "x" << block_dim.y << "x"
      << block_dim.z << " threads";
  if (grid().reverse) out << " (threads and blocks in reverse order)";
  return out.str();
}

std::string thread_name(const EmuThread& t) {
  std::ostringstream out;
  out << "thread (" << t.place.thread_idx.x << "," << t.place.thread_idx.y << ","
      << t.place.thread_idx.z << ") [warp " << t.linear / kWarpSize << " lane "
      << t.linear % kWarpSize << "]";
  return out.str();
}

const char* barrier_name(BlockBarrier b) {
  switch (b) {
    case BlockBarrier::sync: return "__syncthreads";
    case BlockBarrier::sync_or: return "__syncthreads_or";
    case BlockBarrier::sync_and: return "__syncthreads_and";
    case BlockBarrier::sync_count: return "__syncthreads_count";
  }
  return "?";
}

std::string waiting_at(const EmuThread& t) {
  switch (t.state) {
    case State::ready: return "ready";
    case State::exited: return "exited";
    case State::block_barrier:
      return std::string(barrier_name(t.barrier)) + " at " + t.barrier_file + ":" +
             std::to_string(t.barrier_line);
    case State::warp_collective: {
      std::ostringstream out;
      out << t.op_name << " (mask 0x" << std::hex << t.mask << ")";
      return out.str();
    }
  }
  return "?";
}

[[noreturn]] void fail_block(Grid& g, const std::string& why) {
  std::ostringstream out;
  out << "emulated launch failed: " << where(*g.config) << ": " << why;
  // What every thread was doing, grouped, so that a hang reads as one line per kind of wait.
  std::map<std::string, std::vector<int>> by_wait;
  for (int i = 0; i < g.count; ++i) by_wait[waiting_at(g.threads[i])].push_back(i);
  out << "\n  thread states:";
  for (const auto& [wait, ids] : by_wait) {
    out << "\n    " << ids.size() << " at " << wait << ", e.g. " << thread_name(g.threads[ids[0]]);
  }
  g.fault.clear();
  g.running = nullptr;
  g.config = nullptr;
  current_place = nullptr;
  g.stacks.forget_abandoned_frames();
  throw LaunchFault(out.str());
}

// A thread that cannot go on (a bad mask) stops here for good; the scheduler reports it.
[[noreturn]] void fault_in_thread(Grid& g, EmuThread& t, const std::string& why) {
  g.fault = thread_name(t) + ": " + why;
  for (;;) switch_fiber(*t.runs_on, g.scheduler);
}

// One thread's kernel body, on the fiber it runs on, until it exits.
void run_thread(Grid& g, EmuThread& t) {
  try {
    g.body(g.context);
  } catch (const std::exception& e) {
    fault_in_thread(g, t, std::string("threw: ") + e.what());
  }
  t.state = State::exited;
  --g.live;
}

void thread_entry() {
  Grid& g = grid();
  fiber_started(g.scheduler);
  EmuThread& t = *g.running;
  run_thread(g, t);
  switch_fiber(t.fiber, g.scheduler, /*finished=*/true);
  std::abort();  // an exited thread is never resumed
}

void runner_entry() {
  Grid& g = grid();
  fiber_started(g.scheduler);
  while (!g.runner_kept && g.next_for_runner < g.count) {
    EmuThread& t = g.threads[nth_thread(g, g.next_for_runner++)];
    t.runs_on = &g.runner;
    g.running = &t;
    current_place = &t.place;
    run_thread(g, t);
  }
  switch_fiber(g.runner, g.scheduler, /*finished=*/true);
  std::abort();
}

void wait(Grid& g, EmuThread& t) {
  if (t.runs_on == &g.runner) g.runner_kept = true;
  switch_fiber(*t.runs_on, g.scheduler);
}

// Releases the block barrier when every live thread waits at it.
bool release_block_barrier(Grid& g) {
  int waiting = 0, predicates = 0;
  const EmuThread* first = nullptr;
  for (int i = 0; i < g.count; ++i) {
    const EmuThread& t = g.threads[i];
    if (t.state != State::block_barrier) continue;
    if (first == nullptr) first = &t;
    ++waiting;
    predicates += t.value != 0;
  }
  if (waiting == 0 || waiting != g.live) return false;
  // One __syncthreads' __FILE__ is one pointer; strcmp only where two differ, since under
  // AddressSanitizer every strcmp goes through its interceptor (9 % of a kernel test's time).
  for (int i = 0; i < g.count; ++i) {
    const EmuThread& t = g.threads[i];
    if (t.state == State::block_barrier &&
        (t.barrier != first->barrier || t.barrier_line != first->barrier_line ||
         (t.barrier_file != first->barrier_file &&
          std::strcmp(t.barrier_file, first->barrier_file) != 0)))
      fail_block(g, "the threads of the block wait at different barriers: " + waiting_at(t) +
                        " and " + waiting_at(*first));
  }
  int result = 0;
  switch (first->barrier) {
    case BlockBarrier::sync: break;
    case BlockBarrier::sync_or: result = predicates > 0; break;
    case BlockBarrier::sync_and: result = predicates == waiting; break;
    case BlockBarrier::sync_count: result = predicates; break;
  }
  for (int i = 0; i < g.count; ++i) {
    EmuThread& t = g.threads[i];
    if (t.state != State::block_barrier) continue;
    t.result = static_cast<uint64_t>(result);
    t.state = State::ready;
  }
  return true;
}

// Releases each group of lanes of a warp that all wait at the same intrinsic with the same
// mask. A mask that names a lane that has exited or does not exist can never complete.
bool release_warp_collectives(Grid& g, int first_warp, int end_warp) {
  bool released = false;
  for (int base = first_warp * kWarpSize; base < g.count && base < end_warp * kWarpSize;
       base += kWarpSize) {
    const int lanes = std::min(kWarpSize, g.count - base);
    for (int lane = 0; lane < lanes; ++lane) {
      EmuThread& t = g.threads[base + lane];
      if (t.state != State::warp_collective) continue;
      const unsigned mask = t.mask;
      bool complete = true;
      for (int other = 0; other < kWarpSize; ++other) {
        if (!(mask >> other & 1u)) continue;
        if (other >= lanes)
          fail_block(g, thread_name(t) + " calls " + t.op_name + " with mask naming lane " +
                            std::to_string(other) + ", which the block does not have");
        const EmuThread& u = g.threads[base + other];
        if (u.state == State::exited)
          fail_block(g, thread_name(t) + " waits at " + t.op_name + " for lane " +
                            std::to_string(other) + ", which has exited");
        if (u.state != State::warp_collective || u.mask != mask) complete = false;
        else if (u.op != t.op || u.op_name != t.op_name)
          fail_block(g, "lanes of one mask disagree: " + thread_name(t) + " at " + t.op_name +
                            ", " + thread_name(u) + " at " + u.op_name);
      }
      if (!complete) continue;
      uint64_t ballot = 0;
      for (int other = 0; other < lanes; ++other)
        if (mask >> other & 1u) ballot |= (g.threads[base + other].value != 0 ? 1ull : 0ull) << other;
      for (int other = 0; other < lanes; ++other) {
        if (!(mask >> other & 1u)) continue;
        EmuThread& u = g.threads[base + other];
        if (u.op == WarpOp::shuffle) {
          if (u.source < 0 || u.source >= kWarpSize || !(mask >> u.source & 1u))
            fail_block(g, thread_name(u) + " reads lane " + std::to_string(u.source) + " in " +
                              u.op_name + ", which its mask leaves out");
          u.result = g.threads[base + u.source].value;
        } else if (u.op == WarpOp::ballot) {
          u.result = ballot;
        }
      }
      for (int other = 0; other < lanes; ++other)
        if (mask >> other & 1u) g.threads[base + other].state = State::ready;
      released = true;
    }
  }
  return released;
}

// Runs thread i, if it is ready, until it exits or waits.
void take_turn(Grid& g, int i) {
  EmuThread& t = g.threads[i];
  if (t.state != State::ready) return;
  if (t.runs_on == nullptr && !g.runner_kept) {
    // Not started: the runner starts it, and the threads after it while none waits.
    switch_fiber(g.scheduler, g.runner);
  } else {
    if (t.runs_on == nullptr) {
      // Stacks lie a multiple of the page size apart; staggering their tops keeps the hot
      // frames of the threads out of each other's cache sets.
      const size_t stagger = static_cast<size_t>(i % 61) * 64;
      prepare_fiber(t.fiber, g.stacks.stack(i), FiberStacks::stack_bytes() - stagger, &thread_entry);
      t.runs_on = &t.fiber;
    }
    g.running = &t;
    current_place = &t.place;
    switch_fiber(g.scheduler, *t.runs_on);
  }
  if (!g.fault.empty()) fail_block(g, g.fault);
}

int warp_count(const Grid& g) { return (g.count + kWarpSize - 1) / kWarpSize; }

// Forward: every thread gets a turn, 0 first, before any warp intrinsic or barrier releases, so
// the warps move in step.
void forward_turns(Grid& g) {
  for (int i = 0; i < g.count; ++i) take_turn(g, i);
}

// Reverse: the last warp first, its lanes last to first, and each warp runs on through its warp
// intrinsics until it exits or waits at a barrier before the next warp starts. So a warp may also
// get ahead of the others by a whole phase, as on a GPU, and store where another warp has yet to
// load.
void reverse_turns(Grid& g) {
  for (int warp = warp_count(g) - 1; warp >= 0; --warp) {
    const int base = warp * kWarpSize, lanes = std::min(kWarpSize, g.count - base);
    do {
      for (int lane = lanes - 1; lane >= 0; --lane) take_turn(g, base + lane);
    } while (release_warp_collectives(g, warp, warp + 1));
  }
}

void run_block(Grid& g) {
  g.live = g.count;
  for (int i = 0; i < g.count; ++i) {
    g.threads[i].state = State::ready;
    g.threads[i].runs_on = nullptr;
  }
  g.next_for_runner = 0;
  g.runner_kept = false;
  // The runner's stack is the one past the threads'.
  prepare_fiber(g.runner, g.stacks.stack(static_cast<size_t>(g.count)), FiberStacks::stack_bytes(),
                &runner_entry);
  for (;;) {
    if (g.reverse)
      reverse_turns(g);
    else
      forward_turns(g);
    if (g.live == 0) return;
    if (release_block_barrier(g) || release_warp_collectives(g, 0, warp_count(g))) continue;
    fail_block(g, "no thread can go on: a barrier or warp intrinsic that not every thread it "
                  "waits for reaches (a hang on the GPU)");
  }
}

bool valid(const Config& c) {
  const uint64_t threads = uint64_t{c.block.x} * c.block.y * c.block.z;
  return c.grid.x >= 1 && c.grid.y >= 1 && c.grid.z >= 1 && c.grid.x <= 0x7fffffffu &&
         c.grid.y <= 65535 && c.grid.z <= 65535 && threads >= 1 &&
         threads <= kMaxThreadsPerBlock && c.block.x <= 1024 && c.block.y <= 1024 &&
         c.block.z <= 64;
}

}  // namespace

void run_grid(const Config& config, void (*body)(void*), void* context) {
  Grid& g = grid();
  if (g.config != nullptr)
    throw LaunchFault(std::string("emulated launch of ") + config.kernel +
                      " from inside a running kernel: launches are one at a time");
  if (!valid(config)) {
    set_last_error(cudaErrorInvalidConfiguration);  // as the GPU: reported by cudaGetLastError
    return;
  }
  if (config.shared_bytes != 0) {
    // No kernel of ours uses dynamic shared memory (extern __shared__); the emulator has none.
    throw LaunchFault(std::string("emulated launch of ") + config.kernel +
                      " asks for dynamic shared memory, which the emulator does not provide");
  }
  if (logging_calls()) log_call(std::string("kernel ") + config.kernel);
  g.reverse = thread_order() == ThreadOrder::reverse;
  g.config = &config;
  g.body = body;
  g.context = context;
  grid_dim = config.grid;
  block_dim = config.block;
  g.count = static_cast<int>(config.block.x * config.block.y * config.block.z);
  if (g.threads.size() < static_cast<size_t>(g.count)) g.threads.resize(g.count);
  g.stacks.reserve(static_cast<size_t>(g.count) + 1);  // and the runner's
  for (int i = 0; i < g.count; ++i) {
    EmuThread& t = g.threads[i];
    t.linear = i;
    t.place.thread_idx = uint3{static_cast<unsigned>(i) % config.block.x,
                               static_cast<unsigned>(i) / config.block.x % config.block.y,
                               static_cast<unsigned>(i) / (config.block.x * config.block.y)};
  }
  const uint64_t blocks = uint64_t{config.grid.x} * config.grid.y * config.grid.z;
  for (uint64_t k = 0; k < blocks; ++k) {
    const uint64_t b = g.reverse ? blocks - 1 - k : k;
    block_idx = uint3{static_cast<unsigned>(b % config.grid.x),
                      static_cast<unsigned>(b / config.grid.x % config.grid.y),
                      static_cast<unsigned>(b / (uint64_t{config.grid.x} * config.grid.y))};
    run_block(g);
  }
  g.running = nullptr;
  current_place = nullptr;
  g.config = nullptr;
  check_all_guards(config);
}

int block_barrier(BlockBarrier kind, int predicate, const char* file, int line) {
  Grid& g = grid();
  EmuThread& t = *g.running;
  t.state = State::block_barrier;
  t.barrier = kind;
  t.barrier_file = file;
  t.barrier_line = line;
  t.value = predicate != 0;
  wait(g, t);
  return static_cast<int>(t.result);
}

int current_lane() { return grid().running->linear % kWarpSize; }

uint64_t warp_collective(WarpOp op, const char* name, unsigned mask, uint64_t value, int source) {
  Grid& g = grid();
  EmuThread& t = *g.running;
  if (!(mask >> (t.linear % kWarpSize) & 1u))
    fault_in_thread(g, t, std::string(name) + " with a mask that leaves out the calling lane");
  t.state = State::warp_collective;
  t.op = op;
  t.op_name = name;
  t.mask = mask;
  t.value = value;
  t.source = source;
  wait(g, t);
  return t.result;
}

}  // namespace emu::detail

namespace emu {
namespace {

std::optional<ThreadOrder>& chosen_order() {
  static std::optional<ThreadOrder> order;
  return order;
}

ThreadOrder order_from_environment() {
  const char* set = std::getenv("RDDP_EMU_THREAD_ORDER");
  if (set == nullptr || *set == '\0' || std::strcmp(set, "forward") == 0)
    return ThreadOrder::forward;
  if (std::strcmp(set, "reverse") == 0) return ThreadOrder::reverse;
  throw LaunchFault(std::string("RDDP_EMU_THREAD_ORDER is \"") + set +
                    "\"; set it to forward or reverse, or leave it unset");
}

}  // namespace

ThreadOrder thread_order() {
  if (!chosen_order()) chosen_order() = order_from_environment();
  return *chosen_order();
}

void set_thread_order(ThreadOrder order) { chosen_order() = order; }

const char* to_string(ThreadOrder order) {
  return order == ThreadOrder::reverse ? "reverse" : "forward";
}

}  // namespace emu
