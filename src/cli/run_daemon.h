// `skiff run` through a running daemon (docs/cli.md#skiff-run-and-a-running-daemon):
// the same functions the embedded run calls in-process — sandbox::run for
// code, sandbox::create + sandbox::exec + sandbox::stop for a command,
// sandbox::process::start attached to this terminal for -i/-t — sent to a
// daemon, so the sandbox comes from its warm pool and this process builds
// no backend. Output, exit status and errors are the embedded run's.
#pragma once

#include <optional>

#include "base/error.h"
#include "cli/client.h"
#include "cli/run_flags.h"

namespace skiff::cli {

// The daemon a run goes to: none with --embedded; the one --url or
// $SKIFF_URL names (an error when it does not answer); else the per-user
// socket's when a daemon listens there; else none. Never starts one.
Result<std::optional<Endpoint>> DaemonForRun(const RunFlags& f);

// Runs `f` (already checked, image chosen) on the daemon at `ep`; returns
// the exit status.
int RunThroughDaemon(const Endpoint& ep, const RunFlags& f);

}  // namespace skiff::cli
