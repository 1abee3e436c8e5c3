#include "fleet/placement.h"

#include <algorithm>
#include <tuple>

namespace skiff::fleet {

namespace {

bool Offers(const HostView& h, const std::string& isolation) {
  return isolation.empty() ||
         std::find(h.isolations.begin(), h.isolations.end(), isolation) != h.isolations.end();
}

}  // namespace

std::vector<std::string> RankHosts(const std::vector<HostView>& hosts, const std::string& isolation) {
  struct Ranked {
    double free_share, load_per_cpu;
    bool pooled;
    const HostView* h;
  };
  std::vector<Ranked> ok;
  for (const auto& h : hosts) {
    if (!Offers(h, isolation)) continue;
    if (h.max_sandboxes == 0 || h.sandboxes >= h.max_sandboxes) continue;
    double free_share = static_cast<double>(h.max_sandboxes - h.sandboxes) / h.max_sandboxes;
    ok.push_back({free_share, h.load_1m / std::max<uint32_t>(h.cpus, 1), h.pooled_ready > 0, &h});
  }
  std::sort(ok.begin(), ok.end(), [](const Ranked& a, const Ranked& b) {
    return std::make_tuple(-a.free_share, a.load_per_cpu, !a.pooled, a.h->ns) <
           std::make_tuple(-b.free_share, b.load_per_cpu, !b.pooled, b.h->ns);
  });
  std::vector<std::string> out;
  out.reserve(ok.size());
  for (const auto& r : ok) out.push_back(r.h->ns);
  return out;
}

std::vector<std::string> FullHosts(const std::vector<HostView>& hosts, const std::string& isolation) {
  std::vector<std::string> out;
  for (const auto& h : hosts) {
    if (Offers(h, isolation) && h.max_sandboxes > 0 && h.sandboxes >= h.max_sandboxes) out.push_back(h.ns);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> PlacementOrder(const std::vector<HostView>& hosts, const std::string& isolation) {
  std::vector<std::string> out = RankHosts(hosts, isolation);
  std::vector<std::string> full = FullHosts(hosts, isolation);
  out.insert(out.end(), full.begin(), full.end());
  return out;
}

}  // namespace skiff::fleet
