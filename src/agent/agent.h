// skiff-agent's core: one event loop serving the protocol of
// protocol/frame.h on one channel fd. It runs execs through the exec engine
// (exec_engine.h: each in its own process group, output streamed under the
// host's credit), the filesystem operations of fs_ops.h on a small pool of
// worker threads (fs_pool.h; the channel is written by the loop alone),
// reaps every zombie (it is PID 1), and exits when the channel closes,
// killing everything it started.
#pragma once

#include <string>

#include "base/error.h"
#include "base/unique_fd.h"
#include "confine/confine.h"

namespace skiff::agent {

struct AgentOptions {
  // Confinement for exec'd children; nullptr runs them unconfined (tests of
  // the loop only). The policy must outlive the agent.
  const confine::ChildPolicy* child_policy = nullptr;
  // A microVM guest: when the loop ends (shutdown, or the host is gone) the
  // machine is powered off (VmPowerOff) instead of PID 1 exiting.
  bool vm = false;
};

// The agent's version string ("skiff-agent/<version>").
std::string AgentName();
// The ops announced in HELLO.
std::vector<std::string> SupportedOps();

// Serves the channel until it closes or a shutdown request. Returns the
// process exit code.
int RunAgent(UniqueFd channel, const AgentOptions& options);

// Process-wide setup for PID 1: SIGPIPE ignored, SIGCHLD blocked (consumed
// through a signalfd by RunAgent), not dumpable, umask 0, cwd "/", raised
// RLIMIT_NOFILE. The security-relevant steps (SIGPIPE, not dumpable) are
// checked: an error means the agent must not serve.
Status PrepareProcess();

}  // namespace skiff::agent
