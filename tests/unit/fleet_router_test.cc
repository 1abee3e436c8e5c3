// The fleet router against a scripted engine (docs/multihost.md): placement
// with spill-over, routing by sandbox id, merged lists, lost and restarted
// hosts, the index kept in the engine's state, and the refusal of an engine
// without namespaces.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>

#include "fleet/fleet_router.h"

namespace skiff::fleet {
namespace {

using nlohmann::json;
using Kind = CallOutcome::Kind;

// An engine with hosts that answer from a script. Each host keeps the
// sandboxes created on it; its answers follow the daemon's shapes.
class FakeEngine final : public EngineCalls {
 public:
  struct FakeHost {
    std::string boot = "boot-1";
    uint32_t max = 4;
    std::set<std::string> sandboxes;
    bool silent = false;    // never answers (a partition)
    uint32_t stopping = 0;  // sandboxes its status still counts (being stopped)
  };
  std::map<std::string, FakeHost> hosts;
  std::set<std::string> connected;
  bool legacy = false;                                     // workers listed without a namespace (iii 0.22)
  bool has_state = true;                                   // serves state::set / get / delete
  std::map<std::string, json> state;                       // "scope/key" -> value
  std::vector<std::pair<std::string, std::string>> calls;  // (function, namespace)
  std::map<std::string, std::chrono::milliseconds> deadlines;  // the last one given, by function

  static json SError(const std::string& code, const std::string& message) {
    json inner = {{"code", code}, {"message", message}};
    return {{"code", "invocation_failed"}, {"message", "handler error: " + inner.dump()}};
  }

  void Call(const std::string& fn, const std::string& ns, json data, std::chrono::milliseconds deadline,
            std::function<void(CallOutcome)> done) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      calls.emplace_back(fn, ns);
      deadlines[fn] = deadline;
    }
    done(Answer(fn, ns, data));
  }

  CallOutcome Answer(const std::string& fn, const std::string& ns, const json& data) {
    if (fn == "engine::workers::list") {
      json ws = json::array();
      ws.push_back(legacy ? json{{"name", "other"}, {"id", "w0"}}
                          : json{{"name", "iii-sandbox"}, {"id", "router"}, {"namespace", "default"}});
      for (const auto& n : connected)
        ws.push_back({{"name", "iii-sandbox"}, {"id", "w-" + n}, {"namespace", n}});
      ws.push_back({{"name", "iii-sandbox"}, {"id", "x"}, {"namespace", "other.team"}});  // not a host
      return {Kind::kResult, {{"workers", ws}}};
    }
    if (fn.rfind("state::", 0) == 0 && ns.empty() && has_state) {
      // workers/state/state.rs: set answers {old_value,new_value}; get and
      // delete answer the value, or nothing (null).
      std::string k = data["scope"].get<std::string>() + "/" + data["key"].get<std::string>();
      auto it = state.find(k);
      json old = it == state.end() ? json() : it->second;
      if (fn == "state::set") state[k] = data["value"];
      if (fn == "state::delete" && it != state.end()) state.erase(it);
      return {Kind::kResult,
              fn == "state::set" ? json{{"old_value", old}, {"new_value", data["value"]}} : old};
    }
    if (!connected.count(ns)) return {Kind::kError, {{"code", "function_not_found"}, {"message", "gone"}}};
    FakeHost& h = hosts[ns];
    if (h.silent) return {Kind::kTimeout, json()};
    if (fn == "skiff::host::status")
      return {Kind::kResult,
              {{"boot_id", h.boot},
               {"isolation_available", {"jail"}},
               {"default_isolation", "jail"},
               {"max_sandboxes", h.max},
               {"sandboxes", h.sandboxes.size() + h.stopping},
               {"pooled_ready", 0},
               {"cpus", 2},
               {"load_1m", 0.0}}};
    if (fn == "skiff::host::has") {
      std::string id = data["sandbox_id"];
      json r = {{"sandbox_id", id}, {"has", h.sandboxes.count(id) > 0}};
      return {Kind::kResult, r};
    }
    if (fn == "sandbox::create") {
      if (h.sandboxes.size() >= h.max) return {Kind::kError, SError("S400", "resource limit exceeded: full")};
      std::string id = data["sandbox_id"];
      h.sandboxes.insert(id);
      return {Kind::kResult, {{"sandbox_id", id}, {"image", data["image"]}, {"isolation", "jail"}}};
    }
    if (fn == "sandbox::run") {
      if (h.sandboxes.size() >= h.max) return {Kind::kError, SError("S400", "resource limit exceeded: full")};
      return {Kind::kResult, {{"exit_code", 0}, {"host_answered", ns}}};
    }
    if (fn == "sandbox::list") {
      json l = json::array();
      for (const auto& id : h.sandboxes) l.push_back({{"sandbox_id", id}});
      return {Kind::kResult, {{"sandboxes", l}}};
    }
    std::string id = data.value("sandbox_id", "");
    if (!h.sandboxes.count(id)) return {Kind::kError, SError("S002", "sandbox not found: " + id)};
    if (fn == "sandbox::stop") h.sandboxes.erase(id);
    return {Kind::kResult, {{"sandbox_id", id}, {"host_answered", ns}}};
  }

