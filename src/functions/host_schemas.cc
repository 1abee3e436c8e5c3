#include "functions/host_schemas.h"

#include "functions/schema_builders.h"

namespace skiff::fn {

using nlohmann::json;

bool HostSchemas(std::string_view id, FunctionSchemas* s) {
  if (id == "skiff::host::status") {
    s->request = Root(id, Object("No fields; any object is accepted", json::object(), {}),
                      json::array({json::object()}), true);
    s->response = Root(
        id,
        Object("This host's identity, backends and room, for placing creates (docs/multihost.md)",
               {{"boot_id", Str("UUID, new at every daemon start: a restarted host is a new boot")},
                {"hostname", Str("The machine's host name")},
                {"version", Str("skiff's version")},
                {"isolation_available", StrArr("Backends this host can start: \"jail\", \"microvm\"")},
                {"default_isolation", Str("The backend a create without isolation gets")},
                {"max_sandboxes", UInt("max_concurrent_sandboxes")},
                {"sandboxes", UInt("Live sandboxes and creates in progress (what counts against the cap)")},
                {"pooled_ready", UInt("Booted sandboxes waiting in warm pools")},
                {"cpus", UInt("CPUs of the machine")},
                {"load_1m", {{"type", "number"}, {"description", "One-minute load average"}}}},
               {"boot_id", "hostname", "version", "isolation_available", "default_isolation", "max_sandboxes",
                "sandboxes", "pooled_ready", "cpus", "load_1m"}),
        json::array({{{"boot_id", "0d9c7e4b-5a61-4f3e-9a2d-1c8b7e6f5a43"},
                      {"hostname", "node-1"},
                      {"version", "0.1.0"},
                      {"isolation_available", json::array({"jail"})},
                      {"default_isolation", "jail"},
                      {"max_sandboxes", 32},
                      {"sandboxes", 3},
                      {"pooled_ready", 2},
                      {"cpus", 2},
                      {"load_1m", 0.42}}}),
        false);
    return true;
  }
  if (id == "skiff::host::has") {
    s->request = Root(
        id,
        Object("Asks whether this host holds a sandbox", {{"sandbox_id", SandboxIdProp()}}, {"sandbox_id"}),
        json::array({{{"sandbox_id", kUuidEx}}}), true);
    s->response = Root(id,
                       Object("Whether the sandbox lives here",
                              {{"sandbox_id", Str("Canonical form of the id asked about")},
                               {"has", Bool("True when a live sandbox of the caller has this id")},
                               {"state", Str("When has: \"running\", \"paused\" or \"stopping\"")}},
                              {"sandbox_id", "has"}),
                       json::array({{{"sandbox_id", kUuidEx}, {"has", true}, {"state", "running"}},
                                    {{"sandbox_id", kUuidEx}, {"has", false}}}),
                       false);
    return true;
  }
  return false;
}

}  // namespace skiff::fn
