#pragma once
// Fibers: the emulated threads of a block, each on a stack of its own, switched cooperatively on
// one OS thread. Only the scheduler switches into a fiber and a fiber only switches back to the
// scheduler, so a switch is a pair (scheduler <-> fiber) and the scheduler's own context is an
// ordinary Fiber without a stack of ours.
#include <cstddef>

namespace emu::detail {

struct Fiber {
  void* context = nullptr;   // the saved stack pointer (x86-64) or ucontext_t (elsewhere)
  char* stack_low = nullptr;  // lowest usable address; null for the scheduler's own stack
  size_t stack_bytes = 0;
};

// Sets `fiber` up to start `entry` on the stack [stack_low, stack_low + stack_bytes) at the first
// switch into it. entry must never return: it ends by switching away with finished = true.
void prepare_fiber(Fiber& fiber, char* stack_low, size_t stack_bytes, void (*entry)());

// Saves the running context into `from` and resumes `to`. `finished`: `from` will never be
// resumed (AddressSanitizer then drops its fake stack).
void switch_fiber(Fiber& from, Fiber& to, bool finished = false);

// Called first thing in a fiber's entry: completes the switch that started it and records the
// scheduler's stack into `scheduler` (AddressSanitizer needs it for the switches back).
void fiber_started(Fiber& scheduler);

// Stacks for up to `count` fibers, each with a guard page below it, so that an overflow faults
// instead of corrupting the next stack. Grows on demand and is kept between launches.
class FiberStacks {
 public:
  FiberStacks() = default;
  ~FiberStacks();
  FiberStacks(const FiberStacks&) = delete;
  FiberStacks& operator=(const FiberStacks&) = delete;

  void reserve(size_t count);
  char* stack(size_t i) const { return base_ + i * stride_ + kGuardBytes; }
  static size_t stack_bytes();
  // Clears the sanitizer's marks left on the stacks by fibers that were abandoned mid-run.
  void forget_abandoned_frames();

 private:
  static constexpr size_t kGuardBytes = 4096;
  char* base_ = nullptr;
  size_t count_ = 0, stride_ = 0;
};

}  // namespace emu::detail
