// `skiff stop`: sandboxes of the daemon, one call each; the exit status is
// that of the last one that failed.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "api/http_util.h"
#include "cli/commands.h"
#include "cli/daemon_call.h"

namespace skiff::cli {
namespace {

struct StopFlags {
  ClientFlags client;
  std::vector<std::string> sandbox_ids;
  bool no_wait = false;
};

int Stop(const StopFlags& f) {
  int rc = 0;
  for (const auto& id : f.sandbox_ids) {
    int one = 0;
    auto r = CallFunction(f.client, "sandbox::stop", {{"sandbox_id", id}, {"wait", !f.no_wait}}, &one);
    if (!r)
      rc = one;
    else if (f.client.json_out)
      std::printf("%s\n", api::Dump(*r).c_str());
  }
  return rc;
}

}  // namespace

void AddStopCommand(CLI::App& app, int& rc) {
  auto* stop = app.add_subcommand("stop", "stop sandboxes");
  auto f = std::make_shared<StopFlags>();
  AddClientFlags(stop, f->client);
  stop->add_option("sandbox", f->sandbox_ids)->required();
  stop->add_flag("--no-wait", f->no_wait, "return before the sandbox is fully gone");
  stop->callback([f, &rc] { rc = Stop(*f); });
}

}  // namespace skiff::cli
