// Starting one exec'd process: fork, confine, execve with the agent's own
// PATH search. Everything between fork and execve is async-signal-safe and
// uses only memory prepared before the fork.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "agent/pseudo_terminal.h"
#include "base/error.h"
#include "base/unique_fd.h"
#include "confine/confine.h"

namespace skiff::agent {

// Who the process runs as (after confinement, before execve).
struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups
};

struct SpawnRequest {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "K=V", the final environment
  std::string cwd = "/";
  std::optional<Credentials> creds;  // unset: the agent's own (root)
  // A fresh pseudo-terminal of this size becomes the child's controlling
  // terminal (its session is new) and its stdin, stdout and stderr; the
  // parent gets the master (Spawned::terminal) and no pipes.
  std::optional<TerminalSize> terminal;
  // Without a terminal: stdin is /dev/null instead of a pipe.
  bool null_stdin = false;
};

struct Spawned {
  pid_t pid = -1;                        // also the process group id
  UniqueFd stdin_w, stdout_r, stderr_r;  // pipes (no terminal; stdin_w not with null_stdin)
  UniqueFd terminal;                     // the pty master (terminal): O_CLOEXEC | O_NONBLOCK
};

// Outcome of a spawn attempt that did not produce a running process but is
// reported as a normal exec result (127/126 + stderr text).
struct SpawnFailure {
  int exit_code = 0;
  std::string stderr_text;
  pid_t pid = -1;  // the child, which exits `exit_code` by itself
};

struct SpawnOutcome {
  bool started = false;
  Spawned proc;          // started
  SpawnFailure failure;  // !started
};

// Candidate program paths for argv0: itself when it contains '/', else each
// PATH entry (from env's PATH, or the default PATH) joined with it.
std::vector<std::string> ProgramCandidates(const std::string& argv0, const std::vector<std::string>& env);

// An OCI `User` value (`name`, `uid`, `name:group`, `uid:gid`) resolved
// against /etc/passwd and /etc/group of the agent's root, as a container
// runtime does: a numeric uid without a passwd entry gets gid 0; a name must
// exist; supplementary groups are the groups that list the user. S300 for
// an unknown name, S001 for a malformed value.
Result<Credentials> ResolveUser(const std::string& user, const std::string& etc_dir = "/etc");

// Errors: S211/S212 for a bad cwd, S300 for other spawn failures.
Result<SpawnOutcome> Spawn(const SpawnRequest& req, const confine::ChildPolicy* policy);

}  // namespace skiff::agent
