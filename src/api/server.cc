#include "api/server.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include <chrono>
#include <deque>

#include "api/channels.h"
#include "api/http_util.h"
#include "api/iii_codec.h"
#include "api/metrics.h"
#include "api/router.h"
#include "api/worker.h"
#include "base/log.h"
#include "base/text.h"
#include "functions/registry.h"

#ifndef SKIFF_VERSION
#define SKIFF_VERSION "0.0.0"
#endif

namespace skiff::api {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using unix_sock = net::local::stream_protocol;
using json = nlohmann::json;

std::string Version() { return SKIFF_VERSION; }

namespace {

constexpr auto kHeaderDeadline = std::chrono::seconds(10);
constexpr auto kPutStall = std::chrono::seconds(30);
constexpr size_t kPoolThreads = 128;
constexpr size_t kMaxWsOutBytes = 256u << 20;  // a client that never reads is cut off
// Invocations one engine connection may have running; beyond it the socket is
// not read until some finish, so a flood cannot queue unbounded work.
constexpr size_t kMaxWsInFlight = 1024;

std::string ResultLabel(const Invocation& inv) {
  if (inv.result) return "ok";
  if (inv.error) return std::string(CodeName(inv.error->code()));
  if (inv.engine_error && inv.engine_error->contains("code") &&
      (*inv.engine_error)["code"].is_string()) {
    return (*inv.engine_error)["code"].get<std::string>();
  }
  return "error";
}

}  // namespace

// ============================================================ Impl

struct Server::Impl {
  Impl(SandboxManager& m, Config c)
      : manager(m),
        config(std::move(c)),
        ioc(1),
        pool(kPoolThreads),
        broker([this](std::function<void()> f) { net::post(pool, std::move(f)); }),
        sweep_timer(ioc) {}

  SandboxManager& manager;
  Config config;
  net::io_context ioc;
  net::thread_pool pool;
  Broker broker;
  Metrics metrics;
  std::optional<tcp::acceptor> tcp_acceptor;
  std::optional<unix_sock::acceptor> unix_acceptor;
  net::steady_timer sweep_timer;
  std::optional<std::string> accel;  // "kvm" | "tcg" | nullopt
  std::atomic<bool> stopping{false};
  std::unique_ptr<WorkerLink> worker;  // worker mode (engine_url set)
  std::function<void()> on_rejected;   // worker registration rejected

  template <class F>
  void Blocking(F&& f) {
    net::post(pool, std::forward<F>(f));
  }

  bool Authorized(std::string_view authorization, const std::map<std::string, std::string>* q) {
    if (!config.auth_token) return true;
    if (auto tok = BearerToken(authorization); tok && ConstantTimeEquals(*tok, *config.auth_token)) {
      return true;
    }
    if (q) {
      auto it = q->find("token");
      if (it != q->end() && ConstantTimeEquals(it->second, *config.auth_token)) return true;
    }
    return false;
  }

  // Runs one function call (on a pool thread), recording metrics.
  Invocation Call(const std::string& id, const json& payload, ChannelBroker* channels) {
    auto t0 = std::chrono::steady_clock::now();
    CallContext ctx{manager, channels};
    Invocation inv;
    try {
      inv = Invoke(id, payload, ctx);
    } catch (const std::exception& e) {
      // A handler bug must not take the daemon down; report S300.
      SKIFF_LOG(Error) << "function " << id << " threw: " << e.what();
      inv.error = Platform("sandbox", std::string("internal error: ") + e.what());
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string label = ResultLabel(inv);
    metrics.FunctionCall(FindFunction(id) ? id : "unknown", label);
    if (id == "sandbox::create") {
      std::string image = payload.is_object() && payload.contains("image") &&
                                  payload["image"].is_string()
                              ? payload["image"].get<std::string>()
                              : "";
      if (image.size() > 64) image = image.substr(0, 64);
      if (!FindFunction(id) || image.empty()) image = "invalid";
      metrics.SandboxCreate(image, label);
    } else if (id == "sandbox::exec") {
      metrics.Exec(secs);
    }
    return inv;
  }

  json ErrorBody(const Error& e) { return ErrorToWire(e, config.docs_base); }

  json Health() {
    size_t n = manager.List().size();
    std::string status = stopping ? "stopping" : "ok";
    if (!stopping && worker && !worker->connected()) status = "engine_disconnected";
    json h = {{"status", status},
              {"version", Version()},
              {"mode", config.engine_url ? "worker" : "server"},
              {"isolation", manager.default_isolation()},
              {"accel", accel ? json(*accel) : json(nullptr)},
              {"isolation_available", manager.available_isolations()},
              {"sandboxes", n}};
    return h;
  }

  std::string MetricsText() {
    std::string extra;
    auto list = manager.List();
    std::map<std::string, uint64_t> by_iso;
    for (const auto& iso : manager.available_isolations()) by_iso[iso] = 0;
    uint64_t in_flight = 0;
    for (const auto& e : list) {
      ++by_iso[e.isolation];
      in_flight += e.exec_in_flight;
    }
    extra += "# HELP skiff_sandboxes Live sandboxes by isolation backend.\n";
    extra += "# TYPE skiff_sandboxes gauge\n";
    for (const auto& [iso, n] : by_iso) {
      extra += "skiff_sandboxes{isolation=\"" + LabelValue(iso) + "\"} " + std::to_string(n) +
               "\n";
    }
    extra += "# HELP skiff_sandboxes_reaped_total Sandboxes stopped by the idle reaper.\n";
    extra += "# TYPE skiff_sandboxes_reaped_total counter\n";
    extra += "skiff_sandboxes_reaped_total " + std::to_string(manager.stats().reaped.load()) +
             "\n";
    extra += "# HELP skiff_execs_in_flight Execs running now.\n";
    extra += "# TYPE skiff_execs_in_flight gauge\n";
    extra += "skiff_execs_in_flight " + std::to_string(in_flight) + "\n";
    extra += "# HELP skiff_pool_ready Warm, unclaimed sandboxes per image.\n";
    extra += "# TYPE skiff_pool_ready gauge\n";
    auto pools = manager.PoolStats();
    for (const auto& p : pools) {
      extra += "skiff_pool_ready{image=\"" + LabelValue(p.image) + "\"} " +
               std::to_string(p.ready) + "\n";
    }
    extra += "# HELP skiff_pool_hits_total Creates that claimed a pooled sandbox.\n";
    extra += "# TYPE skiff_pool_hits_total counter\n";
    for (const auto& p : pools) {
      extra += "skiff_pool_hits_total{image=\"" + LabelValue(p.image) + "\"} " +
               std::to_string(p.hits) + "\n";
    }
    extra += "# HELP skiff_pool_misses_total Creates of a pooled image that booted fresh.\n";
    extra += "# TYPE skiff_pool_misses_total counter\n";
    for (const auto& p : pools) {
      extra += "skiff_pool_misses_total{image=\"" + LabelValue(p.image) + "\"} " +
               std::to_string(p.misses) + "\n";
    }
    extra += "# HELP skiff_pool_fill_failures_total Failed background boots of pooled sandboxes.\n";
    extra += "# TYPE skiff_pool_fill_failures_total counter\n";
    for (const auto& p : pools) {
      extra += "skiff_pool_fill_failures_total{image=\"" + LabelValue(p.image) + "\"} " +
               std::to_string(p.fill_failures) + "\n";
    }
    extra += "# HELP skiff_build_info Build facts; always 1.\n";
    extra += "# TYPE skiff_build_info gauge\n";
    extra += "skiff_build_info{version=\"" + LabelValue(Version()) + "\",isolation=\"" +
             LabelValue(manager.default_isolation()) + "\"} 1\n";
    return metrics.Render(extra);
  }

  void ScheduleSweep() {
    sweep_timer.expires_after(std::chrono::seconds(15));
    sweep_timer.async_wait([this](beast::error_code ec) {
      if (ec || stopping) return;
      broker.Sweep();
      ScheduleSweep();
    });
  }
};

// ============================================================ WebSockets

// Common plumbing: a serialized write queue on the event loop.
template <class Protocol>
class WsBase : public std::enable_shared_from_this<WsBase<Protocol>> {
 public:
  using Stream = beast::basic_stream<Protocol>;
  WsBase(Server::Impl& srv, Stream&& stream) : srv_(srv), ws_(std::move(stream)) {}
  virtual ~WsBase() = default;

