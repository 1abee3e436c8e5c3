// Finding the daemon a client subcommand talks to: --url, else SKIFF_URL,
// else the per-user socket, else the default loopback port, else a daemon
// started in the background. SKIFF_TOKEN, when set, is the bearer token.
#pragma once

#include <optional>
#include <string>

#include "base/error.h"
#include "cli/client.h"

namespace skiff::cli {

// Finds a daemon; starts one in the background when none answers and
// `autostart` is set (saying so on stderr).
Result<Endpoint> FindDaemon(const std::string& url_flag, bool autostart);

// The daemon `skiff run` goes to: the one --url or SKIFF_URL names (an
// error when it does not answer), else the per-user socket's when a daemon
// accepts a connection there (a connect, no request: it costs well under a
// millisecond), else none. Never starts one.
Result<std::optional<Endpoint>> FindRunningDaemon(const std::string& url_flag);

}  // namespace skiff::cli
