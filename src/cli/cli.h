// The `skiff` command line: `run` (embedded, no daemon), `serve` (the
// daemon), `doctor`, `version`, and thin clients of a daemon (`create`,
// `exec`, `ls`, `stop`, `cp`, `fs`, `catalog`).
#pragma once

namespace skiff::cli {

// Exit statuses of `skiff` itself (a command's own status passes through).
inline constexpr int kExitConfig = 2;        // bad config / usage of serve
inline constexpr int kExitTimeout = 124;     // S200: the command timed out
inline constexpr int kExitSkiffError = 125;  // any other S-code error
inline constexpr int kExitInterrupted = 130;

int Main(int argc, char** argv);

}  // namespace skiff::cli
