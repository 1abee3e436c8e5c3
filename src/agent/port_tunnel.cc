#include "agent/port_tunnel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/log.h"
#include "protocol/messages.h"

namespace skiff::agent {

namespace {

using proto::Type;

constexpr int kAttempts = 2;  // 127.0.0.1, then ::1
constexpr const char* kAddress[kAttempts] = {"127.0.0.1", "::1"};

Error NothingListens(const PortTunnel& t, int err) {
  return Error(Code::kS222, "nothing listens on port " + std::to_string(t.port) +
                                " in the sandbox (127.0.0.1 and ::1: " + std::string(ErrnoName(err)) + ")");
}

}  // namespace

Result<std::unique_ptr<PortTunnel>> PortTunnels::Open(uint32_t id, const nlohmann::json& req,
                                                      uint64_t* credit) {
  SKIFF_ASSIGN_OR_RETURN(proto::PortConnectRequest r, proto::PortConnectRequest::FromJson(req));
  auto t = std::make_unique<PortTunnel>();
  t->id = id;
  t->credit = credit;
  t->port = r.port;
  SKIFF_RETURN_IF_ERROR(StartConnect(*t));
  return t;
}

Status PortTunnels::StartConnect(PortTunnel& t) {
  int last = ECONNREFUSED;
  for (; t.attempt < kAttempts; ++t.attempt) {
    bool v6 = t.attempt == 1;
    t.sock.reset(::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!t.sock) {
      last = errno;
      continue;  // no IPv6 in this kernel, or no descriptors: the next address, or S222
    }
    int rc;
    if (v6) {
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_port = htons(t.port);
      a.sin6_addr = in6addr_loopback;
      rc = ::connect(t.sock.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a);
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(t.port);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      rc = ::connect(t.sock.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a);
    }
    if (rc == 0) {
      OnConnected(t, 0);
      return OkStatus();
    }
    if (errno == EINPROGRESS || errno == EINTR) return OkStatus();  // Pump sees its end
    last = errno;
    t.sock.reset();
  }
  return NothingListens(t, last);
}

void PortTunnels::OnConnected(PortTunnel& t, int err) {
  if (err == 0) {
    t.connected = true;
    sink_.SendJson(t.id, Type::kMeta, proto::PortConnectMeta{kAddress[t.attempt]}.ToJson());
    return;
  }
  t.sock.reset();
  if (t.attempt + 1 >= kAttempts) return Fail(t, NothingListens(t, err));
  ++t.attempt;
  Status st = StartConnect(t);
  if (!st.ok()) Fail(t, st.error());
}

void PortTunnels::Fail(PortTunnel& t, const Error& e) {
  t.sock.reset();
  t.finished = true;
  sink_.SendJson(t.id, Type::kError, proto::AgentError::FromError(e).ToJson());
}

void PortTunnels::OnData(PortTunnel& t, std::string_view bytes) {
  if (t.finished || t.write_done || t.host_end) {
    sink_.GrantCredit(t.id, proto::kStdin, bytes.size());  // nobody takes it: discarded
    return;
  }
  if (t.to_socket.size() + bytes.size() > 2 * size_t{proto::kInitialWindow}) {
    // The host ignored its credit; drop rather than grow.
    SKIFF_LOG(Warn) << "stream " << t.id << ": port.connect bytes beyond the granted credit dropped";
    return;
  }
  t.to_socket.append(bytes);
}

void PortTunnels::Cancel(PortTunnel& t) {
  if (t.finished) return;
  Fail(t, Error(Code::kS218, "port.connect: cancelled by the host"));
}

bool PortTunnels::Tick(PortTunnel& t) {
  if (t.finished) return true;
  if (!t.connected) return false;
  if (t.host_end && t.to_socket.empty() && !t.write_done) {
    (void)::shutdown(t.sock.get(), SHUT_WR);  // the server sees the request's end
    t.write_done = true;
  }
  if (!t.write_done || !t.read_done) return false;
  t.sock.reset();
  t.finished = true;
  sink_.SendJson(t.id, Type::kResult, proto::PortConnectResult{t.bytes_in, t.bytes_out}.ToJson());
  return true;
}

int PortTunnels::AddPollFds(const PortTunnel& t, std::vector<pollfd>& pfds) const {
  if (t.finished || !t.sock) return -1;
  short events = 0;
  if (!t.connected) {
    events = POLLOUT;
  } else {
    if (!t.read_done && t.credit[proto::kStdout] > 0 && sink_.OutputRoom()) events |= POLLIN;
    if (!t.write_done && !t.to_socket.empty()) events |= POLLOUT;
  }
  if (events == 0) return -1;
  pfds.push_back({t.sock.get(), events, 0});
  return static_cast<int>(pfds.size() - 1);
}

void PortTunnels::Pump(PortTunnel& t, int slot, const std::vector<pollfd>& pfds) {
  if (slot < 0 || t.finished || !t.sock) return;
  const short rev = pfds[static_cast<size_t>(slot)].revents;
  const short asked = pfds[static_cast<size_t>(slot)].events;
  if (rev == 0) return;
  if (!t.connected) {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(t.sock.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    OnConnected(t, err);
    return;
  }
  // The host's bytes: credit goes back as the socket takes them.
  if ((asked & POLLOUT) && (rev & (POLLOUT | POLLERR | POLLHUP))) {
    while (!t.to_socket.empty()) {
      ssize_t n = ::send(t.sock.get(), t.to_socket.data(), t.to_socket.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n < 0) {  // EPIPE, ECONNRESET: the server stopped reading; the rest is discarded
        sink_.GrantCredit(t.id, proto::kStdin, t.to_socket.size());
        t.to_socket.clear();
        t.write_done = true;
        break;
      }
      sink_.GrantCredit(t.id, proto::kStdin, static_cast<uint64_t>(n));
      t.to_socket.erase(0, static_cast<size_t>(n));
      t.bytes_in += n;
    }
  }
  // The server's bytes, under the host's credit.
  if ((asked & POLLIN) && (rev & (POLLIN | POLLHUP | POLLERR))) {
    char buf[proto::kChunk];
    // A few reads per wakeup keep one busy stream from starving the rest.
    for (int rounds = 0; rounds < 4 && !t.read_done; ++rounds) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(sizeof buf, t.credit[proto::kStdout]));
      if (want == 0 || !sink_.OutputRoom()) break;
      ssize_t n = ::recv(t.sock.get(), buf, want, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n <= 0) {  // end of file, or a reset: this direction is done
        t.read_done = true;
        sink_.Send(t.id, Type::kEnd, proto::kStdout, {});
        if (n < 0 && !t.write_done) {  // a reset socket takes nothing more either
          sink_.GrantCredit(t.id, proto::kStdin, t.to_socket.size());
          t.to_socket.clear();
          t.write_done = true;
        }
        break;
      }
      sink_.Send(t.id, Type::kData, proto::kStdout, std::string_view(buf, static_cast<size_t>(n)));
      t.credit[proto::kStdout] -= static_cast<uint64_t>(n);
      t.bytes_out += n;
    }
  }
}

}  // namespace skiff::agent
