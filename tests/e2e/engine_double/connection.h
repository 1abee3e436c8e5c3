// One worker WebSocket connection of the engine double, over TCP or TLS: the
// I/O only (TLS handshake, upgrade, read frames, an ordered write queue, close
// once the queue is flushed) plus the per-connection state the engine keeps
// for a worker (engine/src/worker_connections/mod.rs WorkerConnection and the
// namespace resolution state of engine/src/engine/mod.rs). What a frame means
// is decided by the double (engine_double.h); everything here runs on the
// double's event loop. A request for the channel endpoint is answered or
// upgraded here and its socket handed over to the channel store (channels.h).
#pragma once

// Boost.Asio's headers use std::exchange without including <utility>.
#include <utility>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "channels.h"

namespace skiff::e2e::engine_double {

struct RbacConfig;  // rbac.h
struct Session;

// The transport-independent part: the ordered write queue, the handlers and
// the per-worker state. WsConnection below does the I/O over plain TCP or TLS.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using json = nlohmann::json;
  using Ptr = std::shared_ptr<Connection>;
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  struct Handlers {
    // WebSocket handshake done (worker and /otel connections alike). No frame
    // is read until the double calls StartReading: the engine authenticates a
    // connection before its read loop starts (mod.rs handle_worker).
    std::function<void(const Ptr&)> on_open;
    std::function<void(const Ptr&, const std::string&)> on_frame;  // one text or binary frame (workers only)
    std::function<void(const Ptr&)> on_close;                      // read side ended (once; workers only)
  };

  Connection(const boost::asio::any_io_executor& ex, int index, std::string ip, Handlers h)
      : grace(ex), index(index), ip_address(std::move(ip)), handlers_(std::move(h)) {}
  virtual ~Connection() = default;

  virtual void Start() = 0;
  // Drops the TCP connection at once (the engine going away).
  virtual void Abort() = 0;

  // Queues a text frame; frames go out in the order they were queued.
  void Send(const json& m) { Send(m.dump()); }
  void Send(std::string s) {
    if (closing_) return;
    out_.push_back(std::move(s));
    if (open_ && !writing_) Write();
  }
  // Sends what is queued, then a Close frame: with code 1000 (mod.rs
  // reject_worker_registration sends the RegistrationRejected, then Close),
  // or with no code (`Close(None)`, an authentication refusal).
  void CloseAfterFlush(bool normal = true) {
    if (closing_) return;
    closing_ = true;
    close_normal_ = normal;
    if (open_ && !writing_) Write();
  }
  // Starts handing frames to on_frame (once).
  void StartReading() {
    if (reading_ || !open_) return;
    reading_ = true;
    Read();
  }
  // The WebSocket upgrade request (path, headers).
  const Request& request() const { return req_; }

  // --- per-worker state the engine keeps (read and written by the double).
  boost::asio::steady_timer grace;  // mod.rs begin_namespace_resolution
  const int index;                  // 0, 1, … in accept order
  bool otel = false;                // a telemetry connection, not a worker
  // The channel store (null: no channel endpoint), and whether the request
  // went to the channel endpoint (workers/worker/mod.rs route
  // "/ws/channels/{channel_id}"): then it is never a worker, on any listener
  // (no authentication either: the access key is the credential).
  std::shared_ptr<ChannelStore> channels;
  bool channel = false;
  std::string worker_id, reattach_token, ip_address;
  uint64_t connected_at_ms = 0;
  // The `rbac` block of the listener it came on (null: none), and the session
  // it was granted (rbac_session.rs handle_session; null until then).
  std::shared_ptr<const RbacConfig> rbac;
  std::shared_ptr<const Session> session;
  // Namespace resolution (mod.rs NamespaceState): until `resolved`, the
  // registration frames wait in `held`, in arrival order.
  bool resolved = false;
  std::string ns = "default";
  std::deque<json> held;
  bool cleaned = false;               // cleanup_worker has run
  json metadata = json::object();     // what engine::workers::register declared
  std::string name_lease;             // the worker name it holds in `ns`, if any
  std::set<std::string> functions;    // function ids it registered (in `ns`)
  std::set<std::string> invocations;  // invocation ids in flight to or from it

 protected:
  virtual void Read() = 0;
  virtual void Write() = 0;

  // Upgrade accepted: frames queued so far may go out.
  void Opened() {
    open_ = true;
    if (handlers_.on_open) handlers_.on_open(shared_from_this());
    if ((!out_.empty() || closing_) && !writing_) Write();
  }
  // A frame arrived; the read side ended.
  void Received(const std::string& s) {
    if (!otel && handlers_.on_frame) handlers_.on_frame(shared_from_this(), s);
  }
  void Ended() {
    open_ = false;
    if (closed_) return;
    closed_ = true;
    if (!otel && handlers_.on_close) handlers_.on_close(shared_from_this());
  }

