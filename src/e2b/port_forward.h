// Forwarding one HTTP request to a port inside a sandbox (docs/e2b.md#ports):
// E2B's getHost(port) URLs, and any E2B sandbox traffic for a port other
// than envd's (the code interpreter's 49999 among them). The request is
// written to the server as HTTP/1.1 with `Connection: close` through the
// sandbox's agent (SandboxService::PortRelay, op port.connect); its answer
// streams back as it arrives (status, headers without the hop-by-hop ones,
// the body chunk by chunk), so server-sent events and NDJSON streams work.
// Who may reach the sandbox is the caller's business: Forward() only
// forwards.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "e2b/exchange.h"
#include "sandbox/service.h"

namespace skiff::e2b {

// E2B's proxy answer for a sandbox or port that cannot be reached (502).
Reply ProxyError(const std::string& sandbox_id, int status, std::string_view message);

class PortForwarder {
 public:
  explicit PortForwarder(SandboxService& service) : svc_(service) {}

  // Sends `req` (its method, target and headers) with `body` to `port` of
  // `sandbox_id` and streams the answer to `out`. Before the answer
  // started, a failure is a 502 in E2B's shape (nothing listens, the
  // sandbox is gone, the server's answer is not HTTP); after, the answer
  // is cut (never passed off as whole). A WebSocket upgrade is 501.
  void Forward(const std::string& sandbox_id, uint16_t port, const Request& req, std::string_view body,
               ResponseWriter& out);

 private:
  SandboxService& svc_;
};

}  // namespace skiff::e2b