  size_t CallsTo(const std::string& fn, const std::string& ns) {
    std::lock_guard<std::mutex> l(mu_);
    size_t n = 0;
    for (const auto& c : calls) n += c.first == fn && c.second == ns;
    return n;
  }

 private:
  std::mutex mu_;
};

class FleetRouterTest : public ::testing::Test {
 protected:
  FleetRouterTest() : router(engine, RouterOptions{}) {
    for (auto n : {"skiff.a", "skiff.b", "skiff.c"}) {
      engine.hosts[n];
      engine.connected.insert(n);
    }
  }
  std::string Create() {
    Invocation inv = router.Handle("sandbox::create", {{"image", "python"}});
    EXPECT_TRUE(inv.result.has_value()) << (inv.error ? inv.error->message() : inv.relayed_error->dump());
    return inv.result ? (*inv.result)["sandbox_id"].get<std::string>() : "";
  }
  FakeEngine engine;
  FleetRouter router;
};

TEST_F(FleetRouterTest, CreatesSpreadAndCallsReachTheirHost) {
  ASSERT_TRUE(router.Probe().ok());
  std::map<std::string, std::string> host_of;
  for (int i = 0; i < 6; ++i) {
    Invocation inv = router.Handle("sandbox::create", {{"image", "python"}});
    ASSERT_TRUE(inv.result);
    host_of[(*inv.result)["sandbox_id"]] = (*inv.result)["host"];  // no probe between: the router counts
  }
  std::map<std::string, int> per_host;
  for (auto& [id, h] : host_of) per_host[h]++;
  EXPECT_EQ(per_host, (std::map<std::string, int>{{"skiff.a", 2}, {"skiff.b", 2}, {"skiff.c", 2}}));
  for (auto& [id, h] : host_of) {
    Invocation inv = router.Handle("sandbox::exec", {{"sandbox_id", id}, {"cmd", "true"}});
    ASSERT_TRUE(inv.result);
    EXPECT_EQ((*inv.result)["host_answered"], h);
  }
}

TEST_F(FleetRouterTest, ASandboxIdGoesWithTheCreateSoARetryIsSafe) {
  ASSERT_TRUE(router.Probe().ok());
  const std::string id = "0d9c7e4b-5a61-4f3e-9a2d-1c8b7e6f5a43";
  Invocation inv = router.Handle("sandbox::create", {{"image", "python"}, {"sandbox_id", id}});
  ASSERT_TRUE(inv.result);
  EXPECT_EQ((*inv.result)["sandbox_id"], id);
  // Without one, the router names it: the host receives an id.
  Invocation named = router.Handle("sandbox::create", {{"image", "python"}});
  ASSERT_TRUE(named.result);
  EXPECT_EQ((*named.result)["sandbox_id"].get<std::string>().size(), 36u);
}

