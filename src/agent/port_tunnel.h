// The port.connect op of the agent protocol (protocol/messages.h): one TCP
// connection from the agent to a port of the sandbox's own loopback,
// relayed over a stream. The host's DATA on stdin is written to the socket
// (credit returned as the socket takes it), the socket's bytes go to the
// host as DATA on stdout under the host's credit, END on stdin half-closes
// the socket, its end of file is END on stdout, and the RESULT comes once
// both directions ended. Connecting is non-blocking: 127.0.0.1 first, then
// ::1; when both are refused the request is ERROR S222. Only loopback is
// dialled, so a forwarded connection reaches nothing the sandbox's own
// processes could not, and needs no network of the sandbox. Frames go out
// through the loop's ExecSink.
#pragma once

#include <poll.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "agent/exec_engine.h"
#include "base/error.h"
#include "base/unique_fd.h"
#include "protocol/frame.h"

namespace skiff::agent {

// One port.connect in progress. `credit` is the stream's window per
// channel, kept by the loop and spent here.
struct PortTunnel {
  uint32_t id = 0;
  uint64_t* credit = nullptr;  // [proto::kChannels]
  uint16_t port = 0;
  UniqueFd sock;
  int attempt = 0;          // 0: 127.0.0.1, 1: ::1
  bool connected = false;   // META sent
  bool finished = false;    // its final frame was sent
  std::string to_socket;    // the host's bytes the socket has not taken yet
  bool host_end = false;    // END on stdin seen
  bool write_done = false;  // shut down for writing (or the peer stopped reading)
  bool read_done = false;   // END on stdout sent
  int64_t bytes_in = 0;     // written to the socket
  int64_t bytes_out = 0;    // read from the socket
};

class PortTunnels {
 public:
  explicit PortTunnels(ExecSink& sink) : sink_(sink) {}

  // Validates the request and starts connecting on stream `id`. Errors are
  // the request's (S001 for a bad port, S222 when nothing listens on
  // either address at once): the loop answers them with ERROR.
  Result<std::unique_ptr<PortTunnel>> Open(uint32_t id, const nlohmann::json& req, uint64_t* credit);

  // DATA and END on stdin. Bytes beyond the granted window are dropped;
  // bytes after the socket stopped taking any are discarded (credit
  // returned).
  void OnData(PortTunnel& t, std::string_view bytes);
  void OnEnd(PortTunnel& t) { t.host_end = true; }
  // CANCEL: the socket is closed and the stream ends with ERROR S218.
  void Cancel(PortTunnel& t);

  // Once per loop round: half-closes once the host's bytes are delivered,
  // sends the RESULT once both directions ended. Returns whether the
  // stream is finished (the loop then drops it).
  bool Tick(PortTunnel& t);

  // Registers what the tunnel waits on this round: the connect, the
  // socket's input (under credit and channel room), its output (with bytes
  // to write). Returns the pollfd index, or -1.
  int AddPollFds(const PortTunnel& t, std::vector<pollfd>& pfds) const;
  // Moves bytes when the socket is ready.
  void Pump(PortTunnel& t, int slot, const std::vector<pollfd>& pfds);

 private:
  // Starts a connect to the address of `t.attempt`; false when refused at
  // once and no address is left (ERROR sent, tunnel finished).
  Status StartConnect(PortTunnel& t);
  // The pending connect ended with `err` (0: connected).
  void OnConnected(PortTunnel& t, int err);
  void Fail(PortTunnel& t, const Error& e);

  ExecSink& sink_;
};

}  // namespace skiff::agent
