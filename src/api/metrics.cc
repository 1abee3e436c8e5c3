#include "api/metrics.h"

#include <cstdio>

namespace skiff::api {

std::string LabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out.push_back(c);
  }
  return out;
}

namespace {
std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v) {
  std::lock_guard lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::Render(std::string& out, const std::string& name, const std::string& labels) const {
  std::lock_guard lock(mu_);
  uint64_t cum = 0;
  std::string sep = labels.empty() ? "" : ",";
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    std::string le = i < bounds_.size() ? Num(bounds_[i]) : "+Inf";
    out += name;
    out += "_bucket{";
    out += labels;
    out += sep;
    out += "le=\"";
    out += le;
    out += "\"} ";
    out += std::to_string(cum);
    out += '\n';
  }
  std::string l;
  if (!labels.empty()) {
    l += '{';
    l += labels;
    l += '}';
  }
  out += name;
  out += "_sum";
  out += l;
  out += ' ';
  out += Num(sum_);
  out += '\n';
  out += name;
  out += "_count";
  out += l;
  out += ' ';
  out += std::to_string(count_);
  out += '\n';
}

void Metrics::FunctionCall(const std::string& function, const std::string& result) {
  std::lock_guard lock(mu_);
  ++calls_[{function, result}];
}

void Metrics::SandboxCreate(const std::string& image, const std::string& result) {
  std::lock_guard lock(mu_);
  ++creates_[{image, result}];
}

void Metrics::CreateSeconds(bool pooled, double seconds) {
  (pooled ? create_seconds_pooled_ : create_seconds_).Observe(seconds);
}

void Metrics::Exec(double seconds) { exec_seconds_.Observe(seconds); }

std::string Metrics::Render(const std::string& extra) const {
  std::string out;
  out += "# HELP skiff_function_calls_total Function calls by id and result (ok or S-code).\n";
  out += "# TYPE skiff_function_calls_total counter\n";
  {
    std::lock_guard lock(mu_);
    for (const auto& [k, n] : calls_) {
      out += "skiff_function_calls_total{function=\"" + LabelValue(k.first) + "\",result=\"" +
             LabelValue(k.second) + "\"} " + std::to_string(n) + "\n";
    }
    out += "# HELP skiff_sandbox_creates_total sandbox::create calls by image and result.\n";
    out += "# TYPE skiff_sandbox_creates_total counter\n";
    for (const auto& [k, n] : creates_) {
      out += "skiff_sandbox_creates_total{image=\"" + LabelValue(k.first) + "\",result=\"" +
             LabelValue(k.second) + "\"} " + std::to_string(n) + "\n";
    }
  }
  out += "# HELP skiff_sandbox_create_seconds Time to create a sandbox.\n";
  out += "# TYPE skiff_sandbox_create_seconds histogram\n";
  create_seconds_.Render(out, "skiff_sandbox_create_seconds", "pooled=\"false\"");
  create_seconds_pooled_.Render(out, "skiff_sandbox_create_seconds", "pooled=\"true\"");
  out += "# HELP skiff_exec_seconds Time of sandbox::exec calls.\n";
  out += "# TYPE skiff_exec_seconds histogram\n";
  exec_seconds_.Render(out, "skiff_exec_seconds", "");
  out += "# HELP skiff_ws_connections Open WebSocket connections.\n";
  out += "# TYPE skiff_ws_connections gauge\n";
  out += "skiff_ws_connections " + std::to_string(ws_connections.load()) + "\n";
  out += "# HELP skiff_api_connections Open API connections (HTTP and WebSocket, TCP and unix socket).\n";
  out += "# TYPE skiff_api_connections gauge\n";
  out += "skiff_api_connections " + std::to_string(connections.load()) + "\n";
  out += "# HELP skiff_api_connections_refused_total Connections refused over max_connections.\n";
  out += "# TYPE skiff_api_connections_refused_total counter\n";
  out += "skiff_api_connections_refused_total " + std::to_string(connections_refused.load()) + "\n";
  out += extra;
  return out;
}

}  // namespace skiff::api
