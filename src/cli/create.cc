// `skiff create`: a sandbox on the daemon; prints its id.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/http_util.h"
#include "cli/commands.h"
#include "cli/daemon_call.h"

namespace skiff::cli {
namespace {

struct CreateFlags {
  ClientFlags client;
  std::string image, name, isolation, on_idle, snapshot;
  std::optional<uint32_t> cpus, memory_mb;
  std::optional<uint64_t> idle_timeout_secs;
  bool network = false;
  bool auto_resume = false;
  std::vector<std::string> env;
};

int Create(const CreateFlags& f) {
  nlohmann::json p = nlohmann::json::object();
  if (!f.image.empty()) p["image"] = f.image;
  if (!f.snapshot.empty()) p["snapshot"] = f.snapshot;
  if (!f.name.empty()) p["name"] = f.name;
  if (f.cpus) p["cpus"] = *f.cpus;
  if (f.memory_mb) p["memory_mb"] = *f.memory_mb;
  if (f.idle_timeout_secs) p["idle_timeout_secs"] = *f.idle_timeout_secs;
  if (!f.isolation.empty()) p["isolation"] = f.isolation;
  if (f.network) p["network"] = true;
  if (!f.on_idle.empty()) p["on_idle"] = f.on_idle;
  if (f.auto_resume) p["auto_resume"] = true;
  if (!f.env.empty()) p["env"] = f.env;
  int rc = 0;
  auto r = CallFunction(f.client, "sandbox::create", p, &rc);
  if (!r) return rc;
  if (f.client.json_out)
    std::printf("%s\n", api::Dump(*r).c_str());
  else
    std::printf("%s\n", r->value("sandbox_id", std::string()).c_str());
  return rc;
}

}  // namespace

void AddCreateCommand(CLI::App& app, int& rc) {
  auto* create = app.add_subcommand("create", "create a sandbox on the daemon; prints its id");
  auto f = std::make_shared<CreateFlags>();
  AddClientFlags(create, f->client);
  create->add_option("image", f->image, "catalog image (optional with --snapshot)");
  create->add_option("--snapshot", f->snapshot,
                     "start from this snapshot (id or name): its files, and on the "
                     "microVM its processes");
  create->add_option("--name", f->name, "a label for the sandbox");
  create->add_option("--cpus", f->cpus);
  create->add_option("--memory-mb", f->memory_mb);
  create->add_option("--idle-timeout", f->idle_timeout_secs,
                     "seconds of idleness before the reaper stops (or pauses) it");
  create->add_option("--on-idle", f->on_idle,
                     "stop | pause | hibernate: what the reaper does once it is idle");
  create->add_flag("--auto-resume", f->auto_resume, "calls to it while paused resume it");
  create->add_option("--isolation", f->isolation, "microvm | jail");
  create->add_option("--env", f->env, "NAME=value (repeatable)")->allow_extra_args(false);
  create->add_flag("--network", f->network);
  create->callback([f, &rc] {
    if (f->image.empty() && f->snapshot.empty()) throw CLI::RequiredError("image (or --snapshot)");
    rc = Create(*f);
  });
}

}  // namespace skiff::cli
