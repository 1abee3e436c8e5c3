#include "api/metrics_text.h"

#include "api/metrics.h"

namespace skiff::api {

std::string SandboxGaugesText(const SandboxGauges& g, const std::string& version) {
  std::string extra;
  extra += "# HELP skiff_sandboxes Live sandboxes by isolation backend.\n";
  extra += "# TYPE skiff_sandboxes gauge\n";
  for (const auto& [iso, n] : g.by_isolation) {
    extra += "skiff_sandboxes{isolation=\"" + LabelValue(iso) + "\"} " + std::to_string(n) + "\n";
  }
  extra += "# HELP skiff_sandboxes_reaped_total Sandboxes stopped by the idle reaper.\n";
  extra += "# TYPE skiff_sandboxes_reaped_total counter\n";
  extra += "skiff_sandboxes_reaped_total " + std::to_string(g.reaped) + "\n";
  extra += "# HELP skiff_execs_in_flight Execs running now.\n";
  extra += "# TYPE skiff_execs_in_flight gauge\n";
  extra += "skiff_execs_in_flight " + std::to_string(g.execs_in_flight) + "\n";
  extra += "# HELP skiff_pool_ready Warm, unclaimed sandboxes per image.\n";
  extra += "# TYPE skiff_pool_ready gauge\n";
  for (const auto& p : g.pools) {
    extra += "skiff_pool_ready{image=\"" + LabelValue(p.image) + "\"} " + std::to_string(p.ready) + "\n";
  }
  extra += "# HELP skiff_pool_hits_total Creates that claimed a pooled sandbox.\n";
  extra += "# TYPE skiff_pool_hits_total counter\n";
  for (const auto& p : g.pools) {
    extra += "skiff_pool_hits_total{image=\"" + LabelValue(p.image) + "\"} " + std::to_string(p.hits) + "\n";
  }
  extra += "# HELP skiff_pool_misses_total Creates of a pooled image that booted fresh.\n";
  extra += "# TYPE skiff_pool_misses_total counter\n";
  for (const auto& p : g.pools) {
    extra +=
        "skiff_pool_misses_total{image=\"" + LabelValue(p.image) + "\"} " + std::to_string(p.misses) + "\n";
  }
  extra += "# HELP skiff_pool_fill_failures_total Failed background boots of pooled sandboxes.\n";
  extra += "# TYPE skiff_pool_fill_failures_total counter\n";
  for (const auto& p : g.pools) {
    extra += "skiff_pool_fill_failures_total{image=\"" + LabelValue(p.image) + "\"} " +
             std::to_string(p.fill_failures) + "\n";
  }
  extra += "# HELP skiff_build_info Build facts; always 1.\n";
  extra += "# TYPE skiff_build_info gauge\n";
  extra += "skiff_build_info{version=\"" + LabelValue(version) + "\",isolation=\"" +
           LabelValue(g.default_isolation) + "\"} 1\n";
  return extra;
}

}  // namespace skiff::api
