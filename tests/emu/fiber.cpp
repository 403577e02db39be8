// Context switches for the emulator's fibers. On x86-64 a hand-written switch saves only the
// callee-saved general registers: glibc's swapcontext also makes a sigprocmask system call at
// every switch, and a block of 256 threads switches at every barrier, which made emulated
// launches several times slower. Elsewhere swapcontext does the job.
//
// The floating-point control words (MXCSR, the x87 control word) are left out too. Saving and
// restoring them took three quarters of every switch (ldmxcsr and fldcw stall the pipeline),
// and nothing here changes them: CUDA code picks its rounding per instruction, never through a
// mode, so every fiber of the one OS thread runs in the same floating-point environment.
#include "fiber.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif

#ifdef EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace emu::detail {

// A fiber that has exited never returned from its entry, whose frame keeps AddressSanitizer's
// redzone marks; the next fiber on the stack starts at the same place.
static void forget_entry_frame(char* stack_low, size_t stack_bytes) {
#ifdef EMU_ASAN
  constexpr size_t kEntryBytes = 16 << 10;
  __asan_unpoison_memory_region(stack_low + stack_bytes - kEntryBytes, kEntryBytes);
#else
  (void)stack_low;
  (void)stack_bytes;
#endif
}

#if defined(__x86_64__)
extern "C" void emu_switch_stack(void** save_sp, void* resume_sp);
// System V: rbx, rbp and r12-r15 belong to the caller (and MXCSR and the x87 control word,
// which stay as they are: see above).
asm(R"(
  .text
  .p2align 4
  .globl emu_switch_stack
  .type emu_switch_stack, @function
emu_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_switch_stack, .-emu_switch_stack
  .section .note.GNU-stack,"",@progbits
  .text
)");

void prepare_fiber(Fiber& fiber, char* stack_low, size_t stack_bytes, void (*entry)()) {
  fiber.stack_low = stack_low;
  fiber.stack_bytes = stack_bytes;
  forget_entry_frame(stack_low, stack_bytes);
  auto top = reinterpret_cast<uintptr_t>(stack_low + stack_bytes) & ~uintptr_t{15};
  auto* sp = reinterpret_cast<uint64_t*>(top);
  *--sp = 0;  // entry's return address, never used: entry starts with rsp % 16 == 8
  *--sp = reinterpret_cast<uint64_t>(entry);
  for (int reg = 0; reg < 6; ++reg) *--sp = 0;  // rbp, rbx, r12-r15
  fiber.context = sp;
}

static void raw_switch(Fiber& from, Fiber& to) { emu_switch_stack(&from.context, to.context); }
#else
void prepare_fiber(Fiber& fiber, char* stack_low, size_t stack_bytes, void (*entry)()) {
  fiber.stack_low = stack_low;
  fiber.stack_bytes = stack_bytes;
  forget_entry_frame(stack_low, stack_bytes);
  auto* context = static_cast<ucontext_t*>(fiber.context);
  if (context == nullptr) fiber.context = context = new ucontext_t;  // kept with the stack
  getcontext(context);
  context->uc_stack.ss_sp = stack_low;
  context->uc_stack.ss_size = stack_bytes;
  context->uc_link = nullptr;
  makecontext(context, entry, 0);
}

static void raw_switch(Fiber& from, Fiber& to) {
  if (from.context == nullptr) from.context = new ucontext_t;  // the scheduler's, kept for good
  swapcontext(static_cast<ucontext_t*>(from.context), static_cast<ucontext_t*>(to.context));
}
#endif

void switch_fiber(Fiber& from, Fiber& to, bool finished) {
#ifdef EMU_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(finished ? nullptr : &fake_stack, to.stack_low, to.stack_bytes);
  raw_switch(from, to);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#else
  (void)finished;
  raw_switch(from, to);
#endif
}

void fiber_started(Fiber& scheduler) {
#ifdef EMU_ASAN
  const void* low = nullptr;
  size_t bytes = 0;
  __sanitizer_finish_switch_fiber(nullptr, &low, &bytes);
  scheduler.stack_low = const_cast<char*>(static_cast<const char*>(low));
  scheduler.stack_bytes = bytes;
#else
  (void)scheduler;
#endif
}

size_t FiberStacks::stack_bytes() {
#ifdef EMU_ASAN
  return size_t{1} << 20;  // redzones make frames several times larger
#else
  return size_t{256} << 10;  // pages are only committed when touched
#endif
}

void FiberStacks::reserve(size_t count) {
  if (count <= count_) return;
  if (base_ != nullptr) munmap(base_, count_ * stride_);
  stride_ = kGuardBytes + stack_bytes();
  void* memory = mmap(nullptr, count * stride_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) {
    std::fprintf(stderr, "emulator: cannot map %zu fiber stacks\n", count);
    std::abort();
  }
  base_ = static_cast<char*>(memory);
  count_ = count;
  for (size_t i = 0; i < count; ++i) mprotect(base_ + i * stride_, kGuardBytes, PROT_NONE);
}

void FiberStacks::forget_abandoned_frames() {
#ifdef EMU_ASAN
  for (size_t i = 0; i < count_; ++i) __asan_unpoison_memory_region(stack(i), stack_bytes());
#endif
}

FiberStacks::~FiberStacks() {
  if (base_ != nullptr) munmap(base_, count_ * stride_);
}

}  // namespace emu::detail