TEST_F(FleetRouterTest, SpillsOverWhenAHostAnswersS400) {
  for (auto& [n, h] : engine.hosts) h.max = 1;
  ASSERT_TRUE(router.Probe().ok());
  engine.hosts["skiff.a"].sandboxes.insert("filled-behind-the-probe");  // full, but the probe said empty
  std::set<std::string> used;
  for (int i = 0; i < 2; ++i) {
    Invocation inv = router.Handle("sandbox::create", {{"image", "python"}});
    ASSERT_TRUE(inv.result);
    used.insert((*inv.result)["host"].get<std::string>());
  }
  EXPECT_EQ(used, (std::set<std::string>{"skiff.b", "skiff.c"}));
  EXPECT_EQ(engine.CallsTo("sandbox::create", "skiff.a"), 2u);  // tried, refused, moved on
  ASSERT_TRUE(router.Probe().ok());
  Invocation full = router.Handle("sandbox::create", {{"image", "python"}});
  ASSERT_TRUE(full.error);
  EXPECT_EQ(full.error->code(), Code::kS400);
}

// A status is a snapshot: one taken while sandboxes were being stopped
// says "full" of hosts that have room by the time a create comes. Those
// hosts are asked before the create is refused; only their own S400s make
// the refusal (this was 98 needless S400s in 12 concurrent create/stop
// loops on 12 slots).
TEST_F(FleetRouterTest, HostsThatLookedFullAreAskedBeforeAnS400) {
  for (auto& [ns, h] : engine.hosts) h.stopping = h.max;  // every status says full
  ASSERT_TRUE(router.Probe().ok());
  for (auto n : {"skiff.a", "skiff.b", "skiff.c"}) engine.hosts[n].stopping = 0;  // ...but the stops are done
  for (int i = 0; i < 12; ++i) {
    Invocation c = router.Handle("sandbox::create", {{"image", "python"}});
    ASSERT_TRUE(c.result) << i << " " << (c.error ? c.error->message() : c.relayed_error->dump());
  }
  Invocation full = router.Handle("sandbox::create", {{"image", "python"}});  // now truly full
  ASSERT_TRUE(full.error);
  EXPECT_EQ(full.error->code(), Code::kS400);
  EXPECT_NE(full.error->message().find("no host of the fleet has room"), std::string::npos);
  for (auto n : {"skiff.a", "skiff.b", "skiff.c"}) EXPECT_GE(engine.CallsTo("sandbox::create", n), 5u) << n;
  Invocation run = router.Handle("sandbox::run", {{"image", "python"}, {"code", "1"}});
  ASSERT_TRUE(run.error);
  EXPECT_EQ(run.error->code(), Code::kS400);
}

TEST_F(FleetRouterTest, ListsAreMergedWithTheirHost) {
  ASSERT_TRUE(router.Probe().ok());
  for (int i = 0; i < 3; ++i) {
    Create();
    ASSERT_TRUE(router.Probe().ok());
  }
  Invocation inv = router.Handle("sandbox::list", json::object());
  ASSERT_TRUE(inv.result);
  ASSERT_EQ((*inv.result)["sandboxes"].size(), 3u);
  std::set<std::string> hosts;
  for (auto& e : (*inv.result)["sandboxes"]) hosts.insert(e["host"].get<std::string>());
  EXPECT_EQ(hosts.size(), 3u);
}

TEST_F(FleetRouterTest, ALostHostsSandboxesAreHostLostNotUnknown) {
  ASSERT_TRUE(router.Probe().ok());
  std::string id = Create();
  std::string host = router.locator().Get(id)->ns;
  engine.connected.erase(host);  // its worker left the engine
  Invocation inv = router.Handle("sandbox::exec", {{"sandbox_id", id}, {"cmd", "true"}});
  ASSERT_TRUE(inv.error);
  EXPECT_EQ(inv.error->code(), Code::kS301);
  EXPECT_NE(inv.error->message().find(host), std::string::npos);
  // An id no host ever had is still "not found".
  Invocation unknown = router.Handle(
      "sandbox::exec", {{"sandbox_id", "11111111-2222-4333-8444-555555555555"}, {"cmd", "true"}});
  ASSERT_TRUE(unknown.error);
  EXPECT_EQ(unknown.error->code(), Code::kS002);
  // New creates avoid the lost host.
  ASSERT_TRUE(router.Probe().ok());
  for (int i = 0; i < 4; ++i) {
    Invocation c = router.Handle("sandbox::create", {{"image", "python"}});
    ASSERT_TRUE(c.result);
    EXPECT_NE((*c.result)["host"], host);
  }
}

