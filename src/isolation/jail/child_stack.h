// The stack of a CLONE_VM child (the posix_spawn technique), and the clone
// that starts one.
#pragma once

#include <dlfcn.h>
#include <sched.h>

#include <cstddef>
#include <memory>

namespace skiff::jail {

// Freed only after the child has exec'd or been reaped.
struct ChildStack {
  static constexpr size_t kSize = size_t{256} * 1024;
  ChildStack() : mem(new char[kSize]) {}
  void* top() const { return mem.get() + kSize; }  // x86-64/arm64: grows down
  std::unique_ptr<char[]> mem;
};

// A function run as a CLONE_VM child that does not stop the parent (no
// CLONE_VFORK) runs beside it on the parent's thread-local state: it must
// not be instrumented by a sanitizer, whose runtime keeps its per-thread
// state there.
#define SKIFF_CLONE_CHILD __attribute__((no_sanitize("address", "thread", "undefined")))

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_ignore_thread_begin();  // NOLINT(bugprone-reserved-identifier)
extern "C" void __tsan_ignore_thread_end();    // NOLINT(bugprone-reserved-identifier)
#endif

// ::clone(fn, stack, flags, arg, pidfd). Under ThreadSanitizer, glibc's own
// clone: the runtime's interceptor treats every clone as a fork and has the
// child reset the runtime's state, which a CLONE_VM child shares with the
// parent (the parent's runtime then dies of "starting new threads after
// multi-threaded fork" or a wild jump). A CLONE_VFORK child runs on the
// stopped parent thread's sanitizer state: it is ignored meanwhile, or a
// report from the child (which cannot be told apart from the parent) would
// die holding the runtime's locks, and every thread of the parent would
// wait on them for ever.
inline int CloneVm(int (*fn)(void*), void* stack, int flags, void* arg, int* pidfd) {
#if defined(__SANITIZE_THREAD__)
  using CloneFn = int (*)(int (*)(void*), void*, int, void*, ...);
  static const CloneFn libc_clone = [] {
    void* libc = ::dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    void* sym = libc != nullptr ? ::dlsym(libc, "clone") : nullptr;
    return sym != nullptr ? reinterpret_cast<CloneFn>(sym) : &::clone;
  }();
  __tsan_ignore_thread_begin();
  int pid = libc_clone(fn, stack, flags, arg, pidfd);
  __tsan_ignore_thread_end();
  return pid;
#else
  return ::clone(fn, stack, flags, arg, pidfd);
#endif
}

}  // namespace skiff::jail
