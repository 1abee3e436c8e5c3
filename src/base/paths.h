// Where skiff keeps things on the host.
#pragma once

#include <string>

namespace skiff::paths {

// Per-boot runtime state of this skiff (its socket, sandbox state
// directories): SKIFF_RUNTIME_DIR, else /run/skiff (root) or
// $XDG_RUNTIME_DIR/skiff.
std::string RuntimeDir();
// Per-boot state every skiff on the host shares: the locks that guard
// host-wide resources (uid ranges, cgroups). Never SKIFF_RUNTIME_DIR: two
// skiffs with runtime directories of their own still share those resources,
// so they must see each other's locks.
std::string HostRuntimeDir();
// Persistent data: $XDG_DATA_HOME/skiff, else ~/.local/share/skiff.
std::string DataDir();
// Shared caches (images, kernels): SKIFF_CACHE_DIR, else /var/cache/skiff.
std::string CacheDir();
// The skiff-agent binary: SKIFF_AGENT, else next to the running executable.
std::string AgentBinary();
// Directory of the running executable.
std::string SelfDir();

}  // namespace skiff::paths
