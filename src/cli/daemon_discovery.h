// Finding the daemon a client subcommand talks to: --url, else SKIFF_URL,
// else the per-user socket, else the default loopback port, else a daemon
// started in the background. SKIFF_TOKEN, when set, is the bearer token.
#pragma once

#include <string>

#include "base/error.h"
#include "cli/client.h"

namespace skiff::cli {

// Finds a daemon; starts one in the background when none answers and
// `autostart` is set (saying so on stderr).
Result<Endpoint> FindDaemon(const std::string& url_flag, bool autostart);

}  // namespace skiff::cli
