// The sandbox gauges of /metrics in the Prometheus text format.
#include <gtest/gtest.h>

#include "api/metrics_text.h"

namespace skiff::api {
namespace {

TEST(ApiMetricsTextTest, EmptyHost) {
  SandboxGauges g;
  g.by_isolation = {{"jail", 0}};
  g.default_isolation = "jail";
  EXPECT_EQ(SandboxGaugesText(g, "1.0"),
            "# HELP skiff_sandboxes Live sandboxes by isolation backend.\n"
            "# TYPE skiff_sandboxes gauge\n"
            "skiff_sandboxes{isolation=\"jail\"} 0\n"
            "# HELP skiff_sandboxes_reaped_total Sandboxes stopped by the idle reaper.\n"
            "# TYPE skiff_sandboxes_reaped_total counter\n"
            "skiff_sandboxes_reaped_total 0\n"
            "# HELP skiff_execs_in_flight Execs running now.\n"
            "# TYPE skiff_execs_in_flight gauge\n"
            "skiff_execs_in_flight 0\n"
            "# HELP skiff_pool_ready Warm, unclaimed sandboxes per image.\n"
            "# TYPE skiff_pool_ready gauge\n"
            "# HELP skiff_pool_hits_total Creates that claimed a pooled sandbox.\n"
            "# TYPE skiff_pool_hits_total counter\n"
            "# HELP skiff_pool_misses_total Creates of a pooled image that booted fresh.\n"
            "# TYPE skiff_pool_misses_total counter\n"
            "# HELP skiff_pool_fill_failures_total Failed background boots of pooled sandboxes.\n"
            "# TYPE skiff_pool_fill_failures_total counter\n"
            "# HELP skiff_build_info Build facts; always 1.\n"
            "# TYPE skiff_build_info gauge\n"
            "skiff_build_info{version=\"1.0\",isolation=\"jail\"} 1\n");
}

TEST(ApiMetricsTextTest, CountsPoolsAndEscapedLabels) {
  SandboxGauges g;
  g.by_isolation = {{"jail", 2}, {"microvm", 1}};
  g.reaped = 7;
  g.execs_in_flight = 3;
  PoolStatus p;
  p.image = "py\"3";
  p.ready = 4;
  p.hits = 5;
  p.misses = 6;
  p.fill_failures = 1;
  g.pools = {p};
  g.default_isolation = "microvm";
  std::string t = SandboxGaugesText(g, "2.0");
  for (const char* line :
       {"skiff_sandboxes{isolation=\"jail\"} 2\n", "skiff_sandboxes{isolation=\"microvm\"} 1\n",
        "skiff_sandboxes_reaped_total 7\n", "skiff_execs_in_flight 3\n",
        "skiff_pool_ready{image=\"py\\\"3\"} 4\n", "skiff_pool_hits_total{image=\"py\\\"3\"} 5\n",
        "skiff_pool_misses_total{image=\"py\\\"3\"} 6\n",
        "skiff_pool_fill_failures_total{image=\"py\\\"3\"} 1\n",
        "skiff_build_info{version=\"2.0\",isolation=\"microvm\"} 1\n"}) {
    EXPECT_NE(t.find(line), std::string::npos) << line;
  }
  EXPECT_LT(t.find("isolation=\"jail\""), t.find("isolation=\"microvm\"} 1\n"));
}

}  // namespace
}  // namespace skiff::api
