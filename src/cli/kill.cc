// `skiff kill [-s SIG] ID PID`: a signal to a live process's group (KILL
// unless -s names another of INT TERM KILL HUP QUIT USR1 USR2 STOP CONT
// WINCH), as docker kill.
#include <cstdio>
#include <memory>
#include <string>

#include "api/http_util.h"
#include "cli/commands.h"
#include "cli/daemon_call.h"

namespace skiff::cli {
namespace {

using json = nlohmann::json;

struct KillFlags {
  ClientFlags client;
  std::string sandbox_id, signal = "KILL";
  int64_t pid = 0;
};

int Kill(const KillFlags& f) {
  int rc = 0;
  auto r = CallFunction(f.client, "sandbox::process::signal",
                        json{{"sandbox_id", f.sandbox_id}, {"pid", f.pid}, {"signal", f.signal}}, &rc);
  if (r && f.client.json_out) std::printf("%s\n", api::Dump(*r).c_str());
  return rc;
}

}  // namespace

void AddKillCommand(CLI::App& app, int& rc) {
  auto* kill = app.add_subcommand("kill", "signal a process: skiff kill [-s SIG] ID PID");
  auto f = std::make_shared<KillFlags>();
  AddClientFlags(kill, f->client);
  kill->add_option("sandbox", f->sandbox_id)->required();
  kill->add_option("pid", f->pid)->required()->check(CLI::PositiveNumber);
  kill->add_option("-s,--signal", f->signal,
                   "INT TERM KILL HUP QUIT USR1 USR2 STOP CONT WINCH (default KILL)");
  kill->callback([f, &rc] { rc = Kill(*f); });
}

}  // namespace skiff::cli