  void Accept(http::request<http::empty_body> req) {
    beast::get_lowest_layer(ws_).expires_never();
    websocket::stream_base::timeout opt = websocket::stream_base::timeout::suggested(
        beast::role_type::server);
    opt.handshake_timeout = kHeaderDeadline;
    ws_.set_option(opt);
    ws_.read_message_max(kMaxPayloadBytes);
    ws_.set_option(websocket::stream_base::decorator([](websocket::response_type& res) {
      res.set(http::field::server, "skiffd/" + Version());
    }));
    auto self = this->shared_from_this();
    ws_.async_accept(req, [self](beast::error_code ec) {
      if (ec) {
        SKIFF_LOG(Debug) << "ws: handshake failed: " << ec.message();
        return;
      }
      self->OnOpen();
    });
  }

  // Queue a frame (event-loop thread only).
  void Send(std::string data, bool binary = false) {
    if (closed_) return;
    out_bytes_ += data.size();
    if (out_bytes_ > kMaxWsOutBytes) {
      SKIFF_LOG(Warn) << "ws: client is not reading; closing the connection";
      Close(websocket::close_code::policy_error);
      return;
    }
    out_.push_back({binary, std::move(data)});
    if (!writing_) WriteNext();
  }
  // Thread-safe.
  void Post(std::string data) {
    auto self = this->shared_from_this();
    net::post(ws_.get_executor(), [self, d = std::move(data)]() mutable { self->Send(std::move(d)); });
  }

  void Close(websocket::close_code code) {
    if (closed_) return;
    closed_ = true;
    out_.clear();
    auto self = this->shared_from_this();
    ws_.async_close(code, [self](beast::error_code) {});
  }

 protected:
  virtual void OnOpen() = 0;
  virtual void OnWritten() {}

  void WriteNext() {
    if (out_.empty() || closed_) {
      writing_ = false;
      return;
    }
    writing_ = true;
    ws_.binary(out_.front().first);
    auto self = this->shared_from_this();
    ws_.async_write(net::buffer(out_.front().second),
                    [self](beast::error_code ec, size_t n) {
                      self->out_bytes_ -= std::min(self->out_bytes_, n);
                      if (!self->out_.empty()) self->out_.pop_front();
                      if (ec) {
                        self->closed_ = true;
                        self->out_.clear();
                        self->writing_ = false;
                        return;
                      }
                      self->OnWritten();
                      self->WriteNext();
                    });
  }

  Server::Impl& srv_;
  websocket::stream<Stream> ws_;
  beast::flat_buffer in_;
  std::deque<std::pair<bool, std::string>> out_;
  size_t out_bytes_ = 0;
  bool writing_ = false;
  bool closed_ = false;
};

// The iii engine protocol on "/" (spec §8.2).
template <class Protocol>
class EngineSession : public WsBase<Protocol> {
  using Base = WsBase<Protocol>;

