// The composition root of the sandbox layer: builds the isolation backends
// this host supports (jail, microVM), with the host probes only they can
// answer, and a SandboxManager over them. The one place outside
// src/isolation that names the concrete backends.
#pragma once

#include <memory>

#include "base/error.h"
#include "sandbox/config.h"
#include "sandbox/manager.h"

namespace skiff {

// The backends `config.isolation` asks for that are available here (each
// cleaned of an earlier run's orphans), and a manager for them. S300 when
// the configured isolation, or every backend, is unavailable.
Result<std::unique_ptr<SandboxManager>> MakeSandboxManager(Config config);

}  // namespace skiff
