// What a spawned child's failure report (base/child_report.h) means for the
// exec: a missing or unrunnable program is an ordinary exec result (127 or
// 126 and a line on stderr), a bad workdir an S211/S212, anything else S300.
#pragma once

#include "agent/spawn.h"
#include "base/child_report.h"
#include "base/error.h"

namespace skiff::agent {

// The steps of a spawned child between clone and execve, as its
// ChildFailure's `step` (0 is no step: a record of someone else).
enum class SpawnStep : int {
  kSetup = 1,        // setsid, the standard descriptors
  kWorkdir = 2,      // chdir to the request's cwd
  kConfine = 3,      // confine::ApplyInChild
  kCredentials = 4,  // setgroups, setresgid, setresuid
  kExec = 5,         // execve of every candidate path
};

// The outcome of `req` whose child reported `f` instead of exec'ing.
Result<SpawnOutcome> SpawnFailureOutcome(const SpawnRequest& req, const ChildFailure& f);

}  // namespace skiff::agent
