// Copying a sandbox's writable tree between a jail and a snapshot
// (docs/snapshots.md): the overlays' upper directories and /tmp, read
// through descriptors the init handed the host (child.h, state_sock).
// The tree is the sandbox's, so hostile: every step is fd-relative and
// follows no link; regular files, directories, symlinks, fifos and overlay
// whiteouts (0/0 character devices) are copied with their mode, times,
// the overlay's and user xattrs, and owners moved from one uid range to
// another; sockets and other device nodes are skipped. Bounded: at most
// `max_bytes` of file data (S400 beyond), kMaxEntries entries and
// kMaxDepth levels (S400).
#pragma once

#include <cstdint>

#include "base/error.h"

namespace skiff::jail {

inline constexpr uint64_t kMaxEntries = 1'000'000;
inline constexpr int kMaxDepth = 256;

// Owners of the source are in [from, from + 65536) (a sandbox's range, or
// 0 for a snapshot); they become the same offset from `to`. An id outside
// the range becomes `to` + 65534 (nobody).
struct IdShift {
  uint32_t from = 0;
  uint32_t to = 0;
};

// Copies the contents of directory `src` into directory `dst` (which
// exists and is empty), and `src`'s own mode, owner and times onto `dst`.
// *bytes gets the file data copied.
Status CopyTree(int src, int dst, IdShift shift, uint64_t max_bytes, uint64_t* bytes);

}  // namespace skiff::jail
