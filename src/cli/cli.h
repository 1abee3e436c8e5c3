// The `skiff` command line: `run` (embedded, no daemon), `serve` (the
// daemon), `doctor`, `version`, and thin clients of a daemon (`create`,
// `exec`, `ls`, `stop`, `cp`, `fs`, `catalog`).
#pragma once

#include "sandbox/config.h"

namespace skiff::cli {

// Exit statuses of `skiff` itself (a command's own status passes through).
inline constexpr int kExitConfig = 2;        // bad config / usage of serve
inline constexpr int kExitTimeout = 124;     // S200: the command timed out
inline constexpr int kExitSkiffError = 125;  // any other S-code error
inline constexpr int kExitInterrupted = 130;

// The daemon's main (the `skiff` binary's, cmd/skiff/daemon_main.cc), which
// `serve` runs under the Config its file and flags make; its result is
// skiff's exit status. The daemon's composition lives with the binary, so
// the command line needs no link to it.
using DaemonMain = int (*)(Config config);

int Main(int argc, char** argv, DaemonMain daemon);

}  // namespace skiff::cli
