// `skiff stats <sandbox>...`: one sample of each sandbox's CPU, memory and
// disk use (sandbox::metrics), docker-stats style, or the JSON with --json;
// the exit status is that of the last one that failed.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "api/http_util.h"
#include "cli/columns.h"
#include "cli/commands.h"
#include "cli/daemon_call.h"

namespace skiff::cli {
namespace {

struct StatsFlags {
  ClientFlags client;
  std::vector<std::string> sandbox_ids;
};

std::string MiB(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fMiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

int Stats(const StatsFlags& f) {
  int rc = 0;
  bool header = false;
  for (const auto& id : f.sandbox_ids) {
    int one = 0;
    auto r = CallFunction(f.client, "sandbox::metrics", {{"sandbox_id", id}}, &one);
    if (!r) {
      rc = one;
      continue;
    }
    if (f.client.json_out) {
      std::printf("%s\n", api::Dump(*r).c_str());
      continue;
    }
    if (!header) {
      std::printf("%s%s%s%s%s\n", Pad("SANDBOX", 38).c_str(), Pad("CPUS", 6).c_str(), Pad("CPU %", 9).c_str(),
                  Pad("MEM USAGE / LIMIT", 26).c_str(), "DISK USAGE / SIZE");
      header = true;
    }
    char cpu[16];
    std::snprintf(cpu, sizeof cpu, "%.2f%%", r->value("cpu_used_pct", 0.0));
    std::string mem =
        MiB(r->value("mem_used_bytes", uint64_t{0})) + " / " + MiB(r->value("mem_total_bytes", uint64_t{0}));
    std::string disk = MiB(r->value("disk_used_bytes", uint64_t{0})) + " / " +
                       MiB(r->value("disk_total_bytes", uint64_t{0}));
    std::printf("%s%s%s%s%s\n", Pad(r->value("sandbox_id", id), 38).c_str(),
                Pad(std::to_string(r->value("cpu_count", 0)), 6).c_str(), Pad(cpu, 9).c_str(),
                Pad(mem, 26).c_str(), disk.c_str());
  }
  return rc;
}

}  // namespace

void AddStatsCommand(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("stats", "show sandboxes' CPU, memory and disk use (one sample each)");
  auto f = std::make_shared<StatsFlags>();
  AddClientFlags(cmd, f->client);
  cmd->add_option("sandbox", f->sandbox_ids)->required();
  cmd->callback([f, &rc] { rc = Stats(*f); });
}

}  // namespace skiff::cli
