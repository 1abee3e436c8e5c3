// Placement policy and host table of the fleet router (docs/multihost.md).
#include <gtest/gtest.h>

#include "fleet/host_table.h"
#include "fleet/placement.h"

namespace skiff::fleet {
namespace {

HostView Host(std::string ns, uint32_t max, uint32_t used, double load = 0,
              std::vector<std::string> iso = {"jail"}) {
  HostView h;
  h.ns = std::move(ns);
  h.max_sandboxes = max;
  h.sandboxes = used;
  h.load_1m = load;
  h.cpus = 2;
  h.isolations = std::move(iso);
  return h;
}

TEST(PlacementTest, MostFreeRoomFirstThenLeastLoad) {
  std::vector<HostView> hosts = {Host("skiff.a", 10, 8), Host("skiff.b", 10, 2, 1.5),
                                 Host("skiff.c", 10, 2, 0.2)};
  EXPECT_EQ(RankHosts(hosts, ""), (std::vector<std::string>{"skiff.c", "skiff.b", "skiff.a"}));
}

TEST(PlacementTest, FullHostsAndMissingBackendsAreLeftOut) {
  std::vector<HostView> hosts = {Host("skiff.full", 4, 4), Host("skiff.jail", 4, 0),
                                 Host("skiff.vm", 4, 1, 0, {"jail", "microvm"}), Host("skiff.zero", 0, 0)};
  EXPECT_EQ(RankHosts(hosts, "microvm"), (std::vector<std::string>{"skiff.vm"}));
  EXPECT_EQ(RankHosts(hosts, "jail"), (std::vector<std::string>{"skiff.jail", "skiff.vm"}));
  EXPECT_TRUE(RankHosts({Host("skiff.full", 4, 4)}, "").empty());
}

// The hosts a refusal must still ask: full as last seen, offering the backend.
TEST(PlacementTest, FullHostsAreThoseThatLookedFull) {
  std::vector<HostView> hosts = {Host("skiff.z", 4, 5), Host("skiff.full", 4, 4), Host("skiff.room", 4, 1),
                                 Host("skiff.vm", 4, 4, 0, {"jail", "microvm"}), Host("skiff.zero", 0, 0)};
  EXPECT_EQ(FullHosts(hosts, ""), (std::vector<std::string>{"skiff.full", "skiff.vm", "skiff.z"}));
  EXPECT_EQ(FullHosts(hosts, "microvm"), (std::vector<std::string>{"skiff.vm"}));
  EXPECT_TRUE(FullHosts({Host("skiff.room", 4, 1)}, "").empty());
}

// A create tries the roomy hosts first and those that looked full last,
// so a stale view never refuses a create that some host has room for.
TEST(PlacementTest, PlacementOrderAsksTheFullLookingHostsLast) {
  std::vector<HostView> hosts = {Host("skiff.full", 4, 4), Host("skiff.busy", 4, 3), Host("skiff.idle", 4, 0),
                                 Host("skiff.vm", 4, 4, 0, {"microvm"})};
  EXPECT_EQ(PlacementOrder(hosts, "jail"),
            (std::vector<std::string>{"skiff.idle", "skiff.busy", "skiff.full"}));
  EXPECT_EQ(PlacementOrder(hosts, ""),
            (std::vector<std::string>{"skiff.idle", "skiff.busy", "skiff.full", "skiff.vm"}));
  EXPECT_TRUE(PlacementOrder(hosts, "gvisor").empty());
}

TEST(PlacementTest, TiesGoToAWarmPoolThenByName) {
  HostView a = Host("skiff.a", 4, 0), b = Host("skiff.b", 4, 0);
  b.pooled_ready = 1;
  EXPECT_EQ(RankHosts({a, b}, ""), (std::vector<std::string>{"skiff.b", "skiff.a"}));
  b.pooled_ready = 0;
  EXPECT_EQ(RankHosts({b, a}, ""), (std::vector<std::string>{"skiff.a", "skiff.b"}));
}

TEST(HostTableTest, ConnectedSilentHealthyLost) {
  HostTable t;
  t.SetConnected({"skiff.a", "skiff.b"});
  EXPECT_EQ(t.StateOf("skiff.a"), HostState::kSilent);  // not placed on before a probe answers
  EXPECT_TRUE(t.Healthy().empty());
  t.ProbeOk(Host("skiff.a", 4, 0), "boot-1");
  EXPECT_EQ(t.StateOf("skiff.a"), HostState::kHealthy);
  ASSERT_EQ(t.Healthy().size(), 1u);
  EXPECT_EQ(*t.BootOf("skiff.a"), "boot-1");
  t.ProbeFailed("skiff.a");
  EXPECT_EQ(t.StateOf("skiff.a"), HostState::kSilent);
  EXPECT_EQ(t.connected(), 2u);
  t.SetConnected({"skiff.b"});
  EXPECT_EQ(t.StateOf("skiff.a"), HostState::kLost);
  t.ProbeOk(Host("skiff.a", 4, 0), "boot-1");  // a late answer does not revive a lost host
  EXPECT_EQ(t.StateOf("skiff.a"), HostState::kLost);
  t.SetConnected({"skiff.a", "skiff.b"});  // it rejoined
  t.ProbeOk(Host("skiff.a", 4, 0), "boot-2");
  EXPECT_EQ(t.StateOf("skiff.a"), HostState::kHealthy);
  EXPECT_EQ(*t.BootOf("skiff.a"), "boot-2");
  EXPECT_EQ(t.StateOf("skiff.nobody"), HostState::kUnknown);
}

}  // namespace
}  // namespace skiff::fleet
