// PortClient: one TCP connection to a port of a sandbox's own loopback,
// through its agent (op port.connect, protocol/messages.h). The sandbox is
// marked active when the relay starts and ends, and every second bytes move.
//
// Deadlines: the agent must answer the connect (META or ERROR) within
// `timeout`, and take the caller's bytes with progress within it. Once the
// caller's bytes are sent, a quiet server is normal (a stream of events):
// the relay waits while the sink still wants bytes, and ends with the
// server, with the sink (a client that went away) or with the sandbox.
#pragma once

#include <chrono>
#include <functional>

#include "base/error.h"
#include "protocol/client.h"
#include "protocol/messages.h"
#include "sandbox/sandbox.h"
#include "sandbox/types.h"

namespace skiff {

class PortClient {
 public:
  // `stopping` says whether a stop of the sandbox has begun (read under the
  // registry's lock).
  PortClient(Sandbox& sandbox, std::function<bool()> stopping, std::chrono::milliseconds timeout);

  // Connects to `port`, writes what `upstream` yields (until an empty
  // chunk; the write side stays open until the server closes its own, since
  // an HTTP server may take a half-close for a client that left), hands the
  // server's bytes to `sink`.
  // Errors: S222 nothing listens; S200 the agent did not answer in time;
  // S216 the sink went away; S004 the sandbox stopped; S300 the agent died
  // or broke the op.
  Result<proto::PortConnectResult> Relay(uint16_t port, const ByteSource& upstream, PortSink& sink);

 private:
  Error Ended(const proto::Event& ev) const;
  Error OpenFailed(const Error& e) const;
  Error TimedOut(std::string_view what) const;
  Error Malformed(const std::string& what) const;

  Sandbox& sb_;
  std::function<bool()> stopping_;
  std::chrono::milliseconds timeout_;
};

}  // namespace skiff
