// Where a fleet router puts a new sandbox (docs/multihost.md#placement):
// the policy alone, over plain facts, so it is tested without hosts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace skiff::fleet {

// What the router last learnt from one host's skiff::host::status.
struct HostView {
  std::string ns;  // the host's engine namespace, "skiff.<host>"
  std::vector<std::string> isolations;
  std::string default_isolation;
  uint32_t max_sandboxes = 0;
  uint32_t sandboxes = 0;
  uint32_t pooled_ready = 0;
  uint32_t cpus = 1;
  double load_1m = 0;
};

// The hosts a create asking for `isolation` ("" = the host's default) may
// go to, best first: hosts that offer the backend and have room, most free
// room (as a share of the cap) first, then the least load per CPU, then a
// warm pool, then by namespace so the order is stable. A caller tries
// them in turn, moving on when one answers S400.
std::vector<std::string> RankHosts(const std::vector<HostView>& hosts, const std::string& isolation);

// The hosts that offer the backend but looked full when last seen, by
// namespace: a status is a snapshot (a sandbox being stopped still counts
// in it), so before a create is refused these are asked too, and only
// their own S400 answers make the refusal.
std::vector<std::string> FullHosts(const std::vector<HostView>& hosts, const std::string& isolation);

// Every host a create may try, in the order it tries them: RankHosts, then
// FullHosts. A create is refused only when each of them said S400 just now.
std::vector<std::string> PlacementOrder(const std::vector<HostView>& hosts, const std::string& isolation);

}  // namespace skiff::fleet
