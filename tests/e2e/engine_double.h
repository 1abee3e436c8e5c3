// A test double of the iii engine: what a skiff fleet relies on, each rule
// copied from the engine's source and named after it (engine/src/… in the
// iii repository at v0.23.0-rc.4; "0.22" means the iii/v0.22.1-rc.2 tag).
// It is not the iii engine. It serves workers on "/", over ws:// or, given a
// certificate and key (tls_cert_file / tls_key_file), wss:// — the engine
// itself serves plain WebSocket and is put behind a TLS proxy for wss; the
// double terminates TLS itself so a worker's wss client can be tested:
//  - greets each connection with `workerregistered` (mod.rs handle_worker);
//  - keeps a namespaced function registry with owner leases (registry.h):
//    a connection's namespace comes from its engine::workers::register call,
//    registrations sent before it are held until then or, after the grace,
//    filed under `default`; FUNCTION_NAMESPACE_CONFLICT refuses one function,
//    WORKER_NAMESPACE_CONFLICT refuses the worker and closes it; a worker's
//    functions and leases go when it disconnects;
//  - routes `invokefunction` from any connection to the worker owning the id
//    in the named namespace and relays its `invocationresult` back, and
//    answers function_not_found / invocation_stopped like the engine;
//  - serves engine::workers::register / list, state::set / get / delete and
//    the engine::workers-available trigger itself (builtins.h);
//  - serves data channels (engine_double/channels.h): the builtin
//    engine::channels::create (workers/engine_fn/mod.rs create_channel;
//    allowed on an RBAC listener whatever its rules, rbac_config.rs
//    INFRASTRUCTURE_FUNCTIONS) and, on every listener and without the auth
//    function (workers/worker/mod.rs route "/ws/channels/{channel_id}";
//    workers/worker/README.md "Channels"), the channel WebSocket endpoint
//    `/ws/channels/{id}?key=…&dir=read|write` (workers/worker/ws_handler.rs):
//    an unknown id or a wrong key is a 404 before any upgrade, a side already
//    taken is upgraded and closed at once, a writer's frames reach the reader
//    in order through a queue of buffer_size frames that stops reading the
//    writer while full, and channels with a side never taken are swept after
//    the TTL (workers/worker/channels.rs CHANNEL_TTL; channel_ttl);
//  - with `legacy_0_22`, behaves as the engine up to 0.22: no namespaces, the
//    last registrant of an id silently replaces the first;
//  - with `rbac_port`, opens a second listener with an `rbac` block, as the
//    engine does for a further iii-worker-manager entry (workers/worker/
//    README.md "Multiple Listeners": an internal listener for trusted workers,
//    an RBAC one for untrusted clients). Each connection there is first
//    authenticated by calling `auth_function_id` — a function some worker
//    registered in `default`, called with {headers, query_params, ip_address}
//    of the WebSocket upgrade — and refused with an `error` frame
//    (AUTH_ERROR) and a Close when that fails; the session the function
//    returns (allowed / forbidden functions, per-namespace grants, may it
//    register, a registration prefix) and the `expose_functions` rules then
//    gate its calls, registrations and triggers as the engine does
//    (engine_double/rbac.h). The main listener has no `rbac` block: it is
//    where the auth function's own worker connects, since a listener cannot
//    ask a function nobody could have registered yet.
// Tests also see every frame a worker sent (received / WaitFor), can push
// engine → worker frames, reject one function id, or drop the first
// connection attempts to simulate an engine that is restarting.
//
// Differences from the engine a fleet should know: worker ids and reattach
// tokens are "worker-N" / "token-N" (the engine uses UUIDs; nothing may parse
// them), middleware, the RBAC registration hooks, HTTP-invocation functions,
// queues (action enqueue), services and every other trigger type are not
// served. Like /otel ones, channel sockets take a connection index but are
// never workers.
#pragma once

#include <fcntl.h>

// Boost.Asio's headers use std::exchange without including <utility>.
#include <utility>

#include <algorithm>
#include <boost/asio.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/text.h"
#include "engine_double/builtins.h"
#include "engine_double/channels.h"
#include "engine_double/connection.h"
#include "engine_double/rbac.h"
#include "engine_double/registry.h"

namespace skiff::e2e {

struct EngineDoubleOptions {
  uint16_t port = 0;               // 0 = any free loopback port
  int drop_first = 0;              // close this many TCP connections at once
  std::string reject_function_id;  // answer its registerfunction with registrationrejected
  bool legacy_0_22 = false;        // no namespaces; last registrant of an id wins
  // mod.rs REGISTRATION_NAMESPACE_GRACE (5 s): how long registrations wait for
  // engine::workers::register before they are filed under `default`.
  std::chrono::milliseconds namespace_grace{5000};
  std::string address = "127.0.0.1";  // where to listen
  // PEM files: with both, the listeners serve wss:// (TLS 1.2 or newer).
  std::string tls_cert_file, tls_key_file;
  // The RBAC listener (workers/worker/mod.rs WorkerManagerConfig {port,
  // rbac}): none unless set; 0 = any free port. Its rbac block:
  std::optional<uint16_t> rbac_port;
  std::string auth_function_id;  // rbac.auth_function_id; empty: every connection let in
  // rbac.expose_functions, each rule as the engine's config spells it: the
  // string `match("sandbox::*")`, or {"match": "…", "namespace": "…"}, or
  // {"metadata": {"public": true}, "namespace": "…"} (rbac_config.rs).
  std::vector<nlohmann::json> expose_functions;
  // Data channels (workers/worker/channels.rs): a channel with a side nobody
  // took is removed once older than channel_ttl (CHANNEL_TTL, 5 min) by a
  // sweep every channel_sweep_interval (start_sweep_task, 60 s). Tests may
  // shorten both.
  std::chrono::milliseconds channel_ttl{5 * 60 * 1000};
  std::chrono::milliseconds channel_sweep_interval{60 * 1000};
};

class EngineDouble {
 public:
  using json = nlohmann::json;
  using Clock = std::chrono::steady_clock;

