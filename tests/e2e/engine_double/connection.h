// One worker WebSocket connection of the engine double: the I/O only (accept,
// read frames, an ordered write queue, close once the queue is flushed) plus
// the per-connection state the engine keeps for a worker (engine/src/
// worker_connections/mod.rs WorkerConnection and the namespace resolution
// state of engine/src/engine/mod.rs). What a frame means is decided by the
// double (engine_double.h); everything here runs on the double's event loop.
#pragma once

// Boost.Asio's headers use std::exchange without including <utility>.
#include <utility>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

namespace skiff::e2e::engine_double {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using json = nlohmann::json;
  using Ptr = std::shared_ptr<Connection>;
  struct Handlers {
    std::function<void(const Ptr&)> on_open;                       // WebSocket handshake done
    std::function<void(const Ptr&, const std::string&)> on_frame;  // one text or binary frame
    std::function<void(const Ptr&)> on_close;                      // read side ended (once)
  };

  Connection(boost::asio::ip::tcp::socket s, int index, Handlers h)
      : grace(s.get_executor()), index(index), ws_(std::move(s)), handlers_(std::move(h)) {
    boost::beast::error_code ec;
    auto ep = boost::beast::get_lowest_layer(ws_).socket().remote_endpoint(ec);
    if (!ec) ip_address = ep.address().to_string();
  }

  void Start() {
    ws_.read_message_max(64u << 20);
    auto self = shared_from_this();
    // The upgrade request first, for its path: the SDKs open a second
    // WebSocket on /otel for telemetry only, which the engine serves apart
    // (workers/worker/mod.rs route "/otel" → mod.rs handle_otel) and never
    // counts as a worker.
    boost::beast::http::async_read(boost::beast::get_lowest_layer(ws_), in_, req_,
                                   [self](boost::beast::error_code ec, size_t) {
                                     if (ec) return;
                                     self->otel = self->req_.target().starts_with("/otel");
                                     self->ws_.async_accept(self->req_, [self](boost::beast::error_code ec) {
                                       if (ec) return;
                                       self->open_ = true;
                                       if (!self->otel && self->handlers_.on_open)
                                         self->handlers_.on_open(self);
                                       self->Read();
                                       if (!self->out_.empty() && !self->writing_) self->Write();
                                     });
                                   });
  }

  // Queues a text frame; frames go out in the order they were queued.
  void Send(const json& m) { Send(m.dump()); }
  void Send(std::string s) {
    if (closing_) return;
    out_.push_back(std::move(s));
    if (open_ && !writing_) Write();
  }
  // Sends what is queued, then a Close frame (mod.rs reject_worker_registration
  // sends the RegistrationRejected, then Close).
  void CloseAfterFlush() {
    if (closing_) return;
    closing_ = true;
    if (open_ && !writing_) Write();
  }
  // Drops the TCP connection at once (the engine going away).
  void Abort() {
    boost::beast::error_code ec;
    boost::beast::get_lowest_layer(ws_).socket().close(ec);
    grace.cancel();
  }

  // --- per-worker state the engine keeps (read and written by the double).
  boost::asio::steady_timer grace;  // mod.rs begin_namespace_resolution
  const int index;                  // 0, 1, … in accept order
  bool otel = false;                // a telemetry connection, not a worker
  std::string worker_id, reattach_token, ip_address;
  uint64_t connected_at_ms = 0;
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

 private:
  void Read() {
    auto self = shared_from_this();
    ws_.async_read(in_, [self](boost::beast::error_code ec, size_t) {
      if (ec) {
        self->open_ = false;
        if (!self->closed_) {
          self->closed_ = true;
          if (!self->otel && self->handlers_.on_close) self->handlers_.on_close(self);
        }
        return;
      }
      std::string s = boost::beast::buffers_to_string(self->in_.data());
      self->in_.consume(self->in_.size());
      if (!self->otel && self->handlers_.on_frame) self->handlers_.on_frame(self, s);
      self->Read();
    });
  }

  void Write() {
    auto self = shared_from_this();
    if (out_.empty()) {
      writing_ = false;
      if (closing_ && open_) {
        writing_ = true;  // nothing may be written after the Close frame
        ws_.async_close(boost::beast::websocket::close_code::normal, [self](boost::beast::error_code) {});
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

  boost::beast::websocket::stream<boost::beast::tcp_stream> ws_;
  boost::beast::flat_buffer in_;
  boost::beast::http::request<boost::beast::http::string_body> req_;
  std::deque<std::string> out_;
  bool writing_ = false, open_ = false, closing_ = false, closed_ = false;
  Handlers handlers_;
};

}  // namespace skiff::e2e::engine_double