  Request req_;
  std::deque<std::string> out_;
  bool writing_ = false, open_ = false, closing_ = false, closed_ = false, reading_ = false;
  bool close_normal_ = true;
  Handlers handlers_;
};

// One connection's I/O over `NextLayer`: boost::beast::tcp_stream (ws://) or
// boost::beast::ssl_stream<tcp_stream> (wss://, the TLS handshake first).
template <class NextLayer>
class WsConnection final : public Connection {
 public:
  static constexpr bool kTls = !std::is_same_v<NextLayer, boost::beast::tcp_stream>;

  template <class... TlsArgs>
  WsConnection(boost::asio::ip::tcp::socket s, int index, Handlers h, TlsArgs&&... tls)
      : Connection(s.get_executor(), index, PeerIp(s), std::move(h)), ws_(std::move(s), tls...) {}

  void Start() override {
    ws_.read_message_max(64u << 20);
    auto self = Self();
    if constexpr (kTls) {
      ws_.next_layer().async_handshake(boost::asio::ssl::stream_base::server,
                                       [self](boost::beast::error_code ec) {
                                         if (ec) return self->Abort();  // not TLS, or not trusted
                                         self->ReadUpgrade();
                                       });
    } else {
      ReadUpgrade();
    }
  }

  void Abort() override {
    grace.cancel();
    if (handed_off_) return;  // the channel store owns the socket now
    boost::beast::error_code ec;
    boost::beast::get_lowest_layer(ws_).socket().close(ec);
  }

 private:
  static std::string PeerIp(const boost::asio::ip::tcp::socket& s) {
    boost::beast::error_code ec;
    auto ep = s.remote_endpoint(ec);
    return ec ? std::string() : ep.address().to_string();
  }
  std::shared_ptr<WsConnection> Self() { return std::static_pointer_cast<WsConnection>(shared_from_this()); }

  // The upgrade request first, for its path and headers: the SDKs open a
  // second WebSocket on /otel for telemetry only, which the engine serves
  // apart (workers/worker/mod.rs route "/otel" → mod.rs handle_otel) and never
  // counts as a worker; the headers go to the auth function.
  // A request for the channel endpoint goes to ServeChannel instead.
  void ReadUpgrade() {
    auto self = Self();
    req_ = {};
    boost::beast::http::async_read(ws_.next_layer(), in_, req_, [self](boost::beast::error_code ec, size_t) {
      if (ec) return self->Abort();
      std::string_view target(self->req_.target().data(), self->req_.target().size());
      self->channel = self->channels && ChannelStore::IsChannelTarget(target);
      if (self->channel) return self->ServeChannel();
      self->otel = target.starts_with("/otel");
      self->ws_.async_accept(self->req_, [self](boost::beast::error_code ec) {
        if (ec) return self->Abort();
        self->Opened();
      });
    });
  }

  // The channel endpoint (workers/worker/ws_handler.rs channel_ws_upgrade):
  // a refusal is a plain HTTP response, after which hyper keeps the
  // connection for a next request when the request allows it; otherwise the
  // upgrade, then the socket is the channel store's.
  void ServeChannel() {
    auto self = Self();
    auto r = std::make_shared<ChannelRequest>(channels->Check(req_));
    if (r->refusal) {
      boost::beast::http::async_write(ws_.next_layer(), *r->refusal,
                                      [self, r](boost::beast::error_code ec, size_t) {
                                        if (ec || !r->refusal->keep_alive()) return self->Abort();
                                        self->ReadUpgrade();
                                      });
      return;
    }
    ws_.async_accept(req_, [self, r](boost::beast::error_code ec) {
      if (ec) return self->Abort();
      self->handed_off_ = true;
      self->channels->Serve(std::move(self->ws_), *r);
    });
  }

  void Read() override {
    auto self = Self();
    ws_.async_read(in_, [self](boost::beast::error_code ec, size_t) {
      if (ec) return self->Ended();
      std::string s = boost::beast::buffers_to_string(self->in_.data());
      self->in_.consume(self->in_.size());
      self->Received(s);
      self->Read();
    });
  }

  void Write() override {
    auto self = Self();
    if (out_.empty()) {
      writing_ = false;
      if (closing_ && open_) {
        writing_ = true;  // nothing may be written after the Close frame
        boost::beast::websocket::close_reason why;
        if (close_normal_) why = boost::beast::websocket::close_code::normal;
        ws_.async_close(why, [self](boost::beast::error_code) {});
      }
      return;
    }
    writing_ = true;
    ws_.text(true);
    ws_.async_write(boost::asio::buffer(out_.front()), [self](boost::beast::error_code ec, size_t) {
      self->out_.pop_front();
      if (ec) {
        self->out_.clear();
        self->writing_ = false;
        return;
      }
      self->Write();
    });
  }

  boost::beast::websocket::stream<NextLayer> ws_;
  boost::beast::flat_buffer in_;
  bool handed_off_ = false;  // ws_ was moved to the channel store
};

}  // namespace skiff::e2e::engine_double