  struct Received {
    int conn = 0;  // index of the WebSocket connection it came on (0, 1, …)
    json msg;
  };

  using Options = EngineDoubleOptions;

  EngineDouble() : EngineDouble(Options()) {}
  // Throws when it cannot listen or load the TLS files, and
  // std::invalid_argument for options that do not go together or an
  // expose_functions rule the engine would not parse.
  explicit EngineDouble(Options o) : opt_(std::move(o)), registry_(opt_.legacy_0_22) {
    namespace net = boost::asio;
    if (opt_.tls_cert_file.empty() != opt_.tls_key_file.empty()) {
      throw std::invalid_argument("TLS needs both a certificate and a key file");
    }
    if (!opt_.rbac_port && (!opt_.auth_function_id.empty() || !opt_.expose_functions.empty())) {
      throw std::invalid_argument("an auth function or expose_functions need the RBAC listener (rbac_port)");
    }
    if (opt_.channel_sweep_interval <= std::chrono::milliseconds(0)) {
      throw std::invalid_argument("channel_sweep_interval must be positive");
    }
    std::shared_ptr<engine_double::RbacConfig> rbac;
    if (opt_.rbac_port) {
      rbac = std::make_shared<engine_double::RbacConfig>();
      rbac->auth_function_id = opt_.auth_function_id;
      for (const auto& rule : opt_.expose_functions) {
        try {
          rbac->expose_functions.push_back(engine_double::FunctionFilter::Parse(rule));
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument(std::string("expose_functions: ") + e.what());
        }
      }
    }
    if (!opt_.tls_cert_file.empty()) {
      tls_.emplace(net::ssl::context::tls_server);
      tls_->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                        net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                        net::ssl::context::no_tlsv1_1);
      tls_->use_certificate_chain_file(opt_.tls_cert_file);
      tls_->use_private_key_file(opt_.tls_key_file, net::ssl::context::pem);
    }
    channels_ = std::make_shared<engine_double::ChannelStore>(ioc_.get_executor(), opt_.channel_ttl,
                                                              opt_.channel_sweep_interval);
    channels_->Start();
    Listen(main_, opt_.port, nullptr);
    if (opt_.rbac_port) Listen(rbac_listener_.emplace(ioc_), *opt_.rbac_port, std::move(rbac));
    thread_ = std::thread([this] { ioc_.run(); });
  }

  // The engine "goes away": listener and every connection closed abruptly.
  ~EngineDouble() {
    boost::asio::post(ioc_, [this] {
      boost::beast::error_code ec;
      main_.acceptor.close(ec);
      if (rbac_listener_) rbac_listener_->acceptor.close(ec);
      for (auto& c : conns_) c->Abort();
      channels_->Stop();
      ioc_.stop();
    });
    thread_.join();
  }

  uint16_t port() const { return main_.port; }
  bool tls() const { return tls_.has_value(); }
  // ws://127.0.0.1:PORT, or wss:// when serving TLS.
  std::string url() const { return Url(main_.port); }
  // The RBAC listener's port and URL (0 / "" without one).
  uint16_t rbac_port() const { return rbac_listener_ ? rbac_listener_->port : 0; }
  std::string rbac_url() const { return rbac_listener_ ? Url(rbac_listener_->port) : ""; }

  // TCP connections accepted (including dropped ones), with their times.
  std::vector<Clock::time_point> accept_times() {
    std::lock_guard<std::mutex> l(mu_);
    return accept_times_;
  }
  int websocket_connections() {
    std::lock_guard<std::mutex> l(mu_);
    return ws_conns_;
  }
  std::vector<Received> received() {
    std::lock_guard<std::mutex> l(mu_);
    return got_;
  }

  // Waits for a received frame (at index >= from) matching `pred`.
  std::optional<Received> WaitFor(const std::function<bool(const Received&)>& pred,
                                  std::chrono::milliseconds timeout, size_t from = 0) {
    std::unique_lock<std::mutex> l(mu_);
    auto end = Clock::now() + timeout;
    size_t i = from;
    while (true) {
      for (; i < got_.size(); ++i) {
        if (pred(got_[i])) return got_[i];
      }
      if (cv_.wait_until(l, end) == std::cv_status::timeout) {
        for (; i < got_.size(); ++i) {
          if (pred(got_[i])) return got_[i];
        }
        return std::nullopt;
      }
    }
  }
  // The invocationresult for `invocation_id`.
  std::optional<json> WaitResult(const std::string& invocation_id,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
    auto r = WaitFor(
        [&](const Received& r) {
          return r.msg.value("type", "") == "invocationresult" &&
                 r.msg.value("invocation_id", json()) == json(invocation_id);
        },
        timeout);
    if (!r) return std::nullopt;
    return r->msg;
  }

