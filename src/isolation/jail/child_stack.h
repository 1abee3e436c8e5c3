// The stack of a CLONE_VM child (the posix_spawn technique).
#pragma once

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

}  // namespace skiff::jail
