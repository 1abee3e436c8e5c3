// Where skiff keeps things on the host.
#pragma once

#include <string>

namespace skiff::paths {

// Per-boot runtime state: /run/skiff (root) or $XDG_RUNTIME_DIR/skiff.
std::string RuntimeDir();
// Persistent data: $XDG_DATA_HOME/skiff, else ~/.local/share/skiff.
std::string DataDir();
// Shared caches (images, kernels): SKIFF_CACHE_DIR, else /var/cache/skiff.
std::string CacheDir();
// The skiff-agent binary: SKIFF_AGENT, else next to the running executable.
std::string AgentBinary();
// Directory of the running executable.
std::string SelfDir();

}  // namespace skiff::paths
