// The registry's bookkeeping (caps, lookup, stop, reap, agent death, warm
// pools, shutdown) and the agent failure mapping, on sandbox records with no
// instance or agent behind them: teardown of such a record does nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "sandbox/agent_errors.h"
#include "sandbox/registry.h"

namespace skiff {
namespace {

std::shared_ptr<Sandbox> Record(const std::string& id, const std::string& image = "host") {
  auto sb = std::make_shared<Sandbox>();
  sb->id = id;
  sb->image = image;
  return sb;
}

Config SmallConfig() {
  Config c;
  c.max_concurrent_sandboxes = 2;
  c.max_concurrent_exec_per_sandbox = 1;
  return c;
}

TEST(SandboxRegistryLifecycle, ReserveCountsLiveAndInProgress) {
  Config c = SmallConfig();
  SandboxRegistry r(c, {});
  ASSERT_TRUE(r.Reserve().ok());
  ASSERT_TRUE(r.Register(Record("a")).ok());
  r.Unreserve();                  // as a create does once its sandbox is registered
  ASSERT_TRUE(r.Reserve().ok());  // one live + one in progress: the cap
  auto full = r.Reserve();
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code(), Code::kS400);
  EXPECT_EQ(full.error().message(), "resource limit exceeded: max_concurrent_sandboxes (2) reached");
  r.Unreserve();
  EXPECT_TRUE(r.Reserve().ok());
}

TEST(SandboxRegistryLifecycle, LookupStopAndJoin) {
  Config c = SmallConfig();
  SandboxRegistry r(c, {});
  auto sb = Record("a");
  ASSERT_TRUE(r.Register(sb).ok());
  EXPECT_EQ(sb->state, SandboxState::kReady);
  ASSERT_TRUE(r.Lookup("a").ok());
  EXPECT_EQ(r.Lookup("b").error().code(), Code::kS002);

  auto first = r.BeginStop("a");
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->first);
  EXPECT_TRUE(r.Stopping(*sb));
  EXPECT_TRUE(r.List().empty());  // out of the registry before stop returns
  EXPECT_EQ(r.Lookup("a").error().code(), Code::kS002);
  auto joined = r.BeginStop("a");  // the stop in progress is joined
  ASSERT_TRUE(joined.ok());
  EXPECT_FALSE(joined->first);
  EXPECT_EQ(joined->sandbox, sb);

  sb->Teardown();
  r.FinishTeardown(sb);
  EXPECT_EQ(sb->state, SandboxState::kStopped);
  EXPECT_EQ(r.BeginStop("a").error().code(), Code::kS002);
}

TEST(SandboxRegistryLifecycle, ExecSlots) {
  Config c = SmallConfig();
  SandboxRegistry r(c, {});
  auto sb = Record("a");
  ASSERT_TRUE(r.Register(sb).ok());
  ASSERT_TRUE(r.AcquireExecSlot(*sb).ok());
  auto busy = r.AcquireExecSlot(*sb);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().code(), Code::kS003);
  auto list = r.List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].exec_in_flight, 1u);
  EXPECT_EQ(list[0].exec_slots_free, 0u);
  r.ReleaseExecSlot(*sb);
  EXPECT_TRUE(r.AcquireExecSlot(*sb).ok());
  r.ReleaseExecSlot(*sb);
  ASSERT_TRUE(r.BeginStop("a").ok());
  auto stopped = r.AcquireExecSlot(*sb);
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.error().message(), "sandbox already stopped: a");
}

TEST(SandboxRegistryLifecycle, TakeExpiredAndDeath) {
  Config c = SmallConfig();
  SandboxRegistry r(c, {});
  auto a = Record("a"), b = Record("b");
  ASSERT_TRUE(r.Register(a).ok());
  ASSERT_TRUE(r.Register(b).ok());
  auto victims = r.TakeExpired([](const Sandbox& sb) { return sb.id == "a"; });
  ASSERT_EQ(victims.size(), 1u);
  EXPECT_EQ(victims[0], a);
  EXPECT_EQ(a->state, SandboxState::kStopping);
  // A death after a stop began changes nothing.
  EXPECT_EQ(r.RemoveDead(a), SandboxRegistry::Removed::kNone);
  EXPECT_EQ(r.RemoveDead(b), SandboxRegistry::Removed::kLive);
  EXPECT_EQ(r.Lookup("b").error().code(), Code::kS002);
}