 public:
  EngineSession(Server::Impl& srv, typename Base::Stream&& s)
      : Base(srv, std::move(s)), channels_(std::make_shared<ScopedBroker>(srv.broker)) {
    ++srv.metrics.ws_connections;
  }
  ~EngineSession() override {
    --this->srv_.metrics.ws_connections;
    channels_->Release();
  }

 private:
  std::shared_ptr<EngineSession> Self() {
    return std::static_pointer_cast<EngineSession>(this->shared_from_this());
  }

  void OnOpen() override {
    worker_id_ = NewUuid();
    this->Send(iii::WorkerRegistered(worker_id_, NewUuid()));
    Read();
  }

  void Read() {
    auto self = Self();
    this->ws_.async_read(this->in_, [self](beast::error_code ec, size_t) {
      if (ec) {
        if (ec == websocket::error::message_too_big) {
          SKIFF_LOG(Warn) << "ws: frame over 32 MiB; closing with 1009";
        } else if (ec != websocket::error::closed) {
          SKIFF_LOG(Debug) << "ws: read ended: " << ec.message();
        }
        if (self->in_flight_ > 0) {
          SKIFF_LOG(Warn) << "ws: connection gone with " << self->in_flight_
                          << " invocation(s) in flight; they run to the end, results dropped";
        }
        self->read_ended_ = true;
        self->channels_->Release();
        return;
      }
      std::string msg = beast::buffers_to_string(self->in_.data());
      bool binary = self->ws_.got_binary();
      self->in_.consume(self->in_.size());
      self->Handle(msg, binary);
      if (self->in_flight_ >= kMaxWsInFlight) {
        self->read_paused_ = true;  // resumed by Finished()
        return;
      }
      self->Read();
    });
  }

  // An invocation ended (event-loop thread): send its reply, resume reading.
  void Finished(std::string reply) {
    --in_flight_;
    if (!reply.empty()) this->Send(std::move(reply));
    if (read_paused_ && !read_ended_ && in_flight_ < kMaxWsInFlight / 2) {
      read_paused_ = false;
      Read();
    }
  }

  void Handle(const std::string& msg, bool binary) {
    if (iii::IsTelemetryFrame(msg, binary)) return;
    auto parsed = ParsePayload(msg);
    if (!parsed.ok() || !parsed->is_object()) {
      SKIFF_LOG(Warn) << "ws: ignoring a frame that is not a JSON object ("
                      << msg.size() << " bytes)";
      return;
    }
    json& m = *parsed;
    std::string type = iii::MessageType(m);
    if (type == "ping") {
      this->Send(iii::Pong());
    } else if (type == "invokefunction") {
      Invokefunction(m);
    } else if (type == "registertrigger") {
      this->Send(iii::TriggerRegistrationResult(m));
    } else if (type == "registerfunction" || type == "unregisterfunction" ||
               type == "registertriggertype" || type == "unregistertrigger" ||
               type == "registerservice" || type == "reattach" || type == "invocationresult" ||
               type == "pong") {
      // Accepted and ignored (spec §8.2).
    } else {
      SKIFF_LOG(Warn) << "ws: ignoring a frame of unknown type '" << type.substr(0, 64) << "'";
    }
  }

  void Invokefunction(json& m) {
    auto req = iii::DecodeInvoke(m);
    if (!req) {
      SKIFF_LOG(Warn) << "ws: invokefunction without a string function_id; ignored";
      return;
    }
    bool reply = req->wants_reply();
    const std::string& fid = req->function_id;
    if (req->action == iii::Action::kEnqueue) {
      if (reply) this->Send(iii::EncodeError(req->invocation_id, fid, iii::EnqueueRefused()));
      return;
    }
    if (req->foreign_namespace) {
      if (reply) this->Send(iii::EncodeError(req->invocation_id, fid, iii::FunctionNotFound(fid)));
      return;
    }
    if (fid == "engine::workers::register") {
      if (reply) this->Send(iii::EncodeResult(req->invocation_id, fid, nullptr));
      return;
    }
    auto self = Self();
    ++in_flight_;
    this->srv_.Blocking([self, reply, req = std::move(*req)]() mutable {
      Invocation inv = self->srv_.Call(req.function_id, req.data, self->channels_.get());
      if (!reply) {
        net::post(self->ws_.get_executor(), [self]() { self->Finished(""); });
        return;
      }
      std::string out = iii::EncodeInvocation(req.invocation_id, req.function_id, std::move(inv),
                                              [&](const Error& e) { return self->srv_.ErrorBody(e); });
      net::post(self->ws_.get_executor(),
                [self, d = std::move(out)]() mutable { self->Finished(std::move(d)); });
    });
  }

  std::shared_ptr<ScopedBroker> channels_;
  std::string worker_id_;
  size_t in_flight_ = 0;  // event-loop thread only
  bool read_paused_ = false, read_ended_ = false;
};

// /otel: accepted; every frame is discarded.
template <class Protocol>
class DiscardSession : public WsBase<Protocol> {
  using Base = WsBase<Protocol>;

 public:
  using Base::Base;

 private:
  void OnOpen() override { Read(); }
  void Read() {
    auto self = std::static_pointer_cast<DiscardSession>(this->shared_from_this());
    this->ws_.async_read(this->in_, [self](beast::error_code ec, size_t) {
      if (ec) return;
      self->in_.consume(self->in_.size());
      self->Read();
    });
  }
};

// A data channel side (spec §8.4).
template <class Protocol>
class ChannelSession : public WsBase<Protocol> {
  using Base = WsBase<Protocol>;