  // Sends a text frame on the newest connection (engine → worker).
  void Send(const json& m) { SendTo(-1, m); }
  // Sends a text frame on connection `conn` (its index; -1 = the newest
  // worker connection, /otel and channel ones aside).
  void SendTo(int conn, const json& m) {
    boost::asio::post(ioc_, [this, conn, m] {
      if (auto c = ByIndex(conn)) c->Send(m);
    });
  }
  // engine → worker invokefunction, in the shape the iii engine forwards
  // a caller's trigger (the caller's id rides in data._caller_worker_id).
  void Invoke(const json& invocation_id, const std::string& function_id, json data) {
    InvokeOn(-1, invocation_id, function_id, std::move(data));
  }
  void InvokeOn(int conn, const json& invocation_id, const std::string& function_id, json data) {
    data["_caller_worker_id"] = "caller-worker";
    SendTo(conn, {{"type", "invokefunction"},
                  {"invocation_id", invocation_id},
                  {"function_id", function_id},
                  {"data", std::move(data)},
                  {"metadata", nullptr},
                  {"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
                  {"baggage", ""}});
  }

  // The worker id the double gave connection `conn` ("worker-N").
  static std::string WorkerId(int conn) { return "worker-" + std::to_string(conn); }

  // Every registered function: (namespace, id) → owning worker id.
  std::map<std::pair<std::string, std::string>, std::string> FunctionOwners() {
    return OnLoop([this] { return registry_.Owners(); });
  }
  // The namespace connection `conn` resolved to, or nullopt while its
  // registrations are still held (or it is unknown).
  std::optional<std::string> ConnectionNamespace(int conn) {
    return OnLoop([this, conn]() -> std::optional<std::string> {
      auto c = ByIndex(conn);
      if (!c || !c->resolved) return std::nullopt;
      return c->ns;
    });
  }
  // engine::channels::create, as a caller on the engine gets it: the result
  // ({writer, reader}) or {"error": {code, message}}.
  json CreateChannel(json data = json::object()) {
    return OnLoop([this, data] {
      engine_double::BuiltinAnswer a = channels_->Create(data);
      return a.result ? *a.result : json{{"error", a.error.value_or(json())}};
    });
  }
  // How many data channels the double holds (created, not swept).
  size_t ChannelCount() {
    return OnLoop([this] { return channels_->size(); });
  }
  // Whether connection `conn` is still connected (its cleanup has not run).
  bool Connected(int conn) {
    return OnLoop([this, conn] {
      auto c = ByIndex(conn);
      return c && !c->cleaned;
    });
  }

 private:
  using Conn = engine_double::Connection;
  using ConnPtr = Conn::Ptr;
  using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;
  using Session = engine_double::Session;

  // One worker listener (workers/worker/mod.rs WorkerManager): its port and
  // its `rbac` block (null: none).
  struct Listener {
    explicit Listener(boost::asio::io_context& ioc) : acceptor(ioc) {}
    boost::asio::ip::tcp::acceptor acceptor;
    uint16_t port = 0;
    std::shared_ptr<const engine_double::RbacConfig> rbac;
  };
  // What a call the engine makes itself gets back: the result, or the error.
  using EngineCallDone =
      std::function<void(const std::optional<json>& result, const std::optional<json>& error)>;

  // A call routed to a worker and not answered yet (invocation/mod.rs
  // InvocationHandler, keyed by the forwarded invocation id).
  struct Pending {
    std::weak_ptr<Conn> caller;
    json caller_invocation_id;  // null: a void call, nobody gets a result
    std::string function_id;
    std::weak_ptr<Conn> target;
    EngineCallDone done;  // a call the engine made itself (no caller), e.g. the auth function
  };
  // A registertrigger of engine::workers-available (engine_fn/mod.rs).
  struct Trigger {
    std::string id, function_id, ns, owner;
  };

  template <class F>
  auto OnLoop(F f) -> decltype(f()) {
    std::promise<decltype(f())> p;
    auto fut = p.get_future();
    boost::asio::post(ioc_, [&] { p.set_value(f()); });
    return fut.get();
  }

  ConnPtr ByIndex(int conn) {
    if (conn < 0) {  // the newest worker connection
      for (auto it = conns_.rbegin(); it != conns_.rend(); ++it) {
        if (!(*it)->otel && !(*it)->channel) return *it;
      }
      return nullptr;
    }
    for (auto& c : conns_) {
      if (c->index == conn) return c;
    }
    return nullptr;
  }
  bool IsLive(const std::string& worker_id) const {
    auto it = live_.find(worker_id);
    return it != live_.end() && !it->second->cleaned;
  }
  engine_double::Registry::IsLive Live() {
    return [this](const std::string& w) { return IsLive(w); };
  }
  // protocol.rs: invocation ids are `Uuid`; a frame whose id is not one does
  // not decode, and the engine only logs "json decode error" (handle_worker).
  // A decoded id goes back out in the Uuid's own form: lowercase, hyphenated.
  // Returns null when `id` is not a UUID (simple or hyphenated form).
  static json CanonicalUuid(const json& id) {
    if (!id.is_string()) return json();
    std::string hex;
    const std::string& s = id.get_ref<const std::string&>();
    for (size_t i = 0; i < s.size(); ++i) {
      bool dash = s.size() == 36 && (i == 8 || i == 13 || i == 18 || i == 23);
      if (dash) {
        if (s[i] != '-') return json();
        continue;
      }
      if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return json();
      hex += static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
    }
    if (hex.size() != 32 || (s.size() != 32 && s.size() != 36)) return json();
    return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" + hex.substr(16, 4) +
           "-" + hex.substr(20);
  }
  static uint64_t NowMs() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
  }

  void Record(int conn, json m) {
    {
      std::lock_guard<std::mutex> l(mu_);
      got_.push_back({conn, std::move(m)});
    }
    cv_.notify_all();
  }

  std::string Url(uint16_t port) const {
    return (tls_ ? "wss://" : "ws://") + std::string("127.0.0.1:") + std::to_string(port);
  }

