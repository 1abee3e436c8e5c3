// Starting a host program as a child owned by a Process (pidfd).
#pragma once

#include <string>
#include <vector>

#include "base/error.h"
#include "base/pidfd.h"

namespace skiff {

struct SpawnOptions {
  // Descriptors that become the child's 0, 1 and 2; -1 means /dev/null.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  // Replaces the environment when set (otherwise the caller's is inherited).
  const std::vector<std::string>* env = nullptr;
};

// Starts argv[0] (looked up on PATH when it has no '/') with `options`.
// Every other descriptor of the caller is close-on-exec by project rule, so
// the child gets exactly these three.
Result<Process> Spawn(const std::vector<std::string>& argv, const SpawnOptions& options = {});

}  // namespace skiff
