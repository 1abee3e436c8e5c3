#include "api/server.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include <boost/asio.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core.hpp>

#include "api/http_session.h"
#include "api/server_impl.h"
#include "api/worker.h"
#include "base/log.h"
#include "base/unique_fd.h"
#include "base/version.h"

namespace skiff::api {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using unix_sock = net::local::stream_protocol;
using json = nlohmann::json;

std::string Version() { return SkiffVersion(); }

namespace {

// The reserve descriptor: one fd held open so that, when accept() fails with
// EMFILE, closing it makes room to accept the pending connection and close it.
UniqueFd OpenReserve() { return UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)); }

// Out of descriptors: accept pending connections one at a time on the room the
// reserve makes, answer each the busy response and close it, so clients are
// told at once instead of waiting in the backlog while the daemon spins.
void ShedPending(Server::Impl& srv, int listen_fd) {
  for (int i = 0; i < kShedPerBackoff; ++i) {
    srv.reserve_fd.reset();
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      (void)!::send(fd, srv.busy_response.data(), srv.busy_response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      ::close(fd);
    }
    srv.reserve_fd = OpenReserve();
    if (fd < 0 || !srv.reserve_fd) return;
  }
}

// Over max_connections: the busy response (if the socket takes it at once),
// then close. Nothing is kept for the connection.
template <class Socket>
void Refuse(Server::Impl& srv, Socket& sock) {
  (void)!::send(sock.native_handle(), srv.busy_response.data(), srv.busy_response.size(),
                MSG_DONTWAIT | MSG_NOSIGNAL);
  beast::error_code ec;
  sock.shutdown(Socket::shutdown_both, ec);
  sock.close(ec);
}

template <class Protocol>
void AcceptLoop(Server::Impl& srv, typename Protocol::acceptor& acc, net::steady_timer& backoff) {
  acc.async_accept([&srv, &acc, &backoff](beast::error_code ec, typename Protocol::socket sock) {
    if (ec == net::error::operation_aborted || srv.stopping) return;
    if (ec) {
      // The listening socket stays readable: accepting again at once would
      // spin. Shed what waits (out of descriptors), then back off.
      SKIFF_LOG_LIMITED(Warn) << "accept: " << ec.message() << "; pausing accepts for "
                              << kAcceptBackoff.count() << " ms";
      if (ec == net::error::no_descriptors || ec.value() == ENFILE) ShedPending(srv, acc.native_handle());
      backoff.expires_after(kAcceptBackoff);
      backoff.async_wait([&srv, &acc, &backoff](beast::error_code wec) {
        if (!wec && !srv.stopping) AcceptLoop<Protocol>(srv, acc, backoff);
      });
      return;
    }
    if (srv.metrics.connections.load() >= srv.config.max_connections) {
      SKIFF_LOG_LIMITED(Warn) << "max_connections (" << srv.config.max_connections
                              << ") reached: refusing a connection with 503";
      ++srv.metrics.connections_refused;
      Refuse(srv, sock);
    } else {
      srv.metrics.connections.fetch_add(1);
      ConnectionSlot slot(&srv.metrics.connections);
      if constexpr (std::is_same_v<Protocol, net::ip::tcp>) {
        // Answers, stream pieces and terminal echoes are small writes: sent
        // at once, not held back until the peer's (delayed, ~40 ms) ACK.
        beast::error_code ignored;
        sock.set_option(net::ip::tcp::no_delay(true), ignored);
      }
      std::make_shared<HttpSession<Protocol>>(srv, std::move(sock), std::move(slot))->Start();
    }
    AcceptLoop<Protocol>(srv, acc, backoff);
  });
}

// The raw HTTP answer of a connection over the cap: 503 with an S400 body.
std::string BusyResponse(Server::Impl& srv) {
  std::string body = Dump(srv.ErrorBody(
      Error(Code::kS400, "resource limit exceeded: skiffd cannot take another connection (max_connections " +
                             std::to_string(srv.config.max_connections) +
                             " reached, or out of descriptors); close idle connections or retry later")));
  return "HTTP/1.1 503 Service Unavailable\r\nServer: skiffd/" + Version() +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

// Raise the soft descriptor limit to the hard one: every connection, sandbox
// and agent channel costs descriptors, and max_connections should fit.
void RaiseNofile(const Config& config) {
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) != 0) return;
  if (nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &nofile);
    (void)::getrlimit(RLIMIT_NOFILE, &nofile);
  }
  if (nofile.rlim_cur != RLIM_INFINITY && config.max_connections > nofile.rlim_cur / 2) {
    SKIFF_LOG(Warn) << "max_connections (" << config.max_connections << ") is over half of RLIMIT_NOFILE ("
                    << nofile.rlim_cur
                    << "): descriptors may run out before the cap; accepts then back off and shed";
  }
}

}  // namespace

// ============================================================ Server

Result<std::unique_ptr<Server>> Server::Create(SandboxService& manager, Config config) {
  std::optional<EngineLinkOptions> engine_link;
  if (config.engine_url) {
    auto o = LoadEngineLinkOptions(*config.engine_url, config.engine_ca_file, config.engine_token_file);
    if (!o.ok()) return std::move(o).error().With("worker mode");
    engine_link = std::move(*o);
  }
  try {
    auto server = std::unique_ptr<Server>(new Server(manager, std::move(config)));
    server->impl_->engine_link = std::move(engine_link);
    return server;
  } catch (const std::system_error& e) {  // the pool's threads could not all be started
    int err = e.code().value() != 0 ? e.code().value() : EAGAIN;
    return Error::Sys(Code::kS300, "pthread_create", "api pool", err).With("starting the server");
  }
}

