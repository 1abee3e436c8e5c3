// Plumbing every WebSocket session shares: the upgrade, the frame limit and
// a serialized, bounded write queue on the event loop.
#pragma once

#include <algorithm>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <string>
#include <utility>

#include "api/server_impl.h"

namespace skiff::api {

// The names every session header uses.
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using json = nlohmann::json;

// Common plumbing: a serialized write queue on the event loop.
template <class Protocol>
class WsBase : public std::enable_shared_from_this<WsBase<Protocol>> {
 public:
  using Stream = beast::basic_stream<Protocol>;
  WsBase(Server::Impl& srv, Stream&& stream) : srv_(srv), ws_(std::move(stream)) {}
  virtual ~WsBase() = default;

  void Accept(http::request<http::empty_body> req) {
    beast::get_lowest_layer(ws_).expires_never();
    websocket::stream_base::timeout opt =
        websocket::stream_base::timeout::suggested(beast::role_type::server);
    opt.handshake_timeout = kHeaderDeadline;
    ws_.set_option(opt);
    ws_.read_message_max(kMaxPayloadBytes);
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& res) { res.set(http::field::server, "skiffd/" + Version()); }));
    auto self = this->shared_from_this();
    ws_.async_accept(req, [self](beast::error_code ec) {
      if (ec) {
        SKIFF_LOG(Debug) << "ws: handshake failed: " << ec.message();
        return;
      }
      self->OnOpen();
    });
  }

  // The connection's place under max_connections, handed over by the HTTP
  // session that upgraded.
  void Hold(ConnectionSlot slot) { slot_ = std::move(slot); }

  // Queue a frame (event-loop thread only).
  void Send(std::string data, bool binary = false) {
    if (closed_) return;
    out_bytes_ += data.size();
    if (out_bytes_ > kMaxWsOutBytes) {
      SKIFF_LOG_LIMITED(Warn) << "ws: client is not reading; closing the connection";
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
    ws_.async_write(net::buffer(out_.front().second), [self](beast::error_code ec, size_t n) {
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
  ConnectionSlot slot_;
};

}  // namespace skiff::api