  void Listen(Listener& l, uint16_t port, std::shared_ptr<const engine_double::RbacConfig> rbac) {
    namespace net = boost::asio;
    net::ip::tcp::endpoint ep(net::ip::make_address(opt_.address), port);
    l.acceptor.open(ep.protocol());
    // The daemon under test is forked later: it must not inherit the listener.
    ::fcntl(l.acceptor.native_handle(), F_SETFD, FD_CLOEXEC);
    l.acceptor.set_option(net::socket_base::reuse_address(true));
    l.acceptor.bind(ep);
    l.acceptor.listen();
    l.port = l.acceptor.local_endpoint().port();
    l.rbac = std::move(rbac);
    Accept(l);
  }

  void Accept(Listener& l) {
    l.acceptor.async_accept([this, &l](boost::beast::error_code ec, boost::asio::ip::tcp::socket s) {
      if (ec) return;
      // No Nagle delay on the double's side: otherwise a small frame may wait
      // for the peer's delayed ACK (~40 ms), which bench/run's fleet rows
      // would charge to skiff. (Not a rule copied from the engine.)
      boost::beast::error_code ignored;
      s.set_option(boost::asio::ip::tcp::no_delay(true), ignored);
      bool drop;
      int index;
      {
        std::lock_guard<std::mutex> l(mu_);
        accept_times_.push_back(Clock::now());
        drop = dropped_ < opt_.drop_first;
        if (drop) ++dropped_;
        index = drop ? -1 : ws_conns_++;
      }
      if (drop) {
        boost::beast::error_code ignored;
        s.close(ignored);
      } else {
        Conn::Handlers h;
        h.on_open = [this](const ConnPtr& c) { OnOpen(c); };
        h.on_frame = [this](const ConnPtr& c, const std::string& s) { OnFrame(c, s); };
        h.on_close = [this](const ConnPtr& c) { Cleanup(c); };
        ConnPtr c;
        if (tls_) {
          c = std::make_shared<engine_double::WsConnection<TlsStream>>(std::move(s), index, std::move(h),
                                                                       *tls_);
        } else {
          c = std::make_shared<engine_double::WsConnection<boost::beast::tcp_stream>>(std::move(s), index,
                                                                                      std::move(h));
        }
        c->rbac = l.rbac;
        c->channels = channels_;  // the channel endpoint is on every listener
        conns_.push_back(c);
        c->Start();
      }
      Accept(l);
    });
  }

  // mod.rs handle_worker / handle_otel: rbac_session.rs handle_session
  // first. Without an auth function (or an rbac block) it grants the
  // unscoped session at once (authenticate's early return).
  void OnOpen(const ConnPtr& c) {
    if (c->rbac && !c->rbac->auth_function_id.empty()) return Authenticate(c);
    auto s = std::make_shared<Session>();
    s->rbac = c->rbac;
    Admit(c, std::move(s));
  }

  // rbac_session.rs authenticate: engine.call(auth_function_id, {headers,
  // query_params, ip_address}) — resolved in `default` (call_with_metadata)
  // — and its result read as an AuthResult; any failure is an AUTH_ERROR.
  void Authenticate(const ConnPtr& c) {
    std::weak_ptr<Conn> w = c;
    EngineCallDone done = [this, w](const std::optional<json>& result, const std::optional<json>& error) {
      auto c = w.lock();
      if (!c) return;
      if (error) return Refuse(c, error->is_object() ? error->value("message", "") : "");
      if (!result || result->is_null()) return Refuse(c, "auth function returned no result");
      auto outcome = engine_double::ParseAuthResult(*result, c->rbac);
      if (!outcome.session) return Refuse(c, outcome.error);
      Admit(c, std::make_shared<const Session>(std::move(*outcome.session)));
    };
    const std::string& fn = c->rbac->auth_function_id;
    if (!CallFromEngine(engine_double::kDefaultNamespace, fn,
                        engine_double::AuthInput(c->request(), c->ip_address), done)) {
      // call_with_metadata_ns's miss.
      done(std::nullopt,
           engine_double::ErrorBody("function_not_found", "Function " + fn + " not found in namespace " +
                                                              engine_double::kDefaultNamespace));
    }
  }

  // mod.rs handle_worker: a failed handle_session is answered with
  // {"type": "error", "error": {code, message}}, then Close(None); the
  // connection never becomes a worker.
  void Refuse(const ConnPtr& c, const std::string& message) {
    c->Send(json{{"type", "error"}, {"error", {{"code", "AUTH_ERROR"}, {"message", message}}}});
    c->CloseAfterFlush(false);
  }

  // mod.rs handle_worker after the session: register the connection, start
  // namespace resolution (begin_namespace_resolution arms the grace timer),
  // send WorkerRegistered, fire engine::workers-available {worker_connected},
  // then read its frames.
  void Admit(const ConnPtr& c, std::shared_ptr<const Session> session) {
    c->session = std::move(session);
    if (c->otel) return c->StartReading();  // telemetry: read (and ignored), never a worker
    c->worker_id = WorkerId(c->index);
    c->reattach_token = "token-" + std::to_string(c->index);
    c->connected_at_ms = NowMs();
    live_[c->worker_id] = c;
    if (opt_.legacy_0_22) {
      c->resolved = true;  // 0.22 had no namespaces: registrations apply at once
    } else {
      c->grace.expires_after(opt_.namespace_grace);
      std::weak_ptr<Conn> w = c;
      c->grace.async_wait([this, w](boost::beast::error_code ec) {
        auto c = w.lock();
        if (ec || !c || c->cleaned || c->resolved) return;
        ResolveNamespace(c, engine_double::kDefaultNamespace);
      });
    }
    c->Send(json{
        {"type", "workerregistered"}, {"worker_id", c->worker_id}, {"reattach_token", c->reattach_token}});
    FireWorkersAvailable("worker_connected", c->worker_id);
    c->StartReading();
  }

