#include "fleet/placement_index.h"

#include <utility>

#include "base/log.h"

namespace skiff::fleet {

using nlohmann::json;
using Kind = CallOutcome::Kind;

std::optional<json> PlacementIndex::Call(const char* function_id, json data) {
  CallOutcome o = CallAndWait(calls_, function_id, "", std::move(data), deadline_);
  if (o.kind == Kind::kResult) {
    available_ = true;
    if (said_unavailable_.exchange(false))
      SKIFF_LOG(Info) << "fleet: the engine keeps state again; the sandbox index is kept there";
    return std::move(o.body);
  }
  const bool no_state =
      o.kind == Kind::kError && o.body.is_object() && o.body.value("code", "") == "function_not_found";
  if (no_state) {
    available_ = false;
    if (!said_unavailable_.exchange(true))
      SKIFF_LOG(Warn) << "fleet: the engine has no state functions (" << function_id
                      << " not found); the router keeps its sandbox index in memory only and asks the "
                         "hosts after a restart";
    return std::nullopt;
  }
  SKIFF_LOG_LIMITED(Warn) << "fleet: " << function_id << " on the engine's state failed ("
                          << (o.kind == Kind::kTimeout    ? std::string("no answer in time")
                              : o.kind == Kind::kLinkLost ? std::string("engine link lost")
                                                          : o.body.dump())
                          << "); the hosts are asked instead";
  return std::nullopt;
}

void PlacementIndex::Put(const std::string& sandbox_id, const Placement& p) {
  Call(
      "state::set",
      {{"scope", kPlacementScope}, {"key", sandbox_id}, {"value", {{"host", p.ns}, {"boot_id", p.boot_id}}}});
}

std::optional<Placement> PlacementIndex::Get(const std::string& sandbox_id) {
  auto v = Call("state::get", {{"scope", kPlacementScope}, {"key", sandbox_id}});
  if (!v || v->is_null()) return std::nullopt;  // no record (state.rs get: None)
  // Anything a worker on the engine's internal listener wrote there: read
  // with care, used only if it names a host of this fleet.
  if (!v->is_object()) return std::nullopt;
  auto host = v->find("host");
  auto boot = v->find("boot_id");
  if (host == v->end() || !host->is_string() || boot == v->end() || !boot->is_string()) return std::nullopt;
  const std::string& ns = host->get_ref<const std::string&>();
  if (ns.size() <= host_prefix_.size() || ns.rfind(host_prefix_, 0) != 0 || ns.size() > 256)
    return std::nullopt;
  return Placement{ns, boot->get<std::string>()};
}

void PlacementIndex::Forget(const std::string& sandbox_id) {
  Call("state::delete", {{"scope", kPlacementScope}, {"key", sandbox_id}});
}

}  // namespace skiff::fleet