 public:
  ChannelSession(Server::Impl& srv, typename Base::Stream&& s, std::shared_ptr<Channel> ch,
                 bool writer)
      : Base(srv, std::move(s)), ch_(std::move(ch)), writer_(writer) {
    // One WebSocket frame per channel frame (spec §3.5: binary frames of at
    // most 64 KiB); Beast would otherwise split them into 4 KiB fragments.
    this->ws_.auto_fragment(false);
    if (writer_) {
      // End of stream is the writer's close frame (§8.4). The read that sees
      // it completes only after Beast's server teardown, i.e. once the peer
      // has also closed its TCP connection, which a client may not do for a
      // long time (or until the close-handshake timeout): end the stream as
      // soon as the close frame arrives. All earlier messages were pushed
      // already, since a message is read only after the previous one fit.
      this->ws_.control_callback([this](websocket::frame_type kind, beast::string_view) {
        if (kind == websocket::frame_type::close && !ended_) {
          ended_ = true;
          ch_->CloseWrite();
        }
      });
    }
  }
  ~ChannelSession() override {
    if (writer_) {
      if (!ended_) ch_->Abort("writer went away without closing");
    } else {
      ch_->ReaderGone();
    }
  }

 private:
  std::shared_ptr<ChannelSession> Self() {
    return std::static_pointer_cast<ChannelSession>(this->shared_from_this());
  }
  void OnOpen() override {
    if (writer_) {
      ReadFromWriter();
    } else {
      DrainReader();
      Pump();
    }
  }

  // Writer side: a frame is read only once the previous one found room.
  void ReadFromWriter() {
    auto self = Self();
    this->ws_.async_read(this->in_, [self](beast::error_code ec, size_t) {
      if (ec) {
        if (self->ended_) return;  // the close frame already ended the stream
        if (ec == websocket::error::closed) {
          self->ended_ = true;
          self->ch_->CloseWrite();
        } else {
          self->ch_->Abort("writer connection failed: " + ec.message());
        }
        return;
      }
      Frame f{self->ws_.got_binary(), beast::buffers_to_string(self->in_.data())};
      self->in_.consume(self->in_.size());
      self->PushFrame(std::move(f));
    });
  }
  void PushFrame(Frame f) {
    switch (ch_->TryPush(std::move(f))) {
      case Channel::Push::kOk:
        ReadFromWriter();
        return;
      case Channel::Push::kClosed:
        ended_ = true;
        this->Close(websocket::close_code::going_away);
        return;
      case Channel::Push::kFull: {
        auto self = Self();
        auto held = std::make_shared<Frame>(std::move(f));
        ch_->OnWritable([self, held]() {
          net::post(self->ws_.get_executor(), [self, held]() { self->PushFrame(std::move(*held)); });
        });
        return;
      }
    }
  }

  // Reader side: frames from the channel go out in order; a concurrent
  // read notices the peer leaving (and answers its control frames).
  void DrainReader() {
    auto self = Self();
    this->ws_.async_read(this->in_, [self](beast::error_code ec, size_t) {
      if (ec) {
        self->ch_->ReaderGone();
        return;
      }
      self->in_.consume(self->in_.size());
      self->DrainReader();
    });
  }
  void Pump() {
    if (this->closed_ || this->writing_) return;
    Frame f;
    switch (ch_->TryPop(&f)) {
      case Channel::Pop::kFrame:
        this->Send(std::move(f.data), f.binary);
        return;  // OnWritten continues
      case Channel::Pop::kEof:
        this->Close(websocket::close_code::normal);
        return;
      case Channel::Pop::kAborted:
        this->Close(websocket::close_code::internal_error);
        return;
      case Channel::Pop::kEmpty: {
        auto self = Self();
        ch_->OnReadable([self]() { net::post(self->ws_.get_executor(), [self]() { self->Pump(); }); });
        return;
      }
    }
  }
  void OnWritten() override {
    if (!writer_ && this->out_.size() <= 1) {
      auto self = Self();
      net::post(this->ws_.get_executor(), [self]() { self->Pump(); });
    }
  }

  std::shared_ptr<Channel> ch_;
  bool writer_;
  bool ended_ = false;
};

// ============================================================ HTTP

template <class Protocol>
class HttpSession : public std::enable_shared_from_this<HttpSession<Protocol>> {
  using Stream = beast::basic_stream<Protocol>;

 public:
  HttpSession(Server::Impl& srv, typename Protocol::socket&& sock)
      : srv_(srv), stream_(std::move(sock)) {}

  void Start() { ReadHeader(); }

