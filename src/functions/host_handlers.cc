#include "functions/host_handlers.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "base/version.h"
#include "functions/decode.h"

namespace skiff::fn {

using nlohmann::json;

Result<json> HandleHostStatus(const json& payload, CallContext& ctx) {
  (void)payload;  // no fields; any object is accepted
  HostFacts h = ctx.manager.Host();
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) name[0] = '\0';
  double load[1] = {0};
  if (::getloadavg(load, 1) != 1) load[0] = 0;
  return json{{"boot_id", h.boot_id},
              {"hostname", std::string(name)},
              {"version", SkiffVersion()},
              {"isolation_available", ctx.manager.available_isolations()},
              {"default_isolation", ctx.manager.default_isolation()},
              {"max_sandboxes", h.max_sandboxes},
              {"sandboxes", h.sandboxes},
              {"pooled_ready", h.pooled_ready},
              {"cpus", std::thread::hardware_concurrency()},
              {"load_1m", load[0]}};
}

Result<json> HandleHostHas(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(std::string raw, f.RequiredString("sandbox_id"));
  SKIFF_ASSIGN_OR_RETURN(std::string id, ParseSandboxId(raw));
  for (const auto& e : ctx.manager.List()) {
    if (e.sandbox_id == id) return json{{"sandbox_id", id}, {"has", true}, {"state", e.state}};
  }
  return json{{"sandbox_id", id}, {"has", false}};
}

}  // namespace skiff::fn