TEST(SandboxRegistryPool, ClaimAdoptsAndCounts) {
  Config c = SmallConfig();
  SandboxRegistry r(c, {{"host", 1}});
  EXPECT_TRUE(r.HasPool("host"));
  EXPECT_FALSE(r.HasPool("node"));
  EXPECT_EQ(r.WaitForPoolNeed(), "host");  // below target, due now
  auto p = Record("p");
  ASSERT_TRUE(r.AddPooled("host", p).ok());
  EXPECT_EQ(p->state, SandboxState::kReady);

  auto miss = r.ClaimPooled("host", /*matches=*/false, [](Sandbox&) {});
  ASSERT_TRUE(miss.ok());
  EXPECT_EQ(*miss, nullptr);
  auto hit = r.ClaimPooled("host", /*matches=*/true, [](Sandbox& sb) { sb.name = "claimed"; });
  ASSERT_TRUE(hit.ok());
  ASSERT_EQ(*hit, p);
  EXPECT_EQ(p->name, "claimed");
  EXPECT_TRUE(r.Lookup("p").ok());

  auto st = r.PoolStats();
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].target, 1u);
  EXPECT_EQ(st[0].ready, 0u);
  EXPECT_EQ(st[0].hits, 1u);
  EXPECT_EQ(st[0].misses, 1u);
}

// A sandbox's tenant is found while it is live and while it is being
// stopped, never for a pooled one (nobody's until claimed) or after its end.
TEST(SandboxRegistryTenants, TenantOfFollowsTheRecord) {
  Config c = SmallConfig();
  SandboxRegistry r(c, {{"host", 1}});
  auto a = Record("a");
  a->tenant = "alice";
  ASSERT_TRUE(r.Register(a).ok());
  EXPECT_EQ(r.TenantOf("a"), "alice");
  EXPECT_EQ(r.TenantOf("zz"), std::nullopt);
  ASSERT_EQ(r.List().size(), 1u);
  EXPECT_EQ(r.List()[0].tenant, "alice");

  auto p = Record("p");
  ASSERT_TRUE(r.AddPooled("host", p).ok());
  EXPECT_EQ(r.TenantOf("p"), std::nullopt);
  auto hit = r.ClaimPooled("host", /*matches=*/true, [](Sandbox& sb) { sb.tenant = "bob"; });
  ASSERT_TRUE(hit.ok());
  ASSERT_EQ(*hit, p);
  EXPECT_EQ(r.TenantOf("p"), "bob");

  auto stop = r.BeginStop("a");
  ASSERT_TRUE(stop.ok());
  EXPECT_EQ(r.TenantOf("a"), "alice");  // being stopped: still alice's (S004 is hers to see)
  a->Teardown();
  r.FinishTeardown(a);
  EXPECT_EQ(r.TenantOf("a"), std::nullopt);
  EXPECT_EQ(r.BeginStop("a").error().message(), SandboxNotFound("a").message());
}

TEST(SandboxRegistryPool, DeadPooledSandboxLeavesThePool) {
  Config c = SmallConfig();
  SandboxRegistry r(c, {{"host", 1}});
  auto p = Record("p");
  ASSERT_TRUE(r.AddPooled("host", p).ok());
  EXPECT_EQ(r.RemoveDead(p), SandboxRegistry::Removed::kPooled);
  EXPECT_EQ(r.PoolStats()[0].ready, 0u);
}

TEST(SandboxRegistryPool, FillFailuresBackOff) {
  Config c = SmallConfig();
  SandboxRegistry r(c, {{"host", 1}});
  auto backoff = [](uint32_t before) { return std::chrono::seconds(1u << before); };
  auto [n1, b1] = r.PoolFillFailed("host", backoff);
  auto [n2, b2] = r.PoolFillFailed("host", backoff);
  EXPECT_EQ(n1, 1u);
  EXPECT_EQ(n2, 2u);
  EXPECT_EQ(b1, std::chrono::seconds(1));
  EXPECT_EQ(b2, std::chrono::seconds(2));
  EXPECT_EQ(r.PoolStats()[0].fill_failures, 2u);
  ASSERT_TRUE(r.AddPooled("host", Record("p")).ok());  // a success resets the run
  EXPECT_EQ(r.PoolFillFailed("host", backoff).first, 1u);
}

TEST(SandboxRegistryLifecycle, ShutdownTakesEverythingAndRefusesNewWork) {
  Config c = SmallConfig();
  SandboxRegistry r(c, {{"host", 1}});
  auto live = Record("a"), pooled = Record("p");
  ASSERT_TRUE(r.Register(live).ok());
  ASSERT_TRUE(r.AddPooled("host", pooled).ok());
  auto all = r.BeginShutdown();
  EXPECT_EQ(all.size(), 2u);
  EXPECT_EQ(live->state, SandboxState::kStopping);
  EXPECT_EQ(pooled->state, SandboxState::kStopping);
  EXPECT_EQ(r.WaitForPoolNeed(), "");  // the filler ends
  EXPECT_EQ(r.Reserve().error().message(), "platform failure: sandbox: the daemon is shutting down");
  auto late = Record("late");
  EXPECT_FALSE(r.Register(late).ok());
  EXPECT_EQ(late->state, SandboxState::kStopped);  // torn down, not registered
  EXPECT_FALSE(r.AddPooled("host", Record("late2")).ok());
  EXPECT_FALSE(r.ClaimPooled("host", true, [](Sandbox&) {}).ok());
}

