// skiffd: one Boost.Asio event loop serving every transport of
// docs/architecture.md#transports-and-their-limits on one port (and optionally a unix socket): HTTP/JSON, the
// iii engine WebSocket protocol on "/", data channels, /otel, /metrics and /healthz. Handlers that block
// (anything that reaches a sandbox) run on a thread pool; the event loop only parses, routes and moves bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/error.h"
#include "sandbox/config.h"
#include "sandbox/service.h"

namespace skiff::api {

std::string Version();

class Server {
 public:
  // S300 when the blocking pool's threads cannot be started.
  static Result<std::unique_ptr<Server>> Create(SandboxService& manager, Config config);
  ~Server();

  // Binds listen_address:listen_port (port 0 = any free port) and, when
  // config.unix_socket is set, that socket (mode 0600, stale file replaced).
  Status Listen();
  uint16_t port() const;
  // Runs the event loop until Stop(); blocks the calling thread.
  void Run();
  // Thread-safe. Stops accepting connections, aborts open data channels and
  // ends the event loop. In-flight pool work is left to finish.
  void Stop();
  // Stops accepting new connections only.
  void StopAccepting();
  // Worker mode: called (on the event loop) when the engine rejects our
  // registration (the last step of worker registration).
  void OnRegistrationRejected(std::function<void()> f);

  struct Impl;

 private:
  Server(SandboxService& manager, Config config);

  std::unique_ptr<Impl> impl_;
};

}  // namespace skiff::api
