// `skiff ls`: the daemon's sandboxes, as a table.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "api/http_util.h"
#include "cli/columns.h"
#include "cli/commands.h"
#include "cli/daemon_call.h"

namespace skiff::cli {
namespace {

using json = nlohmann::json;

std::string AgeText(int64_t secs) {
  if (secs < 120) return std::to_string(secs) + "s";
  if (secs < 7200) return std::to_string(secs / 60) + "m";
  return std::to_string(secs / 3600) + "h";
}

int List(const ClientFlags& flags) {
  int rc = 0;
  auto r = CallFunction(flags, "sandbox::list", json::object(), &rc);
  if (!r) return rc;
  if (flags.json_out) {
    std::printf("%s\n", api::Dump(*r).c_str());
    return rc;
  }
  std::printf("%s%s%s%s%s%s\n", Pad("SANDBOX", 38).c_str(), Pad("NAME", 16).c_str(), Pad("IMAGE", 10).c_str(),
              Pad("ISOLATION", 10).c_str(), Pad("AGE", 7).c_str(), "EXECS");
  for (const auto& s : r->value("sandboxes", json::array())) {
    std::string name = s.contains("name") && s["name"].is_string() ? s["name"].get<std::string>() : "-";
    std::printf("%s%s%s%s%s%s\n", Pad(s.value("sandbox_id", ""), 38).c_str(), Pad(name, 16).c_str(),
                Pad(s.value("image", ""), 10).c_str(), Pad(s.value("isolation", ""), 10).c_str(),
                Pad(AgeText(s.value("age_secs", int64_t{0})), 7).c_str(),
                std::to_string(s.value("exec_in_flight", 0)).c_str());
  }
  return rc;
}

}  // namespace

void AddLsCommand(CLI::App& app, int& rc) {
  auto* ls = app.add_subcommand("ls", "list sandboxes");
  auto flags = std::make_shared<ClientFlags>();
  AddClientFlags(ls, *flags);
  ls->callback([flags, &rc] { rc = List(*flags); });
}

}  // namespace skiff::cli