  void OnFrame(const ConnPtr& c, const std::string& s) {
    json m = json::parse(s, nullptr, false);
    Record(c->index, m);
    if (!m.is_object() || !m.contains("type") || !m["type"].is_string() || c->cleaned) return;
    // mod.rs is_namespaced_registration / buffer_until_namespace_known: until
    // the namespace is known these wait, in arrival order.
    static const std::set<std::string> kHeld = {"registerfunction",   "registerservice",
                                                "unregisterfunction", "registertrigger",
                                                "unregistertrigger",  "registertriggertype"};
    if (!c->resolved && kHeld.count(m["type"].get<std::string>())) {
      c->held.push_back(std::move(m));
      return;
    }
    Dispatch(c, m);
  }

  // mod.rs resolve_connection_namespace: pin the namespace, then apply what
  // was held, in arrival order.
  void ResolveNamespace(const ConnPtr& c, const std::string& ns) {
    if (c->resolved) return;
    c->ns = ns;
    c->resolved = true;
    c->grace.cancel();  // cancel_namespace_grace_timer
    while (!c->held.empty() && !c->cleaned) {
      json m = std::move(c->held.front());
      c->held.pop_front();
      Dispatch(c, m);
    }
  }

  // mod.rs dispatch_msg.
  void Dispatch(const ConnPtr& c, const json& m) {
    const std::string type = m["type"];
    if (type == "registerfunction") return RegisterFunction(c, m);
    if (type == "unregisterfunction") {
      // UnregisterFunction: the id resolved as registration resolved it (the
      // session's prefix), released only while it still owns it.
      if (!m.contains("id") || !m["id"].is_string()) return;
      const std::string id = Prefixed(c, m["id"]);
      c->functions.erase(id);
      registry_.ReleaseFunction(c->ns, id, c->worker_id);
      return;
    }
    if (type == "invokefunction") return InvokeFunction(c, m);
    if (type == "invocationresult") return InvocationResult(c, m);
    if (type == "registertrigger") return RegisterTrigger(c, m);
    if (type == "unregistertrigger") {
      std::erase_if(triggers_, [&](const Trigger& t) { return t.id == m.value("id", json()); });
      return;
    }
    if (type == "reattach") return Reattach(c, m);
    if (type == "ping") return c->Send(json{{"type", "pong"}});
  }

  void RegisterFunction(const ConnPtr& c, const json& m) {
    if (!m.contains("id") || !m["id"].is_string()) return;  // does not decode
    // mod.rs RegisterFunction: a session that may not register functions is
    // ignored (only logged: "function registration not allowed for this
    // session"); the id takes the session's prefix (resolve_registration_id).
    if (!c->session->allow_function_registration) return;
    const std::string id = Prefixed(c, m["id"]);
    if (!opt_.reject_function_id.empty() && id == opt_.reject_function_id) {
      c->Send(json{{"type", "registrationrejected"},
                   {"code", engine_double::kFunctionConflict},
                   {"namespace", c->ns},
                   {"function_id", id},
                   {"owner_worker_id", "another-iii-sandbox"}});
      return;
    }
    // mod.rs RegisterFunction: `engine::*` is reserved outside `default`,
    // refused with the conflict shape and an empty owner.
    if (!registry_.legacy() && id.rfind("engine::", 0) == 0 && c->ns != engine_double::kDefaultNamespace) {
      c->Send(Rejected(engine_double::kFunctionConflict, c->ns, id, ""));
      return;
    }
    engine_double::RegisteredFunction f;
    f.description = m.value("description", json());
    f.request_format = m.value("request_format", json());
    f.response_format = m.value("response_format", json());
    f.metadata = m.value("metadata", json());
    // claim_function; on conflict only this registration is refused, the
    // connection stays (RegistrationRejected with function_id, no worker_name).
    if (auto owner = registry_.ClaimFunction(c->ns, id, c->worker_id, std::move(f), Live())) {
      c->Send(Rejected(engine_double::kFunctionConflict, c->ns, id, *owner));
      return;
    }
    c->functions.insert(id);
  }

  // protocol.rs RegistrationRejected: worker_name / function_id are left out
  // when absent (skip_serializing_if).
  static json Rejected(const std::string& code, const std::string& ns, const std::string& function_id,
                       const std::string& owner, const std::string& worker_name = "") {
    json r{{"type", "registrationrejected"}, {"code", code}, {"namespace", ns}};
    if (!worker_name.empty()) r["worker_name"] = worker_name;
    if (!function_id.empty()) r["function_id"] = function_id;
    r["owner_worker_id"] = owner;
    return r;
  }

  // protocol.rs InvocationResult: result / error omitted when absent.
  static json Result(const json& invocation_id, const std::string& function_id,
                     const std::optional<json>& result, const std::optional<json>& error) {
    json r{{"type", "invocationresult"}, {"invocation_id", invocation_id}, {"function_id", function_id}};
    if (error) {
      r["error"] = *error;
    } else if (result && !result->is_null()) {
      r["result"] = *result;
    }
    return r;
  }

  // mod.rs resolve_registration_id: `{prefix}::{id}` when the session has a
  // function_registration_prefix.
  static std::string Prefixed(const ConnPtr& c, const std::string& id) {
    const auto& prefix = c->session->function_registration_prefix;
    return prefix ? *prefix + "::" + id : id;
  }