 private:
  void ReadHeader() {
    hp_.emplace();
    hp_->header_limit(64 * 1024);
    hp_->body_limit(std::numeric_limits<std::uint64_t>::max());  // each route sets its own limit
    stream_.expires_after(kHeaderDeadline);
    auto self = this->shared_from_this();
    http::async_read_header(stream_, buf_, *hp_, [self](beast::error_code ec, size_t) {
      self->OnHeader(ec);
    });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) {
      if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
          ec == net::error::operation_aborted || ec == net::error::eof ||
          ec == net::error::connection_reset) {
        return Close();
      }
      keep_alive_ = false;
      return SendJson(http::status::bad_request,
                      {{"code", "bad_request"}, {"message", "malformed HTTP request: " + ec.message()}});
    }
    stream_.expires_never();
    auto& req = hp_->get();
    keep_alive_ = req.keep_alive();
    auto target = SplitTarget(std::string_view(req.target().data(), req.target().size()));
    if (!target) {
      return SendError(http::status::bad_request, InvalidRequest("malformed request target"));
    }
    auto query = ParseQuery(target->query);
    if (!query) return SendError(http::status::bad_request, InvalidRequest("malformed query string"));
    query_ = std::move(*query);
    Dispatch d = RouteRequest(req.method(), target->path);
    route_ = RouteMatch{d.route, d.param};
    std::string_view auth(req[http::field::authorization].data(),
                          req[http::field::authorization].size());
    bool is_health = d.outcome == Dispatch::Outcome::kFound && d.handler == Handler::kHealthz;
    bool upgrade = websocket::is_upgrade(req);
    if (!is_health && !srv_.Authorized(auth, upgrade ? &query_ : nullptr)) {
      auto res = MakeJson(http::status::unauthorized,
                          {{"code", "unauthorized"},
                           {"message", "missing or wrong bearer token (Authorization: Bearer …)"}});
      res->set(http::field::www_authenticate, "Bearer");
      keep_alive_ = false;
      return Write(res);
    }
    if (d.outcome == Dispatch::Outcome::kNotFound) {
      return SendJson(http::status::not_found,
                      {{"code", "not_found"}, {"message", "no such endpoint: " + target->path}});
    }
    if (d.outcome == Dispatch::Outcome::kMethodNotAllowed) {
      auto res = MakeJson(http::status::method_not_allowed,
                          {{"code", "method_not_allowed"},
                           {"message", std::string(req.method_string()) + " is not allowed here; use " +
                                           d.allow}});
      res->set(http::field::allow, d.allow);
      keep_alive_ = false;  // an unread body may follow
      return Write(res);
    }
    switch (d.handler) {
      case Handler::kUpgrade:
        if (!upgrade) {
          return SendJson(http::status::upgrade_required,
                          {{"code", "upgrade_required"},
                           {"message", "this endpoint speaks WebSocket"}});
        }
        return Upgrade(route_);
      case Handler::kHealthz: {
        json h = srv_.Health();
        return SendJson(h["status"] == "ok" ? http::status::ok
                                            : http::status::service_unavailable,
                        h);
      }
      case Handler::kMetrics: {
        auto res = std::make_shared<http::response<http::string_body>>(http::status::ok,
                                                                        req.version());
        res->set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
        res->body() = srv_.MetricsText();
        return Write(res);
      }
      case Handler::kFunctionList:
        return FunctionList();
      case Handler::kFunctionInfo:
        return FunctionInfo(route_.param);
      case Handler::kFunctionCall:
        return ReadCallBody();
      case Handler::kFileGet:
        return FileGet();
      case Handler::kFilePut:
        return FilePut();
    }
    return Close();
  }

  // ---------------------------------------------------------- responses

  std::shared_ptr<http::response<http::string_body>> MakeJson(http::status st, const json& body) {
    auto res = std::make_shared<http::response<http::string_body>>(st, 11);
    res->set(http::field::server, "skiffd/" + Version());
    res->set(http::field::content_type, "application/json");
    res->body() = Dump(body);
    return res;
  }
  void SendJson(http::status st, const json& body) { Write(MakeJson(st, body)); }
  void SendJsonStatus(int st, const json& body) { Write(MakeJson(static_cast<http::status>(st), body)); }
  void SendError(http::status st, const Error& e) { SendJson(st, srv_.ErrorBody(e)); }
  void SendError(const Error& e) { SendJsonStatus(HttpStatus(e.code()), srv_.ErrorBody(e)); }

  void Write(std::shared_ptr<http::response<http::string_body>> res) {
    res->keep_alive(keep_alive_);
    res->prepare_payload();
    auto self = this->shared_from_this();
    http::async_write(stream_, *res, [self, res](beast::error_code ec, size_t) {
      if (ec || !self->keep_alive_) return self->Close();
      self->ReadHeader();
    });
  }

  void Close() {
    beast::error_code ec;
    if (no_drain_) {
      if (up_reading_) {
        // Finish when the pending read returns.
        close_after_read_ = true;
        no_drain_ = false;
        stream_.socket().shutdown(Protocol::socket::shutdown_both, ec);
        return;
      }
      stream_.socket().close(ec);
      return;
    }
    stream_.socket().shutdown(Protocol::socket::shutdown_send, ec);
    // Drain what the client still sends for a moment so the kernel does not
    // answer it with a reset that would destroy our response in flight.
    auto self = this->shared_from_this();
    auto drain = std::make_shared<std::array<char, 16384>>();
    stream_.expires_after(std::chrono::seconds(2));
    DrainLoop(drain, 0);
  }
  void DrainLoop(std::shared_ptr<std::array<char, 16384>> drain, size_t total) {
    auto self = this->shared_from_this();
    stream_.async_read_some(net::buffer(*drain), [self, drain, total](beast::error_code ec, size_t n) {
      if (ec || total + n > (64u << 20)) {
        beast::error_code ignored;
        self->stream_.socket().close(ignored);
        return;
      }
      self->DrainLoop(drain, total + n);
    });
  }

  void Invocation2Response(Invocation inv) {
    int st = inv.http_status();
    if (inv.result) return SendJsonStatus(200, *inv.result);
    if (inv.error) return SendJsonStatus(st, srv_.ErrorBody(*inv.error));
    if (inv.engine_error) return SendJsonStatus(st, *inv.engine_error);
    SendJsonStatus(200, nullptr);
  }

  // Runs a call on the pool and answers on the event loop.
  void CallAsync(std::string id, json payload) {
    auto self = this->shared_from_this();
    srv_.Blocking([self, id = std::move(id), payload = std::move(payload)]() {
      Invocation inv = self->srv_.Call(id, payload, &self->srv_.broker);
      net::post(self->stream_.get_executor(),
                [self, inv = std::move(inv)]() mutable { self->Invocation2Response(std::move(inv)); });
    });
  }

  // ---------------------------------------------------------- functions

