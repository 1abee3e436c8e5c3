#include "cli/daemon_call.h"

#include <cstdio>

#include "api/http_util.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/daemon_discovery.h"
#include "cli/report.h"

namespace skiff::cli {

using json = nlohmann::json;

void AddClientFlags(CLI::App* sc, ClientFlags& flags) {
  sc->add_option("--url", flags.url,
                 "daemon address: http://HOST:PORT or unix:PATH (default: SKIFF_URL, the user "
                 "socket, then 127.0.0.1:49134)");
  sc->add_flag("--json", flags.json_out, "print the JSON response");
}

std::optional<json> CallFunction(const ClientFlags& flags, const std::string& id, const json& payload,
                                 int* rc) {
  auto ep = FindDaemon(flags.url, /*autostart=*/true);
  if (!ep.ok()) {
    *rc = ReportError(ep.error());
    return std::nullopt;
  }
  Client c(*ep);
  auto r = c.Post("/v1/functions/" + id, api::Dump(payload));
  if (!r.ok()) {
    *rc = ReportError(r.error());
    return std::nullopt;
  }
  json body = json::parse(r->body, nullptr, false);
  if (r->status != 200) {
    if (flags.json_out) std::printf("%s\n", r->body.c_str());
    *rc = body.is_object()
              ? (flags.json_out ? (body.value("code", "") == "S200" ? kExitTimeout : kExitSkiffError)
                                : ReportErrorObject(body))
              : kExitSkiffError;
    if (!body.is_object()) {
      std::fprintf(stderr, "skiff: HTTP %ld: %s\n", r->status, r->body.c_str());
    }
    return std::nullopt;
  }
  *rc = 0;
  return body;
}

Error DaemonError(long status, const std::string& body) {
  json j = json::parse(body, nullptr, false);
  std::optional<Code> code = j.is_object() ? CodeFromName(j.value("code", "")) : std::nullopt;
  if (!code)
    return Error(Code::kS300,
                 "the daemon answered HTTP " + std::to_string(status) + ": " + body.substr(0, 200));
  Error e(*code, j.value("message", std::string(CodeName(*code))));
  if (auto d = j.find("details"); d != j.end() && !d->is_null()) e.set_details(*d);
  if (auto f = j.find("fix"); f != j.end() && !f->is_null()) e.set_fix(*f);
  if (auto n = j.find("fix_note"); n != j.end())
    e.set_fix_note(n->is_string() ? std::optional<std::string>(n->get<std::string>()) : std::nullopt);
  return e;
}

}  // namespace skiff::cli