  // mod.rs InvokeFunction's session gate, before the action is looked at:
  // is_function_allowed on the function the call would reach in `ns`, then a
  // scoped session may only declare its own namespaces on
  // engine::workers::register. A refusal is FORBIDDEN with the caller's
  // invocation id (a fresh one when it sent none, even for a void call) and
  // its traceparent / baggage. Returns the refusal, or nullopt to go on.
  std::optional<json> Gate(const ConnPtr& c, const json& m, const json& inv, const std::string& fn,
                           const std::string& ns) {
    const Session& s = *c->session;
    auto forbidden = [&](const std::string& message) {
      json r = Result(inv.is_null() ? json(skiff::NewUuid()) : inv, fn, std::nullopt,
                      engine_double::ErrorBody("FORBIDDEN", message));
      for (const char* k : {"traceparent", "baggage"}) {
        if (m.contains(k) && m[k].is_string()) r[k] = m[k];
      }
      return r;
    };
    const auto* f = registry_.Find(ns, fn);
    if (!engine_double::IsFunctionAllowed(fn, ns, s, f ? &f->metadata : nullptr)) {
      return forbidden(engine_double::ForbiddenCallMessage(fn, s));
    }
    if (fn == "engine::workers::register" && !s.namespaces.empty()) {
      const json data = m.value("data", json());
      const json declared = data.is_object() ? data.value("namespace", json()) : json();
      const std::string want =
          declared.is_string() ? declared.get<std::string>() : engine_double::kDefaultNamespace;
      if (!s.namespaces.count(want)) {
        std::string permitted;  // sorted, as the engine sorts them
        for (const auto& [k, grants] : s.namespaces) permitted += (permitted.empty() ? "" : ", ") + k;
        return forbidden("namespace '" + want + "' not allowed for this session (permitted: " + permitted +
                         ")");
      }
    }
    return std::nullopt;
  }

  // mod.rs InvokeFunction → spawn_invoke_function → remember_invocation →
  // resolve_function, then the owner's WorkerConnection::handle_function
  // (worker_connections/traits.rs) forwards it.
  void InvokeFunction(const ConnPtr& c, const json& m) {
    json inv = m.contains("invocation_id") ? m["invocation_id"] : json();
    if (!inv.is_null() && (inv = CanonicalUuid(inv)).is_null()) return;  // does not decode
    if (!m.contains("function_id") || !m["function_id"].is_string()) return;
    const std::string fn = m["function_id"];
    const bool legacy = registry_.legacy();
    json ns_field = legacy ? json() : m.value("namespace", json());
    if (!ns_field.is_null() && !ns_field.is_string()) return;  // does not decode
    if (engine_double::IsBlankNamespace(ns_field)) {
      // A blank namespace is answered, not resolved (blank_namespace_message).
      if (!inv.is_null()) {
        c->Send(
            Result(inv, fn, std::nullopt,
                   engine_double::ErrorBody(engine_double::kInvalidNamespace,
                                            "`namespace` is empty: it was named and left blank. Give it a "
                                            "name, or omit it to use `default`.")));
      }
      return;
    }
    const std::string ns =
        ns_field.is_string() ? ns_field.get<std::string>() : engine_double::kDefaultNamespace;
    if (auto refusal = Gate(c, m, inv, fn, ns)) return c->Send(*refusal);
    // action void: invoked, but never answered (invocation_id forced to None).
    json action = m.value("action", json());
    const std::string action_type = action.is_object() ? action.value("type", "") : "";
    if (action_type == "void") inv = json();
    if (action_type == "enqueue") {
      // Enqueue routes through engine::queue::enqueue, which the double does
      // not serve: the engine's missing-provider answer.
      if (!inv.is_null()) {
        c->Send(Result(inv, fn, std::nullopt,
                       engine_double::ErrorBody(
                           "enqueue_error",
                           "No queue provider is installed. `TriggerAction::Enqueue` routes through the "
                           "`engine::queue::enqueue` provider, which the standalone queue worker registers. "
                           "Add it with `iii worker add queue`. (underlying: Function engine::queue::enqueue "
                           "not found in namespace default)")));
      }
      return;
    }
    // The caller's id rides along in the data (spawn_invoke_function).
    json data = m.contains("data") ? m["data"] : json();
    if (data.is_object()) data["_caller_worker_id"] = c->worker_id;

    if (const auto* f = registry_.Find(ns, fn)) {
      auto target = live_.count(f->owner) ? live_[f->owner] : nullptr;
      if (target && !target->cleaned) {
        // handle_invocation: the caller's id is reused, a void call gets a
        // fresh one; both ends track it so a disconnect can halt it.
        json fwd_id = inv.is_null() ? json(skiff::NewUuid()) : inv;
        const std::string key = fwd_id.get<std::string>();
        pending_[key] = Pending{c, inv, fn, target};
        if (!inv.is_null()) c->invocations.insert(key);
        target->invocations.insert(key);
        json extra = json::object();
        for (const char* k : {"traceparent", "baggage", "metadata"}) {
          if (m.contains(k) && !m[k].is_null()) extra[k] = m[k];
        }
        Forward(target, fwd_id, fn, data, extra);
        return;
      }
    }
    // Builtins live in `default` (in-process engine workers).
    if (ns == engine_double::kDefaultNamespace) {
      if (auto a = Builtin(c, fn, data)) {
        if (!inv.is_null()) c->Send(Result(inv, fn, a->result, a->error));
        return;
      }
    }
    if (inv.is_null()) return;
    // resolve_function's miss; 0.22 said only "Function X not found".
    std::string message = "Function " + fn + " not found";
    if (!legacy) {
      message += " in namespace " + ns + ".";
      auto known = registry_.NamespacesFor(fn);
      if (!known.empty()) {
        message += " It is registered in namespace(s): ";
        for (size_t i = 0; i < known.size(); ++i) message += (i ? ", " : "") + known[i];
        message += ".";
      }
    }
    c->Send(Result(inv, fn, std::nullopt, engine_double::ErrorBody("function_not_found", message)));
  }