  void FunctionList() {
    json p = json::object();
    if (auto it = query_.find("prefix"); it != query_.end()) p["prefix"] = it->second;
    if (auto it = query_.find("search"); it != query_.end()) p["search"] = it->second;
    if (auto it = query_.find("include_internal"); it != query_.end()) {
      p["include_internal"] = it->second == "true" || it->second == "1";
    }
    CallAsync("engine::functions::list", std::move(p));
  }

  void FunctionInfo(const std::string& id) {
    if (!FindFunction(id)) return NotProvided(id);
    CallAsync("engine::functions::info", json{{"function_id", id}});
  }

  void NotProvided(const std::string& id) {
    SendJson(http::status::not_found,
             {{"code", "function_not_found"},
              {"message", "function '" + id + "' is not provided by skiff"}});
  }

  void MaybeContinue(std::function<void()> next) {
    auto& req = hp_->get();
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      auto res = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      auto self = this->shared_from_this();
      http::async_write(stream_, *res, [self, res, next](beast::error_code ec, size_t) {
        if (ec) return self->Close();
        next();
      });
      return;
    }
    next();
  }

  void ReadCallBody() {
    auto& req = hp_->get();
    if (auto cl = hp_->content_length(); cl && *cl > kMaxPayloadBytes) {
      return TooLarge();
    }
    (void)req;
    auto self = this->shared_from_this();
    MaybeContinue([self]() {
      self->bp_.emplace(std::move(*self->hp_));
      self->bp_->body_limit(kMaxPayloadBytes);
      self->stream_.expires_after(std::chrono::seconds(120));
      http::async_read(self->stream_, self->buf_, *self->bp_,
                       [self](beast::error_code ec, size_t) { self->OnCallBody(ec); });
    });
  }

  void TooLarge() {
    keep_alive_ = false;
    SendJson(http::status::payload_too_large,
             srv_.ErrorBody(InvalidRequest("payload exceeds the 32 MiB limit")));
  }

  void OnCallBody(beast::error_code ec) {
    stream_.expires_never();
    if (ec == http::error::body_limit) return TooLarge();
    if (ec) {
      keep_alive_ = false;
      if (ec == beast::error::timeout || ec == http::error::end_of_stream ||
          ec == net::error::eof) {
        return Close();
      }
      return SendError(http::status::bad_request,
                       InvalidRequest("payload could not be read: " + ec.message()));
    }
    std::string body = std::move(bp_->get().body());
    keep_alive_ = bp_->get().keep_alive();
    std::string id = route_.param;
    bp_.reset();
    if (!FindFunction(id)) return NotProvided(id);
    auto payload = ParsePayload(body);
    body.clear();
    body.shrink_to_fit();
    if (!payload.ok()) return SendError(http::status::bad_request, payload.error());
    CallAsync(std::move(id), std::move(*payload));
  }

  // ---------------------------------------------------------- files

  // Shared request-only checks for GET/PUT files (spec §1.3 steps 1–3).
  Result<std::pair<std::string, std::string>> FileTarget() {
    auto sid = CanonicalUuid(route_.param);
    auto it = query_.find("path");
    if (it == query_.end()) return InvalidRequest("missing required field 'path' (expected string)");
    const std::string& path = it->second;
    if (path.empty()) return InvalidRequest("path: must not be empty");
    if (path.find('\0') != std::string::npos) return InvalidRequest("path: contains a NUL byte");
    if (!sid) return InvalidRequest("sandbox_id: not a UUID: " + route_.param);
    return std::make_pair(*sid, path);
  }

  void FileGet() {
    auto t = FileTarget();
    if (!t.ok()) return SendError(t.error());
    auto ch = std::make_shared<Channel>(16);
    auto failure = std::make_shared<std::optional<Error>>();
    dl_header_sent_ = false;
    dl_sr_.reset();
    dl_res_.reset();
    auto self = this->shared_from_this();
    std::string sid = t->first, path = t->second;
    dl_ch_ = ch;
    dl_failure_ = failure;
    srv_.Blocking([self, ch, failure, sid, path]() {
      bool meta_sent = false;
      Status st = self->srv_.manager.FsRead(
          sid, path,
          [&](const FsReadMeta& m) {
            json meta = {{"size", m.size}, {"mode", m.mode}, {"mtime", m.mtime}};
            meta_sent = ch->PushBlocking(Frame{false, Dump(meta)}).ok();
          },
          [&](std::string_view bytes) -> bool {
            while (!bytes.empty()) {
              size_t n = std::min(bytes.size(), kChannelChunk);
              if (!ch->PushBlocking(Frame{true, std::string(bytes.substr(0, n))}).ok()) {
                return false;
              }
              bytes.remove_prefix(n);
            }
            return true;
          });
      if (st.ok()) {
        ch->CloseWrite();
      } else {
        *failure = st.error();
        ch->Abort(st.error().message());
      }
      (void)meta_sent;
    });
    PumpDownload();
  }

  void PumpDownload() {
    Frame f;
    auto self = this->shared_from_this();
    switch (dl_ch_->TryPop(&f)) {
      case Channel::Pop::kEmpty:
        dl_ch_->OnReadable([self]() {
          net::post(self->stream_.get_executor(), [self]() { self->PumpDownload(); });
        });
        return;
      case Channel::Pop::kAborted:
        if (!dl_header_sent_) {
          dl_ch_->ReaderGone();
          if (*dl_failure_) return SendError(**dl_failure_);
          return SendError(Error(Code::kS216, "fs i/o error: download failed"));
        }
        // Mid-transfer: cut the connection without the final chunk.
        {
          beast::error_code ec;
          stream_.socket().close(ec);
        }
        return;
      case Channel::Pop::kEof: {
        if (!dl_header_sent_) {  // no meta: should not happen; answer cleanly
          return SendError(Error(Code::kS216, "fs i/o error: no file metadata"));
        }
        net::async_write(stream_, http::make_chunk_last(), [self](beast::error_code ec, size_t) {
          self->dl_ch_.reset();
          if (ec || !self->keep_alive_) return self->Close();
          self->ReadHeader();
        });
        return;
      }
      case Channel::Pop::kFrame:
        break;
    }
    if (!f.binary) {
      json meta = json::parse(f.data, nullptr, false);
      dl_res_.emplace(http::status::ok, 11);
      dl_res_->set(http::field::server, "skiffd/" + Version());
      dl_res_->set(http::field::content_type, "application/octet-stream");
      dl_res_->set("X-Skiff-Size", std::to_string(meta.value("size", uint64_t{0})));
      dl_res_->set("X-Skiff-Mode", meta.value("mode", std::string("0000")));
      dl_res_->set("X-Skiff-Mtime", std::to_string(meta.value("mtime", int64_t{0})));
      dl_res_->keep_alive(keep_alive_);
      dl_res_->chunked(true);
      dl_sr_.emplace(*dl_res_);
      http::async_write_header(stream_, *dl_sr_, [self](beast::error_code ec, size_t) {
        if (ec) {
          self->dl_ch_->ReaderGone();
          return self->Close();
        }
        self->dl_header_sent_ = true;
        self->PumpDownload();
      });
      return;
    }
    auto data = std::make_shared<std::string>(std::move(f.data));
    net::async_write(stream_, http::make_chunk(net::buffer(*data)),
                     [self, data](beast::error_code ec, size_t) {
                       if (ec) {
                         self->dl_ch_->ReaderGone();
                         beast::error_code ignored;
                         self->stream_.socket().close(ignored);
                         return;
                       }
                       self->PumpDownload();
                     });
  }

  void FilePut() {
    auto t = FileTarget();
    uint32_t mode = 0644;
    bool parents = false;
    if (t.ok()) {
      if (auto it = query_.find("parents"); it != query_.end()) {
        if (it->second == "true") parents = true;
        else if (it->second == "false") parents = false;
        else t = InvalidRequest("parents: expected true or false, got " + it->second);
      }
    }
    if (t.ok()) {
      if (auto it = query_.find("mode"); it != query_.end()) {
        auto m = ParseModeString(it->second);
        if (!m) t = Error(Code::kS210, "invalid octal mode: " + it->second);
        else mode = *m;
      }
    }
    if (!t.ok()) {
      keep_alive_ = false;  // the body stays unread
      return SendError(t.error());
    }
    auto ch = std::make_shared<Channel>(16);
    up_ch_ = ch;
    up_result_.reset();
    up_done_ = false;
    up_answered_ = false;
    std::string sid = t->first, path = t->second;
    auto self = this->shared_from_this();
    // The call starts only after any 100-continue went out, so the early
    // error answer of a failing call never overlaps another write.
    MaybeContinue([self, ch, sid, path, mode, parents]() {
      self->srv_.Blocking([self, ch, sid, path, mode, parents]() {
        struct Guard {
          std::shared_ptr<Channel> ch;
          ~Guard() { ch->ReaderGone(); }
        } guard{ch};
        ByteSource src = [ch]() -> Result<std::string> {
          while (true) {
            auto r = ch->PopBlocking(kPutStall);
            if (!r.ok()) {
              Error e = std::move(r).error();
              return Error(Code::kS218, e.message());
            }
            if (!r->has_value()) return std::string();
            if ((*r)->data.empty()) continue;
            return std::move((*r)->data);
          }
        };
        auto res = self->srv_.manager.FsWrite(sid, path, mode, parents, src);
        ch->ReaderGone();
        net::post(self->stream_.get_executor(), [self, res = std::move(res)]() mutable {
          self->up_result_.emplace(std::move(res));
          self->MaybeFinishPut();
        });
      });
      self->up_parser_.emplace(std::move(*self->hp_));
      self->up_parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
      self->up_buf_.resize(kChannelChunk);
      self->ReadUpload();
    });
  }

  void ReadUpload() {
    if (up_done_) return;
    auto& p = *up_parser_;
    if (p.is_done()) {
      up_done_ = true;
      up_ch_->CloseWrite();
      return MaybeFinishPut();
    }
    p.get().body().data = up_buf_.data();
    p.get().body().size = up_buf_.size();
    stream_.expires_after(kPutStall);
    auto self = this->shared_from_this();
    up_reading_ = true;
    http::async_read_some(stream_, buf_, p, [self](beast::error_code ec, size_t) {
      self->up_reading_ = false;
      self->stream_.expires_never();
      if (self->up_answered_) {
        // Answered early; the connection is being torn down.
        if (self->close_after_read_) self->Close();
        return;
      }
      if (ec == http::error::need_buffer) ec = {};
      if (ec) {
        self->up_done_ = true;
        self->keep_alive_ = false;
        if (ec == beast::error::timeout) {
          self->up_ch_->Abort("no upload data for 30 s");
        } else {
          self->up_ch_->Abort("upload ended abnormally: " + ec.message());
        }
        return self->MaybeFinishPut();
      }
      size_t n = self->up_buf_.size() - self->up_parser_->get().body().size;
      if (n == 0) return self->ReadUpload();
      self->PushUpload(Frame{true, std::string(self->up_buf_.data(), n)});
    });
  }

  void PushUpload(Frame f) {
    switch (up_ch_->TryPush(std::move(f))) {
      case Channel::Push::kOk:
        return ReadUpload();
      case Channel::Push::kClosed:
        // The writer side finished early (an error): stop reading the body.
        up_done_ = true;
        keep_alive_ = false;
        return MaybeFinishPut();
      case Channel::Push::kFull: {
        auto self = this->shared_from_this();
        auto held = std::make_shared<Frame>(std::move(f));
        up_ch_->OnWritable([self, held]() {
          net::post(self->stream_.get_executor(), [self, held]() { self->PushUpload(std::move(*held)); });
        });
        return;
      }
    }
  }

  void MaybeFinishPut() {
    if (!up_result_ || up_answered_) return;
    if (!up_done_) {
      // The call ended before the body did (e.g. S002): answer now and drop
      // the connection rather than read the rest.
      keep_alive_ = false;
      up_done_ = true;
    }
    up_answered_ = true;
    auto res = std::move(*up_result_);
    up_result_.reset();
    if (up_reading_) {
      // A body read is still pending: answer, then close once it returns
      // (never two reads at once on the stream).
      no_drain_ = true;
    }
    if (res.ok()) return SendJson(http::status::ok, *res);
    SendError(res.error());
  }

  // ---------------------------------------------------------- upgrades

  void Upgrade(const RouteMatch& rm) {
    http::request<http::empty_body> req = hp_->release();
    if (rm.route == Route::kEngine) {
      if (srv_.config.engine_url) {
        return SendJson(http::status::not_found,
                        {{"code", "not_found"},
                         {"message", "worker mode: the engine protocol is served by the engine"}});
      }
      auto s = std::make_shared<EngineSession<Protocol>>(srv_, std::move(stream_));
      return s->Accept(std::move(req));
    }
    if (rm.route == Route::kOtel) {
      auto s = std::make_shared<DiscardSession<Protocol>>(srv_, std::move(stream_));
      return s->Accept(std::move(req));
    }
    auto key = query_.count("key") ? query_["key"] : "";
    auto dir = query_.count("dir") ? query_["dir"] : "";
    auto att = srv_.broker.Attach(rm.param, key, dir);
    if (att.http_status != 200) {
      const char* what = att.http_status == 400   ? "dir must be read or write"
                         : att.http_status == 409 ? "that side of the channel is already attached"
                                                  : "unknown channel or wrong key";
      keep_alive_ = false;
      return SendJsonStatus(att.http_status, {{"code", att.http_status == 409 ? "conflict"
                                                        : att.http_status == 400 ? "bad_request"
                                                                                 : "not_found"},
                                               {"message", what}});
    }
    auto s = std::make_shared<ChannelSession<Protocol>>(srv_, std::move(stream_), att.channel,
                                                         dir == "write");
    s->Accept(std::move(req));
  }

  Server::Impl& srv_;
  Stream stream_;
  beast::flat_buffer buf_;
  std::optional<http::request_parser<http::empty_body>> hp_;
  std::optional<http::request_parser<http::string_body>> bp_;
  std::map<std::string, std::string> query_;
  RouteMatch route_;
  bool keep_alive_ = true;
  // download
  std::shared_ptr<Channel> dl_ch_;
  std::shared_ptr<std::optional<Error>> dl_failure_;
  std::optional<http::response<http::empty_body>> dl_res_;
  std::optional<http::response_serializer<http::empty_body>> dl_sr_;
  bool dl_header_sent_ = false;
  // upload
  std::shared_ptr<Channel> up_ch_;
  std::optional<http::request_parser<http::buffer_body>> up_parser_;
  std::vector<char> up_buf_;
  std::optional<Result<json>> up_result_;
  bool up_done_ = false;
  bool up_answered_ = false;
  bool up_reading_ = false;
  bool no_drain_ = false;
  bool close_after_read_ = false;
};

