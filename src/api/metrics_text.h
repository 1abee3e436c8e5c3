// The sandbox part of /metrics (live sandboxes, reaps, execs in flight, the
// warm pools, build info) in the Prometheus text format; Metrics::Render
// appends it to the transport's own series.
#pragma once

#include <string>

#include "api/sandbox_access.h"

namespace skiff::api {

std::string SandboxGaugesText(const SandboxGauges& g, const std::string& version);

}  // namespace skiff::api