  // mod.rs InvocationResult: the pending call is looked up by id and its
  // caller answered with the caller's own invocation id and function id.
  void InvocationResult(const ConnPtr& c, const json& m) {
    json inv = CanonicalUuid(m.value("invocation_id", json()));
    if (inv.is_null()) return;  // does not decode
    const std::string key = inv;
    c->invocations.erase(key);
    auto it = pending_.find(key);
    if (it == pending_.end()) return;  // caller already gone: dropped
    Pending p = std::move(it->second);
    pending_.erase(it);
    std::optional<json> error, result;
    if (m.contains("error") && !m["error"].is_null()) error = m["error"];
    if (m.contains("result")) result = m["result"];
    if (p.done) return p.done(result, error);
    auto caller = p.caller.lock();
    if (!caller) return;
    caller->invocations.erase(key);
    if (p.caller_invocation_id.is_null() || caller->cleaned) return;
    caller->Send(Result(p.caller_invocation_id, p.function_id, result, error));
  }

  // invocation/mod.rs halt_invocation: the caller gets invocation_stopped.
  void Halt(const std::string& key) {
    auto it = pending_.find(key);
    if (it == pending_.end()) return;
    Pending p = std::move(it->second);
    pending_.erase(it);
    if (auto t = p.target.lock()) t->invocations.erase(key);
    json stopped = engine_double::ErrorBody("invocation_stopped", "Invocation stopped");
    if (p.done) return p.done(std::nullopt, stopped);
    auto caller = p.caller.lock();
    if (!caller) return;
    caller->invocations.erase(key);
    if (p.caller_invocation_id.is_null() || caller->cleaned) return;
    caller->Send(Result(p.caller_invocation_id, p.function_id, std::nullopt, stopped));
  }

  // Functions the engine serves itself; nullopt when `fn` is none of them.
  std::optional<engine_double::BuiltinAnswer> Builtin(const ConnPtr& c, const std::string& fn,
                                                      const json& data) {
    if (fn == "engine::workers::register") return RegisterWorker(c, data);
    if (fn == "engine::channels::create") return channels_->Create(data);
    if (fn == "engine::workers::list") {
      std::vector<engine_double::WorkerRow> rows;
      for (auto& w : conns_) {
        if (w->cleaned || w->worker_id.empty()) continue;
        engine_double::WorkerRow r;
        r.id = w->worker_id;
        r.ns = w->ns;  // worker_registry.get_namespace: default until declared
        r.name = w->metadata.value("name", json());
        r.description = w->metadata.value("description", json());
        r.version = w->metadata.value("version", json());
        r.runtime = w->metadata.value("runtime", json());
        r.os = w->metadata.value("os", json());
        r.isolation = w->metadata.value("isolation", json());
        r.pid = w->metadata.value("pid", json());
        r.ip_address = w->ip_address;
        r.function_count = w->functions.size();
        r.active_invocations = w->invocations.size();
        r.connected_at_ms = w->connected_at_ms;
        rows.push_back(std::move(r));
      }
      return engine_double::BuiltinAnswer{engine_double::WorkersList(rows, data, registry_.legacy()),
                                          std::nullopt};
    }
    return state_.Call(fn, data);
  }

  // engine_fn/mod.rs register_worker.
  engine_double::BuiltinAnswer RegisterWorker(const ConnPtr& c, const json& data) {
    const bool legacy = registry_.legacy();
    json ns_field = legacy || !data.is_object() ? json() : data.value("namespace", json());
    if (engine_double::IsBlankNamespace(ns_field)) {
      std::string name =
          data.value("name", json()).is_string() ? data["name"].get<std::string>() : "<unnamed>";
      return {std::nullopt,
              engine_double::ErrorBody(engine_double::kInvalidNamespace,
                                       "namespace is empty: worker '" + name + "' declared \"" +
                                           ns_field.get<std::string>() +
                                           "\". Give it a name, or omit the field to register in "
                                           "'default'.")};
    }
    // A namespace already fixed (by the grace timer) wins over a late declaration.
    std::string ns = ns_field.is_string() ? ns_field.get<std::string>() : engine_double::kDefaultNamespace;
    if (c->resolved && !legacy) ns = c->ns;
    std::string name =
        data.is_object() && data.value("name", json()).is_string() ? data["name"].get<std::string>() : "";
    if (!name.empty()) {
      if (auto owner = registry_.ClaimWorkerName(ns, name, c->worker_id, Live())) {
        // Fatal: reject_worker_registration tells the loser, then closes it;
        // nothing of it is registered.
        c->grace.cancel();
        c->Send(Rejected(engine_double::kWorkerConflict, ns, "", *owner, name));
        c->CloseAfterFlush();
        return {json{{"success", false}}, std::nullopt};
      }
      if (!legacy) c->name_lease = name;
    }
    if (data.is_object()) {
      for (const char* k : {"name", "description", "version", "runtime", "os", "isolation", "pid"}) {
        if (data.contains(k) && !data[k].is_null()) c->metadata[k] = data[k];
      }
      // register_worker_metadata: runtime defaults to "unknown".
      if (!c->metadata.contains("runtime")) c->metadata["runtime"] = "unknown";
    }
    if (!legacy) ResolveNamespace(c, ns);
    FireWorkersAvailable("worker_metadata_updated", c->worker_id);
    return {json{{"success", true}}, std::nullopt};
  }