template <class Acceptor, class Protocol>
void AcceptLoop(Server::Impl& srv, Acceptor& acc) {
  acc.async_accept([&srv, &acc](beast::error_code ec, typename Protocol::socket sock) {
    if (ec) {
      if (ec == net::error::operation_aborted || srv.stopping) return;
      SKIFF_LOG(Warn) << "accept: " << ec.message();
    } else {
      std::make_shared<HttpSession<Protocol>>(srv, std::move(sock))->Start();
    }
    if (!srv.stopping) AcceptLoop<Acceptor, Protocol>(srv, acc);
  });
}

// ============================================================ Server

Server::Server(SandboxManager& manager, Config config)
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
  if (s.tcp_acceptor) AcceptLoop<tcp::acceptor, tcp>(s, *s.tcp_acceptor);
  if (s.unix_acceptor) AcceptLoop<unix_sock::acceptor, unix_sock>(s, *s.unix_acceptor);
  s.ScheduleSweep();
  if (s.config.engine_url) {
    WorkerHooks hooks;
    hooks.call = [&s](const std::string& id, const json& payload) {
      // Channel references live on the engine in worker mode; skiffd does
      // not broker them itself (fs::read answers without `content`
      // streaming, streamed fs::write is refused).
      return s.Call(id, payload, nullptr);
    };
    hooks.error_body = [&s](const Error& e) { return s.ErrorBody(e); };
    hooks.run_blocking = [&s](std::function<void()> f) { net::post(s.pool, std::move(f)); };
    hooks.rejected = [&s]() {
      if (s.on_rejected) s.on_rejected();
    };
    s.worker = std::make_unique<WorkerLink>(s.ioc, *s.config.engine_url, std::move(hooks));
    s.worker->Start();
  }
  s.ioc.run();
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
  });
}

void Server::OnRegistrationRejected(std::function<void()> f) { impl_->on_rejected = std::move(f); }

void Server::Stop() {
  StopAccepting();
  if (impl_->worker) impl_->worker->Stop();
  impl_->ioc.stop();
}

}  // namespace skiff::api
