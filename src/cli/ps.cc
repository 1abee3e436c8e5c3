// `skiff ps ID`: a sandbox's live processes (sandbox::process::list), as a
// table.
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#include "api/http_util.h"
#include "cli/columns.h"
#include "cli/commands.h"
#include "cli/daemon_call.h"

namespace skiff::cli {
namespace {

using json = nlohmann::json;

std::string StatusText(const json& p) {
  if (p.value("state", "") == "running") return "running";
  if (p.value("signal", 0) != 0) return "killed (" + std::to_string(p.value("signal", 0)) + ")";
  return "exited (" + std::to_string(p.value("exit_code", 0)) + ")";
}

std::string Command(const json& p) {
  std::string s;
  for (const auto& a : p.value("argv", json::array())) {
    if (!s.empty()) s += ' ';
    s += a.get<std::string>();
  }
  return s;
}

int Ps(const ClientFlags& flags, const std::string& id) {
  int rc = 0;
  auto r = CallFunction(flags, "sandbox::process::list", json{{"sandbox_id", id}}, &rc);
  if (!r) return rc;
  if (flags.json_out) {
    std::printf("%s\n", api::Dump(*r).c_str());
    return rc;
  }
  std::printf("%s%s%s%s%s\n", Pad("PID", 8).c_str(), Pad("STATUS", 14).c_str(), Pad("TTY", 5).c_str(),
              Pad("TAG", 14).c_str(), "COMMAND");
  for (const auto& p : r->value("processes", json::array())) {
    std::string tag = p.value("tag", std::string("-"));
    std::printf("%s%s%s%s%s\n", Pad(std::to_string(p.value("pid", 0)), 8).c_str(),
                Pad(StatusText(p), 14).c_str(), Pad(p.contains("pty") ? "yes" : "-", 5).c_str(),
                Pad(tag, 14).c_str(), Command(p).c_str());
  }
  return rc;
}

}  // namespace

void AddPsCommand(CLI::App& app, int& rc) {
  auto* ps = app.add_subcommand("ps", "list a sandbox's processes: skiff ps ID");
  auto flags = std::make_shared<ClientFlags>();
  auto id = std::make_shared<std::string>();
  AddClientFlags(ps, *flags);
  ps->add_option("sandbox", *id)->required();
  ps->callback([flags, id, &rc] { rc = Ps(*flags, *id); });
}

}  // namespace skiff::cli
