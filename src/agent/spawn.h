// Starting one exec'd process: fork, confine, execve with the agent's own
// PATH search. Everything between fork and execve is async-signal-safe and
// uses only memory prepared before the fork.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"
#include "confine/confine.h"

namespace skiff::agent {

struct SpawnRequest {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "K=V", the final environment
  std::string cwd = "/";
};

struct Spawned {
  pid_t pid = -1;  // also the process group id
  UniqueFd stdin_w, stdout_r, stderr_r;
};

// Outcome of a spawn attempt that did not produce a running process but is
// reported as a normal exec result (127/126 + stderr text).
struct SpawnFailure {
  int exit_code = 0;
  std::string stderr_text;
};

struct SpawnOutcome {
  bool started = false;
  Spawned proc;          // started
  SpawnFailure failure;  // !started
};

// Candidate program paths for argv0: itself when it contains '/', else each
// PATH entry (from env's PATH, or the default PATH) joined with it.
std::vector<std::string> ProgramCandidates(const std::string& argv0,
                                           const std::vector<std::string>& env);

// Errors: S211/S212 for a bad cwd, S300 for other spawn failures.
Result<SpawnOutcome> Spawn(const SpawnRequest& req, const confine::ChildPolicy* policy);

}  // namespace skiff::agent
