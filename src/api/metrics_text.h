// The sandbox part of /metrics (live sandboxes, reaps, execs in flight, the
// warm pools, build info) in the Prometheus text format; Metrics::Render
// appends it to the transport's own series.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sandbox/types.h"

namespace skiff::api {

// A snapshot of the sandbox gauges /metrics reports (SandboxAccess::Gauges).
struct SandboxGauges {
  std::map<std::string, uint64_t> by_isolation;  // every available backend, 0 when idle
  uint64_t reaped = 0;
  uint64_t execs_in_flight = 0;
  std::vector<PoolStatus> pools;
  std::string default_isolation;
};

std::string SandboxGaugesText(const SandboxGauges& g, const std::string& version);

}  // namespace skiff::api