Server::Server(SandboxService& manager, Config config)
    : impl_(std::make_unique<Impl>(manager, std::move(config))) {
  manager.SetCreateObserver([m = &impl_->metrics](const std::string&, bool pooled, double secs) {
    m->CreateSeconds(pooled, secs);
  });
  // The backend's own verdict: a /dev/kvm that opens may still not boot guests.
  if (std::string accel = manager.microvm_accel(); !accel.empty()) impl_->accel = accel;
}

Server::~Server() {
  Stop();
  impl_->pool.join();
  impl_->manager.SetCreateObserver(nullptr);
}

Status Server::Listen() {
  auto& s = *impl_;
  RaiseNofile(s.config);
  s.busy_response = BusyResponse(s);
  s.reserve_fd = OpenReserve();
  beast::error_code ec;
  std::string addr = s.config.listen_address == "localhost" ? "127.0.0.1" : s.config.listen_address;
  auto ip = net::ip::make_address(addr, ec);
  if (ec) return Error(Code::kS300, "listen: bad address " + addr);
  tcp::endpoint ep(ip, s.config.listen_port);
  s.tcp_acceptor.emplace(s.ioc);
  s.tcp_acceptor->open(ep.protocol(), ec);
  if (!ec) s.tcp_acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.tcp_acceptor->bind(ep, ec);
  if (!ec) s.tcp_acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Error(Code::kS300, "platform failure: sandbox: listen on " + addr + ":" +
                                  std::to_string(s.config.listen_port) + ": " + ec.message());
  }
  if (s.config.unix_socket) {
    const std::string& path = *s.config.unix_socket;
    // Replace a stale socket file; refuse to clobber anything else.
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) {
        return Error(Code::kS300, "platform failure: sandbox: " + path + " exists and is not a socket");
      }
      unix_sock::socket probe(s.ioc);
      probe.connect(unix_sock::endpoint(path), ec);
      if (!ec) return Error(Code::kS300, "platform failure: sandbox: a daemon already serves " + path);
      ::unlink(path.c_str());
    }
    s.unix_acceptor.emplace(s.ioc);
    mode_t old = ::umask(0177);
    s.unix_acceptor->open(unix_sock(), ec);
    if (!ec) s.unix_acceptor->bind(unix_sock::endpoint(path), ec);
    ::umask(old);
    if (!ec) s.unix_acceptor->listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return Error(Code::kS300, "platform failure: sandbox: listen on " + path + ": " + ec.message());
    }
  }
  return OkStatus();
}

uint16_t Server::port() const {
  return impl_->tcp_acceptor ? impl_->tcp_acceptor->local_endpoint().port() : 0;
}

void Server::Run() {
  auto& s = *impl_;
  if (s.tcp_acceptor) AcceptLoop<tcp>(s, *s.tcp_acceptor, s.tcp_backoff);
  if (s.unix_acceptor) AcceptLoop<unix_sock>(s, *s.unix_acceptor, s.unix_backoff);
  s.ScheduleSweep();
  if (s.engine_link) {
    WorkerHooks hooks;
    hooks.iii_namespace = s.config.iii_namespace.value_or("");
    hooks.call = [&s](const std::string& id, const json& payload) {
      // Channel references live on the engine in worker mode.
      return s.Call(id, payload, s.engine_channels.get(), s.EngineService());
    };
    hooks.error_body = [&s](const Error& e) { return s.ErrorBody(e); };
    hooks.dispatch = [&s](const std::string& id, const json& payload, std::function<void()> f,
                          std::function<void()> answer) {
      return s.Dispatch(id, payload, s.EngineService(), std::move(f), std::move(answer));
    };
    hooks.rejected = [&s]() {
      if (s.on_rejected) s.on_rejected();
    };
    s.worker = std::make_unique<WorkerLink>(s.ioc, *s.engine_link, std::move(hooks));
    s.engine_channels = std::make_unique<EngineChannels>(
        *s.engine_link,
        [&s](const json& data, std::chrono::milliseconds deadline) {
          return s.worker->CallAndWait("engine::channels::create", "", data, deadline);
        },
        [&s](std::function<void()> f) { s.Blocking(std::move(f)); });
    s.worker->Start();
  }
  // A handler that throws unwinds out of run(); the loop carries on with
  // the other connections instead of ending (it is the only event loop).
  for (;;) {
    try {
      s.ioc.run();
      return;
    } catch (const std::exception& e) {
      SKIFF_LOG(Error) << "event loop: a handler threw: " << e.what() << "; continuing";
    } catch (...) {
      SKIFF_LOG(Error) << "event loop: a handler threw an exception of unknown type; continuing";
    }
  }
}

void Server::StopAccepting() {
  auto& s = *impl_;
  // The socket's name goes now, not in the posted handler: Stop() may stop
  // the io_context before that handler runs (SIGTERM left the file behind).
  if (!s.stopping.exchange(true) && s.unix_acceptor && s.config.unix_socket)
    ::unlink(s.config.unix_socket->c_str());
  net::post(s.ioc, [&s]() {
    beast::error_code ec;
    if (s.tcp_acceptor) s.tcp_acceptor->close(ec);
    if (s.unix_acceptor) s.unix_acceptor->close(ec);
    s.sweep_timer.cancel();
    s.tcp_backoff.cancel();
    s.unix_backoff.cancel();
  });
}

void Server::OnRegistrationRejected(std::function<void()> f) { impl_->on_rejected = std::move(f); }

void Server::Stop() {
  StopAccepting();
  if (impl_->worker) impl_->worker->Stop();
  impl_->ioc.stop();
}

}  // namespace skiff::api
