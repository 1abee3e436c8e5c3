#include "fleet/fleet_router.h"

#include <algorithm>
#include <utility>

#include "base/log.h"
#include "base/text.h"
#include "sandbox/types.h"

namespace skiff::fleet {

using nlohmann::json;
using Kind = CallOutcome::Kind;
using std::chrono::milliseconds;

namespace {

constexpr const char* kHostWorkerName = "iii-sandbox";
// A create or run may install an image first; an exec's own timeout is
// added to the margin. These bound a call to a host that stops answering
// without leaving the engine.
constexpr milliseconds kCreateDeadline{15 * 60 * 1000};
constexpr milliseconds kCallDeadline{10 * 60 * 1000};
constexpr milliseconds kCallMargin{60 * 1000};
constexpr milliseconds kListDeadline{30 * 1000};
// A list fanned out to every healthy host waits for each no longer than a
// probe does (RouterOptions::probe_deadline): a host partitioned since the
// last probe is left out of that one answer instead of holding it (and a
// router thread) for kListDeadline.

milliseconds DeadlineFor(const std::string& function_id, const json& payload) {
  if (function_id == "sandbox::create" || function_id == "sandbox::run" || function_id == "sandbox::fork")
    return kCreateDeadline;
  if (payload.is_object()) {
    auto it = payload.find("timeout_ms");
    if (it != payload.end() && it->is_number_unsigned()) {
      uint64_t ms = std::min<uint64_t>(it->get<uint64_t>(), 24ull * 3600 * 1000);
      return milliseconds(static_cast<int64_t>(ms)) + kCallMargin;
    }
  }
  return kCallDeadline;
}

// Engine faults that mean the callee is gone: its function left the
// namespace, or the call was cut off when its worker disconnected.
bool CalleeGone(const json& error_body) {
  if (!error_body.is_object()) return false;
  auto it = error_body.find("code");
  if (it == error_body.end() || !it->is_string()) return false;
  const auto& c = it->get_ref<const std::string&>();
  return c == "function_not_found" || c == "invocation_stopped";
}

Invocation Fail(Error e) {
  Invocation inv;
  inv.error = std::move(e);
  return inv;
}

Invocation Ok(json result) {
  Invocation inv;
  inv.result = std::move(result);
  return inv;
}

std::optional<HostView> ViewOf(const std::string& ns, const json& s, std::string* boot_id) {
  if (!s.is_object()) return std::nullopt;
  auto u32 = [&](const char* k) -> uint32_t {
    auto it = s.find(k);
    return it != s.end() && it->is_number_unsigned()
               ? static_cast<uint32_t>(std::min<uint64_t>(it->get<uint64_t>(), UINT32_MAX))
               : 0;
  };
  auto str = [&](const char* k) -> std::string {
    auto it = s.find(k);
    return it != s.end() && it->is_string() ? it->get<std::string>() : "";
  };
  HostView v;
  v.ns = ns;
  *boot_id = str("boot_id");
  if (boot_id->empty()) return std::nullopt;
  if (auto it = s.find("isolation_available"); it != s.end() && it->is_array()) {
    for (const auto& x : *it)
      if (x.is_string()) v.isolations.push_back(x.get<std::string>());
  }
  v.default_isolation = str("default_isolation");
  v.max_sandboxes = u32("max_sandboxes");
  v.sandboxes = u32("sandboxes");
  v.pooled_ready = u32("pooled_ready");
  v.cpus = std::max<uint32_t>(u32("cpus"), 1);
  if (auto it = s.find("load_1m"); it != s.end() && it->is_number()) v.load_1m = it->get<double>();
  return v;
}

}  // namespace

std::string SCodeOf(const json& error_body) {
  if (!error_body.is_object()) return "";
  auto code = error_body.find("code");
  auto msg = error_body.find("message");
  if (code == error_body.end() || *code != "invocation_failed" || msg == error_body.end() ||
      !msg->is_string())
    return "";
  const std::string& m = msg->get_ref<const std::string&>();
  static constexpr std::string_view kPrefix = "handler error: ";
  if (m.rfind(kPrefix, 0) != 0) return "";
  json inner = json::parse(m.substr(kPrefix.size()), nullptr, false);
  if (!inner.is_object()) return "";
  auto c = inner.find("code");
  return c != inner.end() && c->is_string() ? c->get<std::string>() : "";
}

FleetRouter::FleetRouter(EngineCalls& calls, RouterOptions options)
    : calls_(calls), opt_(std::move(options)), index_(calls_, opt_.host_prefix, opt_.probe_deadline) {}

Result<std::set<std::string>> FleetRouter::ListHosts() {
  CallOutcome o = CallAndWait(calls_, "engine::workers::list", "", json::object(), opt_.probe_deadline);
  if (o.kind != Kind::kResult)
    return Platform("fleet", "the engine did not answer engine::workers::list" +
                                 std::string(o.kind == Kind::kError ? ": " + o.body.dump() : ""));
  if (!o.body.is_object() || !o.body.contains("workers") || !o.body["workers"].is_array())
    return Platform("fleet", "engine::workers::list answered without a workers array");
  std::set<std::string> out;
  for (const auto& w : o.body["workers"]) {
    if (!w.is_object()) continue;
    auto ns = w.find("namespace");
    if (ns == w.end() || !ns->is_string()) {
      engine_too_old_ = true;
      return Platform("fleet",
                      "the engine lists workers without a namespace (iii before 0.23): it cannot keep the "
                      "hosts' functions apart, so a fleet cannot run on it; upgrade the engine");
    }
    auto name = w.find("name");
    const std::string& n = ns->get_ref<const std::string&>();
    if (name != w.end() && *name == kHostWorkerName && n.rfind(opt_.host_prefix, 0) == 0 &&
        n.size() > opt_.host_prefix.size())
      out.insert(n);
  }
  return out;
}

Status FleetRouter::Probe() {
  SKIFF_ASSIGN_OR_RETURN(std::set<std::string> connected, ListHosts());
  hosts_.SetConnected(connected);
  std::vector<std::string> nss(connected.begin(), connected.end());
  auto answers = CallEach(calls_, "skiff::host::status", nss, json::object(), opt_.probe_deadline);
  for (size_t i = 0; i < nss.size(); ++i) {
    std::string boot;
    std::optional<HostView> v;
    if (answers[i].kind == Kind::kResult) v = ViewOf(nss[i], answers[i].body, &boot);
    if (v) {
      hosts_.ProbeOk(*v, boot);
    } else {
      if (hosts_.StateOf(nss[i]) == HostState::kHealthy)
        SKIFF_LOG(Warn) << "fleet: host " << nss[i] << " did not answer its probe; no new sandboxes go there";
      hosts_.ProbeFailed(nss[i]);
    }
  }
  return OkStatus();
}

void FleetRouter::RefreshConnected() {
  auto c = ListHosts();
  if (c.ok()) hosts_.SetConnected(*c);
}

Error FleetRouter::HostLost(const std::string& sandbox_id, const std::string& ns) const {
  return Error(Code::kS301, "host lost: sandbox " + sandbox_id + " was on fleet host " + ns +
                                ", which has left the fleet");
}

Error FleetRouter::NoRoom(const std::string& isolation) const {
  return Error(Code::kS400, "resource limit exceeded: no host of the fleet has room for a" +
                                (isolation.empty() ? std::string() : " " + isolation) + " sandbox");
}

Error FleetRouter::NoHosts() const {
  return Platform("fleet", "no host of the fleet answers (" + std::to_string(hosts_.connected()) +
                               " connected to the engine)");
}

Invocation FleetRouter::Relay(const std::string& ns, const CallOutcome& o, const std::string& sandbox_id) {
  switch (o.kind) {
    case Kind::kResult:
      return Ok(o.body);
    case Kind::kError:
      if (CalleeGone(o.body)) {
        RefreshConnected();
        if (hosts_.StateOf(ns) == HostState::kLost && !sandbox_id.empty())
          return Fail(HostLost(sandbox_id, ns));
        if (hosts_.StateOf(ns) == HostState::kLost)
          return Fail(Platform("fleet", "host " + ns + " left the fleet during the call"));
      }
      {
        Invocation inv;
        inv.relayed_error = o.body;
        return inv;
      }
    case Kind::kTimeout:
      hosts_.ProbeFailed(ns);
      return Fail(Platform("fleet", "host " + ns + " did not answer in time"));
    case Kind::kLinkLost:
      return Fail(Platform("fleet", "the router lost its engine link during the call"));
  }
  return Fail(Platform("fleet", "unreachable"));
}

Result<Placement> FleetRouter::Locate(const std::string& id) {
  std::optional<Placement> p = locator_.Get(id);
  if (!p) {
    // Placed before this router started (a restart, a standby taking
    // over): the engine's state says where, in one call.
    p = index_.Get(id);
    if (p) {
      locator_.Put(id, *p);
      // A host this router has not seen: maybe connected since the last
      // probe; if the engine does not list it, it is gone.
      if (hosts_.StateOf(p->ns) == HostState::kUnknown) RefreshConnected();
      if (hosts_.StateOf(p->ns) == HostState::kUnknown) return HostLost(id, p->ns);
    }
  }
  if (p) {
    HostState st = hosts_.StateOf(p->ns);
    if (st == HostState::kLost) return HostLost(id, p->ns);
    auto boot = hosts_.BootOf(p->ns);
    if (boot && *boot != p->boot_id) {
      // It restarted: its sandboxes are gone for good, and so is the record.
      index_.Forget(id);
      return HostLost(id, p->ns);
    }
    return *p;
  }
  // Not placed by this router (or before its restart): ask every host.
  std::vector<std::string> nss = hosts_.HealthyNamespaces();
  if (nss.empty()) return NoHosts();
  auto answers = CallEach(calls_, "skiff::host::has", nss, json{{"sandbox_id", id}}, opt_.probe_deadline);
  size_t silent = 0;
  for (size_t i = 0; i < nss.size(); ++i) {
    const auto& a = answers[i];
    if (a.kind != Kind::kResult) {
      ++silent;
      continue;
    }
    if (a.body.is_object() && a.body.value("has", false)) {
      Placement found{nss[i], hosts_.BootOf(nss[i]).value_or("")};
      locator_.Put(id, found);
      index_.Put(id, found);
      return found;
    }
  }
  if (silent > 0)
    return Platform("fleet", "sandbox " + id + " is on none of the hosts that answered; " +
                                 std::to_string(silent) + " did not answer");
  return SandboxNotFound(id);
}

Invocation FleetRouter::ToAnyHost(const std::string& function_id, const json& payload) {
  std::vector<std::string> nss = hosts_.HealthyNamespaces();
  if (nss.empty()) return Fail(NoHosts());
  return Relay(nss.front(),
               CallAndWait(calls_, function_id, nss.front(), payload, DeadlineFor(function_id, payload)), "");
}

Invocation FleetRouter::ToSandbox(const std::string& function_id, const json& payload,
                                  const std::string& id) {
  auto where = Locate(id);
  if (!where.ok()) return Fail(std::move(where).error());
  CallOutcome o = CallAndWait(calls_, function_id, where->ns, payload, DeadlineFor(function_id, payload));
  Invocation inv = Relay(where->ns, o, id);
  if (inv.result && function_id == "sandbox::stop") {
    locator_.Forget(id);
    index_.Forget(id);
    hosts_.NoteStopped(where->ns);
  }
  if (inv.relayed_error && SCodeOf(*inv.relayed_error) == "S002") {
    // The host does not have it (stopped there by its idle rules, say):
    // neither record may send the next call there again.
    locator_.Forget(id);
    index_.Forget(id);
  }
  if (inv.result && function_id == "sandbox::fork" && inv.result->is_object()) {
    auto it = inv.result->find("sandboxes");
    if (it != inv.result->end() && it->is_array()) {
      for (auto& s : *it) {
        if (s.is_object() && s.contains("sandbox_id") && s["sandbox_id"].is_string()) {
          locator_.Put(s["sandbox_id"].get<std::string>(), *where);
          index_.Put(s["sandbox_id"].get<std::string>(), *where);
          s["host"] = where->ns;
        }
      }
    }
  }
  return inv;
}

Invocation FleetRouter::Create(const json& payload) {
  if (!payload.is_object()) return ToAnyHost("sandbox::create", payload);  // the host's own S001
  json p = payload;
  // The router names the sandbox, so a create retried after a lost answer
  // finds the sandbox it made instead of making a second one.
  std::string id;
  const bool caller_named_it = p.contains("sandbox_id");
  if (auto it = p.find("sandbox_id"); it != p.end()) {
    if (!it->is_string()) return ToAnyHost("sandbox::create", payload);
    id = it->get<std::string>();
  } else {
    id = NewUuid();
    p["sandbox_id"] = id;
  }
  std::string isolation;
  if (auto it = p.find("isolation"); it != p.end() && it->is_string()) isolation = it->get<std::string>();
  const bool from_snapshot = p.contains("snapshot");
  std::vector<std::string> order;
  if (from_snapshot) {
    order = hosts_.HealthyNamespaces();  // a snapshot lives on one host: find it by trying
  } else {
    // Hosts full as last seen come last: S400 is answered only from the
    // hosts' answers of now.
    order = PlacementOrder(hosts_.Healthy(), isolation);
  }
  if (order.empty()) {
    if (hosts_.HealthyNamespaces().empty()) return Fail(NoHosts());
    return Fail(NoRoom(isolation));
  }
  Invocation last;
  size_t full = 0;
  for (const auto& ns : order) {
    CallOutcome o = CallAndWait(calls_, "sandbox::create", ns, p, kCreateDeadline);
    std::string code = o.kind == Kind::kError ? SCodeOf(o.body) : "";
    if (o.kind == Kind::kError && (code == "S400" || (from_snapshot && code == "S007"))) {
      full += code == "S400";
      last = Relay(ns, o, "");
      if (full == order.size()) return Fail(NoRoom(isolation));
      continue;  // full (or not the snapshot's host): the next one
    }
    Invocation inv = Relay(ns, o, "");
    if (!caller_named_it && inv.error && o.kind == Kind::kError && CalleeGone(o.body) &&
        hosts_.StateOf(ns) == HostState::kLost) {
      // The host left during the create: whatever it made went with it.
      // Another host gets the create under a new name, so an id can never
      // name two sandboxes should the lost host come back with its state.
      // (A caller-chosen id keeps the error: its retry decides.)
      id = NewUuid();
      p["sandbox_id"] = id;
      last = std::move(inv);
      continue;
    }
    if (inv.result) {
      std::string sid = inv.result->is_object() ? inv.result->value("sandbox_id", id) : id;
      Placement placed{ns, hosts_.BootOf(ns).value_or("")};
      locator_.Put(sid, placed);
      index_.Put(sid, placed);
      hosts_.NotePlaced(ns);
      if (inv.result->is_object()) (*inv.result)["host"] = ns;
    }
    return inv;
  }
  return last;
}

Invocation FleetRouter::Run(const json& payload) {
  if (!payload.is_object()) return ToAnyHost("sandbox::run", payload);
  std::string isolation;
  if (auto it = payload.find("isolation"); it != payload.end() && it->is_string())
    isolation = it->get<std::string>();
  std::vector<std::string> order = PlacementOrder(hosts_.Healthy(), isolation);
  if (order.empty()) {
    if (hosts_.HealthyNamespaces().empty()) return Fail(NoHosts());
    return Fail(NoRoom(isolation));
  }
  for (const auto& ns : order) {
    CallOutcome o = CallAndWait(calls_, "sandbox::run", ns, payload, DeadlineFor("sandbox::run", payload));
    if (o.kind == Kind::kError && SCodeOf(o.body) == "S400") continue;  // full now: the next one
    return Relay(ns, o, "");
  }
  return Fail(NoRoom(isolation));  // every host said so just now
}

Invocation FleetRouter::FanOut(const std::string& function_id, const json& payload, const char* key) {
  std::vector<std::string> nss = hosts_.HealthyNamespaces();
  if (nss.empty()) return Fail(NoHosts());
  auto answers = CallEach(calls_, function_id, nss, payload, opt_.probe_deadline);
  json merged = json::array();
  for (size_t i = 0; i < nss.size(); ++i) {
    const auto& a = answers[i];
    if (a.kind == Kind::kError && !CalleeGone(a.body))
      return Relay(nss[i], a, "");  // bad request: same for all
    if (a.kind != Kind::kResult || !a.body.is_object() || !a.body.contains(key) || !a.body[key].is_array()) {
      hosts_.ProbeFailed(nss[i]);  // left out of this answer; the next probe decides
      continue;
    }
    for (auto e : a.body[key]) {
      if (!e.is_object()) continue;
      e["host"] = nss[i];
      merged.push_back(std::move(e));
    }
  }
  return Ok(json{{key, std::move(merged)}});
}

Invocation FleetRouter::FirstThatHas(const std::string& function_id, const json& payload) {
  std::vector<std::string> nss = hosts_.HealthyNamespaces();
  if (nss.empty()) return Fail(NoHosts());
  Invocation last;
  for (const auto& ns : nss) {
    CallOutcome o = CallAndWait(calls_, function_id, ns, payload, kListDeadline);
    if (o.kind == Kind::kError && SCodeOf(o.body) == "S007") {
      last = Relay(ns, o, "");
      continue;
    }
    return Relay(ns, o, "");
  }
  return last;
}

Invocation FleetRouter::Handle(const std::string& function_id, const json& payload) {
  if (function_id == "sandbox::create") return Create(payload);
  if (function_id == "sandbox::run") return Run(payload);
  if (function_id == "sandbox::list") return FanOut(function_id, payload, "sandboxes");
  if (function_id == "sandbox::catalog::list") return FanOut(function_id, payload, "images");
  if (function_id == "sandbox::snapshot::list") return FanOut(function_id, payload, "snapshots");
  if (function_id == "sandbox::snapshot::delete") return FirstThatHas(function_id, payload);
  if (payload.is_object()) {
    auto it = payload.find("sandbox_id");
    if (it != payload.end() && it->is_string()) {
      // The canonical form, as the hosts key it (any accepted spelling).
      auto id = CanonicalUuid(it->get<std::string>());
      if (id) return ToSandbox(function_id, payload, *id);
    }
  }
  return ToAnyHost(function_id, payload);  // the host answers the validation error
}

}  // namespace skiff::fleet
