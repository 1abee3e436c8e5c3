// skiffd's main: what `skiff serve` runs once its flags have made a Config.
#pragma once

#include "sandbox/config.h"

namespace skiff {

// Builds the manager from `config`, serves until SIGTERM or SIGINT, then
// stops every sandbox and exits 0 (3 when the engine rejected the worker's
// registration). Returns 1 when the manager, the server's threads or the
// listener cannot start. Config errors (exit 2) are the caller's.
int DaemonMain(Config config);

}  // namespace skiff