// A create still booting when the daemon shuts down: Shutdown must not
// return (and the daemon exit) before that create's sandbox is torn down.
TEST(SandboxRegistryLifecycle, ShutdownWaitsForCreatesInProgress) {
  Config c = SmallConfig();
  SandboxRegistry r(c, {});
  ASSERT_TRUE(r.Reserve().ok());  // a create has begun booting
  (void)r.BeginShutdown();
  std::atomic<bool> waited{false};
  std::thread shutdown([&] {
    r.WaitCreates();
    waited = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(waited);  // the boot is still running
  auto booted = Record("booted");
  EXPECT_FALSE(r.Register(booted).ok());             // the boot ends: refused...
  EXPECT_EQ(booted->state, SandboxState::kStopped);  // ...and torn down
  EXPECT_FALSE(waited);                              // still reserved until the create unwinds
  r.Unreserve();
  shutdown.join();
  EXPECT_TRUE(waited);
  r.WaitCreates();  // nothing in progress: returns at once
}

// A `stop` with wait: true tears down on its own thread: Shutdown must not
// return (and the daemon exit) before that teardown has ended.
TEST(SandboxRegistryLifecycle, ShutdownWaitsForStopsInProgress) {
  Config c = SmallConfig();
  SandboxRegistry r(c, {});
  auto sb = Record("a");
  ASSERT_TRUE(r.Register(sb).ok());
  auto stop = r.BeginStop("a");  // the stop's teardown has begun
  ASSERT_TRUE(stop.ok());
  EXPECT_TRUE(r.BeginShutdown().empty());  // no longer registered
  std::atomic<bool> waited{false};
  std::thread shutdown([&] {
    r.WaitTeardowns();
    waited = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(waited);  // the teardown is still running
  r.FinishTeardown(stop->sandbox);
  shutdown.join();
  EXPECT_TRUE(waited);
  EXPECT_EQ(sb->state, SandboxState::kStopped);
}

TEST(AgentErrors, ClosedByHostIsAStop) {
  for (AgentCall call : {AgentCall::kFs, AgentCall::kExec}) {
    Error e = AgentConnectionError(call, proto::CloseReason::kClosedByHost, "closed by host", "id1");
    EXPECT_EQ(e.code(), Code::kS004);
    EXPECT_EQ(e.message(), "sandbox already stopped: id1");
  }
}

TEST(AgentErrors, TheReasonDecidesNotTheText) {
  // Only the host's own close is a stop; a text that reads like one is not.
  Error e = AgentConnectionError(AgentCall::kFs, proto::CloseReason::kAgentHungUp, "closed by host", "id1");
  EXPECT_EQ(e.code(), Code::kS216);
}

TEST(AgentErrors, FsTransport) {
  Error e = AgentConnectionError(AgentCall::kFs, proto::CloseReason::kIoError, "read: EIO", "id1");
  EXPECT_EQ(e.code(), Code::kS216);
  EXPECT_EQ(e.message(), "fs i/o error: sandbox transport: read: EIO");
}

TEST(AgentErrors, ExecAgentDied) {
  bool asked = false;
  Error e = AgentConnectionError(AgentCall::kExec, proto::CloseReason::kIoError, "read: EIO", "id1", [&] {
    asked = true;
    return std::string("exit status 137");
  });
  EXPECT_TRUE(asked);
  EXPECT_EQ(e.code(), Code::kS300);
  EXPECT_NE(e.message().find("the sandbox's agent died (read: EIO): exit status 137"), std::string::npos)
      << e.message();
  // A stop does not ask for the exit report.
  asked = false;
  (void)AgentConnectionError(AgentCall::kExec, proto::CloseReason::kClosedByHost, "closed by host", "id1",
                             [&] {
                               asked = true;
                               return std::string();
                             });
  EXPECT_FALSE(asked);
}

TEST(AgentErrors, FromAgentErrorKeepsCodeAndFixAndRefusesAMalformedOne) {
  Error e = FromAgentError({{"code", "S211"}, {"message", "no such file"}, {"fix", {{"path", "/x"}}}});
  EXPECT_EQ(e.code(), Code::kS211);
  EXPECT_EQ(e.message(), "no such file");
  EXPECT_EQ(e.fix(), (nlohmann::json{{"path", "/x"}}));
  for (const nlohmann::json& bad :
       {nlohmann::json::object(), nlohmann::json{{"code", "S999"}, {"message", "x"}},
        nlohmann::json{{"code", "S211"}, {"message", 7}}, nlohmann::json("S211")}) {
    Error u = FromAgentError(bad);
    EXPECT_EQ(u.code(), Code::kS300) << bad.dump();
    EXPECT_NE(u.message().find("agent sent a malformed ERROR"), std::string::npos) << u.message();
  }
}

}  // namespace
}  // namespace skiff
