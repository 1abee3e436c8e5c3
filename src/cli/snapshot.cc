// `skiff snapshot` (save, ls, rm) and `skiff fork`: snapshots of the
// daemon's sandboxes (docs/snapshots.md), one function call each.
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

struct SnapshotFlags {
  ClientFlags client;
  std::string sandbox_id, name;
  std::vector<std::string> refs;
  uint32_t count = 1;
};

int Save(const SnapshotFlags& f) {
  nlohmann::json p = {{"sandbox_id", f.sandbox_id}};
  if (!f.name.empty()) p["name"] = f.name;
  int rc = 0;
  auto r = CallFunction(f.client, "sandbox::snapshot", p, &rc);
  if (!r) return rc;
  if (f.client.json_out)
    std::printf("%s\n", api::Dump(*r).c_str());
  else
    std::printf("%s\n", r->value("snapshot_id", std::string()).c_str());
  return rc;
}

std::string Size(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (uint64_t{1} << 20)) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string((bytes + 1023) >> 10) + " KiB";
}

int List(const SnapshotFlags& f) {
  int rc = 0;
  auto r = CallFunction(f.client, "sandbox::snapshot::list", nlohmann::json::object(), &rc);
  if (!r) return rc;
  if (f.client.json_out) {
    std::printf("%s\n", api::Dump(*r).c_str());
    return rc;
  }
  std::printf("%s%s%s%s%s%s\n", Pad("SNAPSHOT ID", 38).c_str(), Pad("NAME", 18).c_str(),
              Pad("IMAGE", 10).c_str(), Pad("ISOLATION", 11).c_str(), Pad("CONTENTS", 13).c_str(), "SIZE");
  for (const auto& s : (*r)["snapshots"]) {
    std::string name = s["name"].is_string() ? s["name"].get<std::string>() : "-";
    std::printf("%s%s%s%s%s%s\n", Pad(s.value("snapshot_id", std::string()), 38).c_str(),
                Pad(name, 18).c_str(), Pad(s.value("image", std::string()), 10).c_str(),
                Pad(s.value("isolation", std::string()), 11).c_str(),
                Pad(s.value("contents", std::string()), 13).c_str(),
                Size(s.value("size_bytes", uint64_t{0})).c_str());
  }
  return rc;
}

int Remove(const SnapshotFlags& f) {
  int rc = 0;
  for (const auto& ref : f.refs) {
    int one = 0;
    auto r = CallFunction(f.client, "sandbox::snapshot::delete", {{"snapshot", ref}}, &one);
    if (!r)
      rc = one;
    else if (f.client.json_out)
      std::printf("%s\n", api::Dump(*r).c_str());
  }
  return rc;
}

int Fork(const SnapshotFlags& f) {
  int rc = 0;
  auto r = CallFunction(f.client, "sandbox::fork", {{"sandbox_id", f.sandbox_id}, {"count", f.count}}, &rc);
  if (!r) return rc;
  if (f.client.json_out) {
    std::printf("%s\n", api::Dump(*r).c_str());
    return rc;
  }
  for (const auto& s : (*r)["sandboxes"]) std::printf("%s\n", s.value("sandbox_id", std::string()).c_str());
  return rc;
}

}  // namespace

void AddSnapshotCommands(CLI::App& app, int& rc) {
  auto* snap = app.add_subcommand("snapshot", "save a sandbox's state; list and delete snapshots");
  auto save = std::make_shared<SnapshotFlags>();
  AddClientFlags(snap, save->client);
  snap->add_option("sandbox", save->sandbox_id, "the sandbox to save (prints the snapshot's id)");
  snap->add_option("--name", save->name, "a unique name, usable wherever the id is");
  auto* ls = snap->add_subcommand("ls", "list snapshots");
  auto list = std::make_shared<SnapshotFlags>();
  AddClientFlags(ls, list->client);
  ls->callback([list, &rc] { rc = List(*list); });
  auto* rm = snap->add_subcommand("rm", "delete snapshots (by id or name)");
  auto del = std::make_shared<SnapshotFlags>();
  AddClientFlags(rm, del->client);
  rm->add_option("snapshot", del->refs)->required();
  rm->callback([del, &rc] { rc = Remove(*del); });
  snap->callback([snap, save, &rc] {
    if (!snap->get_subcommands().empty()) return;
    if (save->sandbox_id.empty()) throw CLI::RequiredError("sandbox");
    rc = Save(*save);
  });

  auto* fork =
      app.add_subcommand("fork", "create sandboxes from one sandbox's current state; prints their ids");
  auto fk = std::make_shared<SnapshotFlags>();
  AddClientFlags(fork, fk->client);
  fork->add_option("sandbox", fk->sandbox_id)->required();
  fork->add_option("-n,--count", fk->count, "how many copies (1-16)")->check(CLI::Range(1, 16));
  fork->callback([fk, &rc] { rc = Fork(*fk); });
}

}  // namespace skiff::cli
