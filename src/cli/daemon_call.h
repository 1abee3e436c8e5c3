// What every client subcommand shares: the --url/--json flags, and calling
// one function (`POST /v1/functions/ID`) on the daemon they select.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/error.h"

namespace skiff::cli {

struct ClientFlags {
  std::string url;        // --url: "" = SKIFF_URL, the user socket, the default port
  bool json_out = false;  // --json: print the daemon's JSON instead of text
};

// Adds --url and --json to the client subcommand `sc`, bound to `flags`.
void AddClientFlags(CLI::App* sc, ClientFlags& flags);

// Calls function `id` with `payload` on the daemon (started in the
// background if none runs). On success prints nothing, sets *rc to 0 and
// returns the result; otherwise reports the error (as JSON with --json),
// sets *rc to the exit status and returns nullopt.
std::optional<nlohmann::json> CallFunction(const ClientFlags& flags, const std::string& id,
                                           const nlohmann::json& payload, int* rc);

// A daemon's error answer (HTTP `status`, `body` its error object) as the
// Error it was made from — code, message, details, fix — so it is shown as
// the CLI shows its own; a body that is no error object is S300.
Error DaemonError(long status, const std::string& body);

}  // namespace skiff::cli
