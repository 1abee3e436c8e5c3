#include "functions/snapshot_schemas.h"

#include <string>

#include "functions/schema_builders.h"

namespace skiff::fn {
namespace {

using nlohmann::json;

const char* kSnapEx = "9b2e4c7a-1d3f-4e5a-8b6c-7d8e9f0a1b2c";

json SnapshotExample() {
  return {{"snapshot_id", kSnapEx}, {"name", "after-install"}, {"source_sandbox_id", kUuidEx},
          {"image", "python"},      {"isolation", "jail"},     {"cpus", 1},
          {"memory_mb", 512},       {"contents", "disk"},      {"network", false},
          {"size_bytes", 18432},    {"created_at", 1764892800}};
}

json RefProp(std::string d) {
  return {{"type", "string"},
          {"minLength", 1},
          {"maxLength", 64},
          {"pattern", "^[A-Za-z0-9._-]+$"},
          {"description", std::move(d)}};
}

json SnapshotObject(std::string description) {
  return Object(
      std::move(description),
      {{"snapshot_id", Str("UUID")},
       {"name", Str("The name given at sandbox::snapshot, or null")},
       {"source_sandbox_id", Str("The sandbox it was taken of")},
       {"image", Str("Image of a sandbox created from it")},
       {"isolation", Str("\"jail\" or \"microvm\": the backend a sandbox created from it runs on")},
       {"cpus", UInt("vCPUs of a sandbox created from it")},
       {"memory_mb", UInt("Memory of a sandbox created from it")},
       {"contents",
        {{"type", "string"},
         {"enum", {"memory+disk", "disk"}},
         {"description", "memory+disk: files and running processes (microVM); disk: files only (jail)"}}},
       {"network", Bool("Taken of a sandbox with network: true. A memory+disk snapshot restores only "
                        "into a sandbox created with the same network setting (S001 otherwise)")},
       {"size_bytes", UInt("Bytes it takes on the host")},
       {"created_at", UInt("Unix seconds")}},
      {"snapshot_id", "name", "source_sandbox_id", "image", "isolation", "cpus", "memory_mb", "contents",
       "network", "size_bytes", "created_at"});
}

}  // namespace

void AddSnapshotDefinitions(json& d) {
  d["snapshot"] = SnapshotObject("A saved sandbox state (docs/snapshots.md)");
}

bool SnapshotSchemas(std::string_view id, FunctionSchemas* s) {
  if (id == "sandbox::snapshot") {
    s->request = Root(
        id,
        Object(
            "Saves a running or paused sandbox (it runs on, or stays paused): its files, and on the microVM "
            "its processes too",
            {{"sandbox_id", SandboxIdProp()},
             {"name", RefProp("Optional unique name, usable wherever the snapshot id is (not a UUID)")}},
            {"sandbox_id"}),
        json::array({{{"sandbox_id", kUuidEx}}, {{"sandbox_id", kUuidEx}, {"name", "after-install"}}}), true);
    s->response = Root(id, SnapshotObject("The new snapshot"), json::array({SnapshotExample()}), false);
    return true;
  }
  if (id == "sandbox::snapshot::list") {
    s->request = Root(id, Object("No fields; any object is accepted", json::object(), {}),
                      json::array({json::object()}), true);
    s->response = Root(id,
                       Object("Snapshots, oldest first (a fork's own are not listed)",
                              {{"snapshots", ArrOf("snapshot", "Snapshots")}}, {"snapshots"}),
                       json::array({{{"snapshots", json::array({SnapshotExample()})}}}), false);
    return true;
  }
  if (id == "sandbox::snapshot::delete") {
    s->request = Root(id,
                      Object("Deletes a snapshot and its files",
                             {{"snapshot", RefProp("The snapshot's id or name")}}, {"snapshot"}),
                      json::array({{{"snapshot", "after-install"}}}), true);
    s->response = Root(
        id,
        Object("Delete acknowledgement", {{"snapshot", Str("As given")}, {"deleted", Bool("Always true")}},
               {"snapshot", "deleted"}),
        json::array({{{"snapshot", "after-install"}, {"deleted", true}}}), false);
    return true;
  }
  if (id == "sandbox::fork") {
    s->request = Root(
        id,
        Object("Creates count new sandboxes from one sandbox's current state, each with its own identity",
               {{"sandbox_id", SandboxIdProp()},
                {"count",
                 {{"type", "integer"},
                  {"minimum", 1},
                  {"maximum", 16},
                  {"default", 1},
                  {"description", "How many copies, 1-16"}}}},
               {"sandbox_id"}),
        json::array({{{"sandbox_id", kUuidEx}, {"count", 2}}}), true);
    s->response =
        Root(id,
             Object("The copies",
                    {{"sandbox_id", Str("The source")},
                     {"sandboxes",
                      {{"type", "array"},
                       {"items", Object("A copy",
                                        {{"sandbox_id", Str("New canonical UUID")},
                                         {"image", Str("The source's image")},
                                         {"isolation", Str("The source's backend")}},
                                        {"sandbox_id", "image", "isolation"})},
                       {"description", "The new sandboxes"}}}},
                    {"sandbox_id", "sandboxes"}),
             json::array(
                 {{{"sandbox_id", kUuidEx},
                   {"sandboxes",
                    json::array({{{"sandbox_id", kSnapEx}, {"image", "python"}, {"isolation", "jail"}}})}}}),
             false);
    return true;
  }
  return false;
}

}  // namespace skiff::fn