TEST_F(FleetRouterTest, ARestartedHostsOldSandboxesAreLost) {
  ASSERT_TRUE(router.Probe().ok());
  std::string id = Create();
  std::string host = router.locator().Get(id)->ns;
  engine.hosts[host].boot = "boot-2";  // restarted: the daemon cleaned its sandboxes up
  engine.hosts[host].sandboxes.clear();
  ASSERT_TRUE(router.Probe().ok());
  Invocation inv = router.Handle("sandbox::exec", {{"sandbox_id", id}, {"cmd", "true"}});
  ASSERT_TRUE(inv.error);
  EXPECT_EQ(inv.error->code(), Code::kS301);
}

TEST_F(FleetRouterTest, ASilentHostGetsNoNewSandboxes) {
  ASSERT_TRUE(router.Probe().ok());
  engine.hosts["skiff.b"].silent = true;
  ASSERT_TRUE(router.Probe().ok());
  EXPECT_EQ(router.hosts().StateOf("skiff.b"), HostState::kSilent);
  for (int i = 0; i < 4; ++i) {
    Invocation c = router.Handle("sandbox::create", {{"image", "python"}});
    ASSERT_TRUE(c.result);
    EXPECT_NE((*c.result)["host"], "skiff.b");
  }
  engine.hosts["skiff.b"].silent = false;  // healed
  ASSERT_TRUE(router.Probe().ok());
  EXPECT_EQ(router.hosts().StateOf("skiff.b"), HostState::kHealthy);
}

// A host partitioned since the last probe holds a merged list no longer
// than a probe would wait for it, and is left out of that answer.
TEST_F(FleetRouterTest, AListWaitsForASilentHostOnlyAsLongAsAProbe) {
  ASSERT_TRUE(router.Probe().ok());
  Create();
  ASSERT_TRUE(router.Probe().ok());
  engine.hosts["skiff.a"].silent = true;
  engine.hosts["skiff.b"].silent = true;
  engine.hosts["skiff.c"].silent = true;
  Invocation inv = router.Handle("sandbox::list", json::object());
  ASSERT_TRUE(inv.result);
  EXPECT_EQ((*inv.result)["sandboxes"].size(), 0u);
  EXPECT_EQ(engine.deadlines["sandbox::list"], RouterOptions{}.probe_deadline);
  for (auto n : {"skiff.a", "skiff.b", "skiff.c"})
    EXPECT_EQ(router.hosts().StateOf(n), HostState::kSilent) << n;
}

// A host that leaves during a create (its worker gone before it answered)
// costs the caller nothing: the next host makes the sandbox, under a new
// name. A caller that named the sandbox gets the error and decides.
TEST_F(FleetRouterTest, ACreateWhoseHostLeavesMidCallGoesToTheNextHost) {
  ASSERT_TRUE(router.Probe().ok());
  engine.connected.erase("skiff.a");  // gone, and the router has not probed since
  engine.connected.erase("skiff.b");
  for (int i = 0; i < 3; ++i) {
    Invocation c = router.Handle("sandbox::create", {{"image", "python"}});
    ASSERT_TRUE(c.result) << (c.error ? c.error->message() : c.relayed_error->dump());
    EXPECT_EQ((*c.result)["host"], "skiff.c");
  }
  engine.connected.erase("skiff.c");
  Invocation none = router.Handle("sandbox::create", {{"image", "python"}});
  ASSERT_TRUE(none.error);
  EXPECT_EQ(none.error->code(), Code::kS300) << none.error->message();

  engine.connected = {"skiff.a", "skiff.b", "skiff.c"};
  ASSERT_TRUE(router.Probe().ok());
  engine.connected.erase("skiff.a");
  engine.connected.erase("skiff.b");
  engine.connected.erase("skiff.c");
  Invocation named = router.Handle(
      "sandbox::create", {{"image", "python"}, {"sandbox_id", "0d9c7e4b-5a61-4f3e-9a2d-1c8b7e6f5a43"}});
  ASSERT_TRUE(named.error);
  EXPECT_EQ(named.error->code(), Code::kS300);
}

