// The microVM initramfs: an uncompressed newc cpio holding only the static
// skiff-agent as /init (plus /dev/console and the empty directories it
// mounts on), cached by the agent binary's SHA-256.
#pragma once

#include <string>

#include "base/error.h"

namespace skiff::microvm {

// The cpio bytes for an agent binary's content (deterministic: mtime 0).
std::string BuildInitramfs(std::string_view agent);

// Returns <cache_dir>/initramfs/<sha256 prefix>.cpio, writing it first when
// missing (atomically: temp file + rename, so concurrent creators are safe).
Result<std::string> EnsureInitramfs(const std::string& agent_path, const std::string& cache_dir);

}  // namespace skiff::microvm
