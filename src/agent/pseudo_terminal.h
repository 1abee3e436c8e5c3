// Pseudo-terminals for live processes: a fresh master/slave pair from the
// sandbox's own devpts (/dev/ptmx: the jail mounts a devpts newinstance,
// the microVM guest's init mounts one), its window size, and its
// end-of-file character. No libutil, no pt_chown: the pair is opened with
// ioctls on /dev/ptmx.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/error.h"
#include "base/unique_fd.h"

namespace skiff::agent {

struct TerminalSize {
  unsigned short rows = 24;
  unsigned short cols = 80;
};

struct PtyPair {
  UniqueFd master;  // O_CLOEXEC | O_NONBLOCK
  UniqueFd slave;   // O_CLOEXEC | O_NOCTTY: the child makes it its terminal
};

// A new pair whose window is `size`. S300 when the sandbox has no usable
// /dev/ptmx.
Result<PtyPair> OpenPty(TerminalSize size);

// Sets the window size of the terminal behind `master` (its foreground
// process group gets SIGWINCH from the kernel).
Status ResizePty(int master, TerminalSize size);

// The bytes that make a reader of the terminal behind `master` see end of
// file: its VEOF character in canonical mode, doubled when the line so far
// is not empty (the first one only ends the line); `line_empty` says
// whether the last byte written was a newline (or nothing was written).
// Without ICANON there is no end-of-file character: VEOF is sent as is.
std::string EofBytes(int master, bool line_empty);

}  // namespace skiff::agent
