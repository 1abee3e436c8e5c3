// What the transports take from the sandboxes outside a function call: the
// byte streams of /v1/sandboxes/{id}/files and the counts behind /metrics
// and /healthz. The one place api/ reaches into the SandboxService directly
// (function calls go through the function table), so that reach can be
// re-routed without touching the sessions.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/metrics_text.h"
#include "base/error.h"
#include "sandbox/service.h"

namespace skiff::api {

class SandboxAccess {
 public:
  explicit SandboxAccess(SandboxService& manager) : manager_(manager) {}

  // GET /v1/sandboxes/{id}/files.
  Status ReadFile(const std::string& sandbox_id, const std::string& path,
                  const std::function<void(const FsReadMeta&)>& on_meta, const ByteSink& sink) {
    return manager_.FsRead(sandbox_id, path, on_meta, sink);
  }
  // PUT /v1/sandboxes/{id}/files.
  Result<nlohmann::json> WriteFile(const std::string& sandbox_id, const std::string& path, uint32_t mode,
                                   bool parents, const ByteSource& source) {
    return manager_.FsWrite(sandbox_id, path, mode, parents, source, {});
  }

  // Whether `sandbox_id` names a live (listed) sandbox: its calls run on its lane.
  bool Exists(const std::string& sandbox_id) {
    for (const auto& e : manager_.List())
      if (e.sandbox_id == sandbox_id) return true;
    return false;
  }

  // /healthz.
  size_t SandboxCount() { return manager_.List().size(); }
  std::string DefaultIsolation() const { return manager_.default_isolation(); }
  std::vector<std::string> AvailableIsolations() const { return manager_.available_isolations(); }

  // /metrics.
  SandboxGauges Gauges() {
    SandboxGauges g;
    auto list = manager_.List();
    for (const auto& iso : manager_.available_isolations()) g.by_isolation[iso] = 0;
    for (const auto& e : list) {
      ++g.by_isolation[e.isolation];
      g.execs_in_flight += e.exec_in_flight;
    }
    g.reaped = manager_.stats().reaped.load();
    g.pools = manager_.PoolStats();
    g.default_isolation = manager_.default_isolation();
    return g;
  }

 private:
  SandboxService& manager_;
};

}  // namespace skiff::api
