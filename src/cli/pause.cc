// `skiff pause [--disk]` and `skiff resume`: sandboxes of the daemon, one
// call each; the exit status is that of the last one that failed.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "api/http_util.h"
#include "cli/commands.h"
#include "cli/daemon_call.h"

namespace skiff::cli {
namespace {

struct PauseFlags {
  ClientFlags client;
  std::vector<std::string> sandbox_ids;
  bool disk = false;  // pause --disk: hibernate
};

int Each(const PauseFlags& f, const char* function) {
  int rc = 0;
  for (const auto& id : f.sandbox_ids) {
    int one = 0;
    nlohmann::json p = {{"sandbox_id", id}};
    if (f.disk) p["mode"] = "disk";
    auto r = CallFunction(f.client, function, p, &one);
    if (!r)
      rc = one;
    else if (f.client.json_out)
      std::printf("%s\n", api::Dump(*r).c_str());
  }
  return rc;
}

void Add(CLI::App& app, int& rc, const char* name, const char* help, const char* function) {
  auto* cmd = app.add_subcommand(name, help);
  auto f = std::make_shared<PauseFlags>();
  AddClientFlags(cmd, f->client);
  cmd->add_option("sandbox", f->sandbox_ids)->required();
  if (std::string(function) == "sandbox::pause")
    cmd->add_flag("--disk", f->disk, "hibernate: save the state to disk and free the VMM (microVM)");
  cmd->callback([f, &rc, function] { rc = Each(*f, function); });
}

}  // namespace

void AddPauseCommands(CLI::App& app, int& rc) {
  Add(app, rc, "pause", "pause sandboxes: their processes stop where they stand, memory and files kept",
      "sandbox::pause");
  Add(app, rc, "resume", "resume paused sandboxes", "sandbox::resume");
}

}  // namespace skiff::cli
