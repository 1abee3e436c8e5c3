// Transport-side metrics for GET /metrics (Prometheus text format 0.0.4).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace skiff::api {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  // Appends "<name>_bucket{<labels>le=..} ..." lines.
  void Render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bound, plus +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  void FunctionCall(const std::string& function, const std::string& result);
  // Counts a sandbox::create call by image and result.
  void SandboxCreate(const std::string& image, const std::string& result);
  // Times a successful create (sandbox::create or run), by whether it
  // claimed a pooled sandbox.
  void CreateSeconds(bool pooled, double seconds);
  void Exec(double seconds);
  std::atomic<int64_t> ws_connections{0};
  std::atomic<size_t> connections{0};            // open API connections (ConnectionSlot)
  std::atomic<uint64_t> connections_refused{0};  // over max_connections

  // Renders the transport's series; `extra` is appended (manager gauges).
  std::string Render(const std::string& extra) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, uint64_t> calls_;
  std::map<std::pair<std::string, std::string>, uint64_t> creates_;
  Histogram create_seconds_{{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}};
  Histogram create_seconds_pooled_{{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}};
  Histogram exec_seconds_{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}};
};

// Escapes a Prometheus label value.
std::string LabelValue(const std::string& v);

}  // namespace skiff::api