TEST_F(FleetRouterTest, ARestartedRouterFindsSandboxesByAskingTheHosts) {
  engine.has_state = false;  // an engine without a state worker
  ASSERT_TRUE(router.Probe().ok());
  std::string id = Create();
  std::string host = router.locator().Get(id)->ns;
  FleetRouter fresh(engine, RouterOptions{});  // no cache
  ASSERT_TRUE(fresh.Probe().ok());
  Invocation inv = fresh.Handle("sandbox::exec", {{"sandbox_id", id}, {"cmd", "true"}});
  ASSERT_TRUE(inv.result);
  EXPECT_EQ((*inv.result)["host_answered"], host);
  ASSERT_TRUE(fresh.locator().Get(id));
  EXPECT_EQ(engine.CallsTo("skiff::host::has", host), 1u);
}

TEST_F(FleetRouterTest, ARestartedRouterFindsSandboxesThroughTheEngineState) {
  ASSERT_TRUE(router.Probe().ok());
  std::string id = Create();
  std::string host = router.locator().Get(id)->ns;
  ASSERT_TRUE(engine.state.count(std::string(kPlacementScope) + "/" + id));
  FleetRouter fresh(engine, RouterOptions{});  // a restart, or a standby taking over
  ASSERT_TRUE(fresh.Probe().ok());
  Invocation inv = fresh.Handle("sandbox::exec", {{"sandbox_id", id}, {"cmd", "true"}});
  ASSERT_TRUE(inv.result);
  EXPECT_EQ((*inv.result)["host_answered"], host);
  for (auto n : {"skiff.a", "skiff.b", "skiff.c"}) EXPECT_EQ(engine.CallsTo("skiff::host::has", n), 0u) << n;
}

// Only the engine's state remembers which host held a sandbox whose host
// left before the router restarted: S301, as for the router that placed it.
TEST_F(FleetRouterTest, AfterARouterRestartALostHostsSandboxesAreStillHostLost) {
  ASSERT_TRUE(router.Probe().ok());
  std::string id = Create();
  std::string host = router.locator().Get(id)->ns;
  engine.connected.erase(host);
  FleetRouter fresh(engine, RouterOptions{});
  ASSERT_TRUE(fresh.Probe().ok());
  Invocation inv = fresh.Handle("sandbox::exec", {{"sandbox_id", id}, {"cmd", "true"}});
  ASSERT_TRUE(inv.error);
  EXPECT_EQ(inv.error->code(), Code::kS301) << inv.error->message();
  EXPECT_NE(inv.error->message().find(host), std::string::npos);

  engine.state.clear();  // what a router without the engine's state can say
  FleetRouter forgetful(engine, RouterOptions{});
  ASSERT_TRUE(forgetful.Probe().ok());
  Invocation unknown = forgetful.Handle("sandbox::exec", {{"sandbox_id", id}, {"cmd", "true"}});
  ASSERT_TRUE(unknown.error);
  EXPECT_EQ(unknown.error->code(), Code::kS002);
}

