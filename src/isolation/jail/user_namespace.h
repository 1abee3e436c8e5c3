// The sandbox's user namespace (root inside = the slot's first uid on the
// host) and the idmapped trees its root filesystem is built from.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/error.h"
#include "base/pidfd.h"
#include "base/unique_fd.h"
#include "isolation/jail/child_stack.h"

namespace skiff::jail {

// Held by a throwaway CLONE_VM child (the daemon is multi-threaded and
// cannot unshare one itself), mapped, opened; the holder is killed and then
// reaped when `holder` goes (it never runs user code again once killed).
struct UserNamespace {
  UniqueFd fd;
  ChildStack stack;
  Process holder;
};

// A user namespace mapping 0..65535 inside to base..base+65535 outside.
Result<std::unique_ptr<UserNamespace>> MakeUserNamespace(uint32_t base);

// A detached, read-only, idmapped copy of `dir`: files owned by host uid N
// appear owned by N inside the user namespace `userns_fd`.
Result<UniqueFd> IdmappedTree(const std::string& dir, int userns_fd);

}  // namespace skiff::jail