  // mod.rs RegisterTrigger for the engine::workers-available type: the
  // target resolves in the trigger's `namespace` (absent: default).
  // Before that, the session's gates (mod.rs RegisterTrigger): a trigger
  // type outside allowed_trigger_types is ignored (only logged); the target
  // id takes the registration prefix; a target the session may not call is
  // answered with a FORBIDDEN triggerregistrationresult.
  void RegisterTrigger(const ConnPtr& c, const json& m) {
    if (!m.value("id", json()).is_string() || !m.value("function_id", json()).is_string() ||
        !m.value("trigger_type", json()).is_string()) {
      return;  // does not decode
    }
    const std::string id = m["id"], type = m["trigger_type"];
    const Session& s = *c->session;
    if (s.allowed_trigger_types && std::find(s.allowed_trigger_types->begin(), s.allowed_trigger_types->end(),
                                             type) == s.allowed_trigger_types->end()) {
      return;
    }
    const std::string fn = Prefixed(c, m["function_id"]);
    json ns_field = registry_.legacy() ? json() : m.value("namespace", json());
    const std::string ns =
        ns_field.is_string() ? ns_field.get<std::string>() : engine_double::kDefaultNamespace;
    const auto* f = registry_.Find(ns, fn);
    if (!engine_double::IsFunctionAllowed(fn, ns, s, f ? &f->metadata : nullptr)) {
      c->Send(
          json{{"type", "triggerregistrationresult"},
               {"id", id},
               {"trigger_type", type},
               {"function_id", fn},
               {"error", engine_double::ErrorBody(
                             "FORBIDDEN", "function '" + fn + "' not allowed in namespace '" + ns + "'")}});
      return;
    }
    if (type != "engine::workers-available") return;
    triggers_.push_back({id, fn, ns, c->worker_id});
  }

  // mod.rs fire_triggers(TRIGGER_WORKERS_AVAILABLE, {event, worker_id}):
  // each bound function is called by the engine itself (call_with_metadata_ns,
  // a fresh invocation id, no caller to answer).
  void FireWorkersAvailable(const std::string& event, const std::string& worker_id) {
    for (const auto& t : triggers_) {
      const auto* f = registry_.Find(t.ns, t.function_id);
      if (!f || !live_.count(f->owner)) continue;
      auto target = live_[f->owner];
      if (target->cleaned) continue;
      std::string id = skiff::NewUuid();
      pending_[id] = Pending{{}, json(), t.function_id, target};
      target->invocations.insert(id);
      Forward(target, id, t.function_id, {{"event", event}, {"worker_id", worker_id}});
    }
  }

  // EngineTrait::call_with_metadata_ns for a worker's function: a fresh
  // invocation id, no caller; `done` gets the answer (or invocation_stopped).
  // False when nobody serves `fn` in `ns`.
  bool CallFromEngine(const std::string& ns, const std::string& fn, const json& data, EngineCallDone done) {
    const auto* f = registry_.Find(ns, fn);
    if (!f || !IsLive(f->owner)) return false;
    auto target = live_[f->owner];
    std::string id = skiff::NewUuid();
    pending_[id] = Pending{{}, json(), fn, target, std::move(done)};
    target->invocations.insert(id);
    Forward(target, id, fn, data);
    return true;
  }

  // worker_connections/traits.rs handle_function: the invokefunction a
  // worker gets, with its own registration prefix taken off the id.
  void Forward(const ConnPtr& target, const json& invocation_id, std::string fn, const json& data,
               const json& extra = json::object()) {
    if (const auto& prefix = target->session->function_registration_prefix) {
      if (fn.starts_with(*prefix + "::")) fn.erase(0, prefix->size() + 2);
    }
    json out{
        {"type", "invokefunction"}, {"invocation_id", invocation_id}, {"function_id", fn}, {"data", data}};
    out.update(extra);
    target->Send(out);
  }

  // mod.rs Reattach: with the right token, the previous connection is
  // retired (same teardown as a disconnect) before the replay that follows.
  void Reattach(const ConnPtr& c, const json& m) {
    json prev = m.value("previous_worker_id", json());
    if (!prev.is_string() || prev == c->worker_id) return;
    auto it = live_.find(prev);
    if (it == live_.end()) return;
    auto old = it->second;
    if (m.value("reattach_token", json()) != json(old->reattach_token)) return;
    Cleanup(old);
    old->Abort();
  }

  // mod.rs cleanup_worker: functions released where still owned, calls in
  // flight halted, triggers, name lease and registry entry dropped, then
  // engine::workers-available {worker_disconnected}.
  void Cleanup(const ConnPtr& c) {
    if (c->cleaned) return;
    c->cleaned = true;
    c->grace.cancel();
    c->held.clear();
    for (const auto& id : c->functions) registry_.ReleaseFunction(c->ns, id, c->worker_id);
    c->functions.clear();
    auto inflight = c->invocations;
    for (const auto& id : inflight) Halt(id);
    std::erase_if(triggers_, [&](const Trigger& t) { return t.owner == c->worker_id; });
    if (!c->name_lease.empty()) registry_.ReleaseWorkerName(c->ns, c->name_lease, c->worker_id);
    live_.erase(c->worker_id);
    FireWorkersAvailable("worker_disconnected", c->worker_id);
  }

  Options opt_;
  boost::asio::io_context ioc_;
  std::optional<boost::asio::ssl::context> tls_;
  Listener main_{ioc_};
  std::optional<Listener> rbac_listener_;
  std::thread thread_;
  // Event-loop thread only:
  std::vector<ConnPtr> conns_;
  std::map<std::string, ConnPtr> live_;  // worker id → connection (worker_registry)
  engine_double::Registry registry_;
  engine_double::StateStore state_;
  std::shared_ptr<engine_double::ChannelStore> channels_;
  std::map<std::string, Pending> pending_;
  std::vector<Trigger> triggers_;
  // Shared with the test thread:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Received> got_;
  std::vector<Clock::time_point> accept_times_;
  int ws_conns_ = 0, dropped_ = 0;
};

}  // namespace skiff::e2e