// No record outlives its sandbox: a stop through the router deletes it, and
// so does a host answering S002 (the sandbox went by the host's own idle
// rules); so does a host's restart.
TEST_F(FleetRouterTest, RecordsGoWithTheirSandboxes) {
  ASSERT_TRUE(router.Probe().ok());
  std::string stopped = Create();
  std::string idled = Create();
  std::string rebooted = Create();
  ASSERT_EQ(engine.state.size(), 3u);
  ASSERT_TRUE(router.Handle("sandbox::stop", {{"sandbox_id", stopped}}).result);
  std::string idle_host = router.locator().Get(idled)->ns;
  engine.hosts[idle_host].sandboxes.erase(idled);
  Invocation gone = router.Handle("sandbox::exec", {{"sandbox_id", idled}, {"cmd", "true"}});
  ASSERT_TRUE(gone.relayed_error);
  EXPECT_EQ(SCodeOf(*gone.relayed_error), "S002");
  std::string reboot_host = router.locator().Get(rebooted)->ns;
  engine.hosts[reboot_host].boot = "boot-2";
  engine.hosts[reboot_host].sandboxes.clear();
  ASSERT_TRUE(router.Probe().ok());
  Invocation lost = router.Handle("sandbox::exec", {{"sandbox_id", rebooted}, {"cmd", "true"}});
  ASSERT_TRUE(lost.error);
  EXPECT_EQ(lost.error->code(), Code::kS301);
  EXPECT_TRUE(engine.state.empty()) << json(engine.state).dump();
}

// The state is read with care: a record that does not name a host of this
// fleet is ignored and the hosts are asked.
TEST_F(FleetRouterTest, ARecordNamingNoFleetHostIsIgnored) {
  ASSERT_TRUE(router.Probe().ok());
  std::string id = Create();
  std::string host = router.locator().Get(id)->ns;
  const std::string key = std::string(kPlacementScope) + "/" + id;
  for (json junk : {json("skiff.a"), json{{"host", "other.team"}, {"boot_id", "b"}},
                    json{{"host", "skiff."}, {"boot_id", "b"}}, json{{"host", 7}, {"boot_id", "b"}},
                    json{{"host", "skiff.a"}}}) {
    engine.state[key] = junk;
    FleetRouter fresh(engine, RouterOptions{});
    ASSERT_TRUE(fresh.Probe().ok());
    Invocation inv = fresh.Handle("sandbox::exec", {{"sandbox_id", id}, {"cmd", "true"}});
    ASSERT_TRUE(inv.result) << junk.dump();
    EXPECT_EQ((*inv.result)["host_answered"], host) << junk.dump();
  }
}

// Without a state worker on the engine, everything still works; the index
// says it is unavailable.
TEST_F(FleetRouterTest, AnEngineWithoutStateStillRoutes) {
  engine.has_state = false;
  ASSERT_TRUE(router.Probe().ok());
  std::string id = Create();
  EXPECT_TRUE(router.Handle("sandbox::exec", {{"sandbox_id", id}, {"cmd", "true"}}).result);
  EXPECT_TRUE(router.Handle("sandbox::stop", {{"sandbox_id", id}}).result);
  EXPECT_TRUE(engine.state.empty());
}

TEST_F(FleetRouterTest, HostErrorsAreRelayedVerbatim) {
  ASSERT_TRUE(router.Probe().ok());
  std::string id = Create();
  ASSERT_TRUE(router.Handle("sandbox::stop", {{"sandbox_id", id}}).result);
  EXPECT_FALSE(router.locator().Get(id));
  Invocation inv = router.Handle("sandbox::stop", {{"sandbox_id", id}});  // found by asking: nobody has it
  ASSERT_TRUE(inv.error);
  EXPECT_EQ(inv.error->code(), Code::kS002);
  EXPECT_EQ(SCodeOf(FakeEngine::SError("S213", "x")), "S213");
  EXPECT_EQ(SCodeOf(json{{"code", "function_not_found"}}), "");
  EXPECT_EQ(SCodeOf(json{{"code", "invocation_failed"}, {"message", "handler error: not json"}}), "");
}

TEST_F(FleetRouterTest, NoHostsIsAPlatformError) {
  engine.connected.clear();
  ASSERT_TRUE(router.Probe().ok());
  Invocation inv = router.Handle("sandbox::create", {{"image", "python"}});
  ASSERT_TRUE(inv.error);
  EXPECT_EQ(inv.error->code(), Code::kS300);
}

TEST_F(FleetRouterTest, AnEngineWithoutNamespacesIsRefused) {
  engine.legacy = true;
  Status st = router.Probe();
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(router.engine_too_old());
  EXPECT_NE(st.error().message().find("0.23"), std::string::npos);
}

}  // namespace
}  // namespace skiff::fleet
