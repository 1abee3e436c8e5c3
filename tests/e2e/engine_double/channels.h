// The engine double's data channels: the channel store behind the builtin
// engine::channels::create, and the sockets of the channel WebSocket endpoint
// `GET /ws/channels/{channel_id}?key=…&dir=read|write` that every listener
// serves. Copied from the iii engine at v0.23.0-rc.4 (engine/src/…):
// workers/worker/channels.rs (ChannelManager, StreamChannel, the TTL sweep),
// workers/worker/ws_handler.rs (channel_ws_upgrade, handle_channel_socket),
// workers/engine_fn/mod.rs create_channel and protocol.rs StreamChannelRef;
// the HTTP refusals are what the engine's axum 0.8.9 router and extractors
// answer. Everything here runs on the double's event loop; connection.h reads
// the upgrade request and hands a channel request over.
#pragma once

// Boost.Asio's headers use std::exchange without including <utility>.
#include <utility>

#include <time.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/text.h"
#include "builtins.h"
#include "rbac.h"

namespace skiff::e2e::engine_double {

// protocol.rs ChannelDirection (serde rename_all = "lowercase").
enum class ChannelDirection { kRead, kWrite };

// channels.rs ChannelItem: a writer's frame, text or binary as it came.
struct ChannelItem {
  bool text = false;
  std::string data;
};

// The bounded tokio mpsc channel of one StreamChannel (channels.rs
// create_channel: mpsc::channel(buffer_size)). At most `capacity` items wait
// in it; a send finds it full (the writer then holds its item and waits for
// room), or closed once the receiver is gone. Dropping the receiver drops
// what is queued; the reader sees the end once the sender is gone and the
// queue is empty. Waiters are woken through the event loop, as tokio wakes a
// task.
class ChannelPipe {
 public:
  enum class Sent { kQueued, kFull, kClosed };

  ChannelPipe(boost::asio::any_io_executor ex, size_t capacity) : ex_(std::move(ex)), capacity_(capacity) {}

  // Sender::send: fails once the receiver is gone, even with room left.
  Sent TrySend(ChannelItem& item) {
    if (!receiver_) return Sent::kClosed;
    if (queue_.size() >= capacity_) return Sent::kFull;
    queue_.push_back(std::move(item));
    Wake(on_item_);
    return Sent::kQueued;
  }
  // Receiver::recv: an item, or nullopt (then Ended() tells whether more may come).
  std::optional<ChannelItem> TryRecv() {
    if (queue_.empty()) return std::nullopt;
    ChannelItem item = std::move(queue_.front());
    queue_.pop_front();
    Wake(on_room_);
    return item;
  }
  // recv() returns None: no sender left and nothing queued.
  bool Ended() const { return !sender_ && queue_.empty(); }

  // `f` runs (once) when a slot frees up or the receiver goes.
  void WaitForRoom(std::function<void()> f) { on_room_ = std::move(f); }
  // `f` runs (once) when an item arrives or the sender goes.
  void WaitForItem(std::function<void()> f) { on_item_ = std::move(f); }

  void DropSender() {
    sender_ = false;
    Wake(on_item_);
  }
  void DropReceiver() {
    receiver_ = false;
    queue_.clear();
    Wake(on_room_);
  }

 private:
  void Wake(std::function<void()>& f) {
    if (f) boost::asio::post(ex_, std::exchange(f, nullptr));
  }

  boost::asio::any_io_executor ex_;
  const size_t capacity_;
  std::deque<ChannelItem> queue_;
  bool sender_ = true, receiver_ = true;
  std::function<void()> on_room_, on_item_;
};

// What the store knows of a channel socket, to drop it when the double goes.
// A socket lives while an operation of its own or a wait on its pipe holds it.
class ChannelSocketBase {
 public:
  virtual ~ChannelSocketBase() = default;
  virtual void Stop() = 0;
};

// An upgrade request on the channel endpoint, as the engine's router and
// channel_ws_upgrade judge it: refused with an HTTP response, or upgraded to
// serve one side of a channel.
struct ChannelRequest {
  std::optional<boost::beast::http::response<boost::beast::http::string_body>> refusal;
  std::string channel_id, access_key;
  ChannelDirection dir = ChannelDirection::kRead;
};

// A frame read is limited like the engine's socket (axum's WebSocketConfig
// default: 64 MiB messages).
inline constexpr size_t kChannelMessageMax = 64u << 20;
// ws_handler.rs: after a writer's Close, what it sent before is drained for
// at most 10 ms.
inline constexpr std::chrono::milliseconds kChannelCloseDrain{10};

// One channel WebSocket after the upgrade (ws_handler.rs
// handle_channel_socket), over plain TCP or TLS.
//  - A side already taken (or a channel gone since the upgrade was granted)
//    gets Close (no code), then the socket is dropped.
//  - Write: each text or binary frame is sent into the pipe; while the pipe is
//    full the socket is not read (backpressure). A Close from the client, a
//    read error or the connection ending all end it the same way: the sender
//    is dropped, so the reader cannot tell them apart. When a send fails
//    because the reader is gone, the socket is dropped without a Close.
//  - Read: items go out in order, each as the frame it came as; when the
//    writer is gone and the queue is empty, Close (no code), then the socket
//    is dropped. The socket is never read (the engine only sends on it), so a
//    reader that leaves is noticed only when a send to it fails; the receiver
//    is then dropped, and with it what was queued.
template <class NextLayer>
class ChannelSocket final : public ChannelSocketBase,
                            public std::enable_shared_from_this<ChannelSocket<NextLayer>> {
 public:
  using Ws = boost::beast::websocket::stream<NextLayer>;

  // `pipe` null: the side was already taken (take_sender / take_receiver
  // returned None).
  ChannelSocket(Ws ws, ChannelDirection dir, std::shared_ptr<ChannelPipe> pipe)
      : ws_(std::move(ws)), drain_(ws_.get_executor()), dir_(dir), pipe_(std::move(pipe)) {}

  void Start() {
    ws_.auto_fragment(false);  // a frame goes out whole, as tungstenite sends it
    ws_.read_message_max(kChannelMessageMax);
    if (!pipe_) return CloseAndDrop();  // "channel sender/receiver already taken or missing"
    if (dir_ == ChannelDirection::kRead) return Pump();
    std::weak_ptr<ChannelSocket> w = this->shared_from_this();
    // The writer's Close: Beast answers it and reads nothing after it (as
    // tungstenite does: the drain's read flushes the answer, then gets an
    // error or the end, never a frame), then waits for the client to end the
    // connection; the engine waits at most the 10 ms drain. (The answer
    // differs in one detail: tungstenite echoes the Close frame as it came,
    // Beast echoes its code only, and answers a Close without one with 1000.)
    ws_.control_callback([w](boost::beast::websocket::frame_type kind, boost::beast::string_view) {
      auto s = w.lock();
      if (!s || kind != boost::beast::websocket::frame_type::close) return;
      s->drain_.expires_after(kChannelCloseDrain);
      s->drain_.async_wait([w](boost::beast::error_code ec) {
        if (auto s = w.lock(); s && !ec) s->EndWriter();
      });
    });
    Read();
  }

  // Drops the connection.
  void Abort() {
    boost::beast::error_code ec;
    boost::beast::get_lowest_layer(ws_).socket().close(ec);
    drain_.cancel();
  }
  // The double goes: forget the wait on the pipe (it holds this socket).
  void Stop() override {
    Abort();
    if (!pipe_) return;
    if (dir_ == ChannelDirection::kWrite) {
      pipe_->WaitForRoom(nullptr);
    } else {
      pipe_->WaitForItem(nullptr);
    }
  }

 private:
  // --- write side: client → pipe.
  void Read() {
    auto self = this->shared_from_this();
    ws_.async_read(in_, [self](boost::beast::error_code ec, size_t) {
      if (ec) return self->EndWriter();  // Close, error or end: all the same
      ChannelItem item{self->ws_.got_text(), boost::beast::buffers_to_string(self->in_.data())};
      self->in_.consume(self->in_.size());
      self->Offer(std::move(item));
    });
  }
  // tx.send(item).await: queued → read on; full → hold it and stop reading
  // until there is room; failed (receiver dropped) → "aborting".
  void Offer(ChannelItem item) {
    if (done_) return;
    switch (pipe_->TrySend(item)) {
      case ChannelPipe::Sent::kQueued:
        return Read();
      case ChannelPipe::Sent::kFull: {
        held_ = std::move(item);
        pipe_->WaitForRoom([s = this->shared_from_this()] {
          if (s->held_) s->Offer(*std::exchange(s->held_, std::nullopt));
        });
        return;
      }
      case ChannelPipe::Sent::kClosed:
        return EndWriter();
    }
  }
  // "Write: stream complete, dropping sender": the handler returns, the
  // sender and the socket are dropped.
  void EndWriter() {
    if (done_) return;
    done_ = true;
    held_.reset();
    pipe_->DropSender();
    pipe_.reset();
    Abort();
  }

  // --- read side: pipe → client.
  void Pump() {
    if (done_ || writing_) return;
    if (auto item = pipe_->TryRecv()) {
      out_ = std::move(*item);
      writing_ = true;
      ws_.text(out_.text);
      auto self = this->shared_from_this();
      ws_.async_write(boost::asio::buffer(out_.data), [self](boost::beast::error_code ec, size_t) {
        self->writing_ = false;
        if (ec) return self->CloseAndDrop();  // "Read: WS send failed, aborting"
        self->Pump();
      });
      return;
    }
    if (pipe_->Ended()) return CloseAndDrop();  // "Read: stream complete, sending WS close"
    pipe_->WaitForItem([s = this->shared_from_this()] { s->Pump(); });
  }

  // socket.send(Message::Close(None)), then the socket is dropped (no wait
  // for the client's answer); a reader's receiver goes with it.
  void CloseAndDrop() {
    if (done_) return;
    done_ = true;
    static constexpr unsigned char kClose[] = {0x88, 0x00};  // FIN + Close, no payload, unmasked
    auto self = this->shared_from_this();
    boost::asio::async_write(ws_.next_layer(), boost::asio::buffer(kClose),
                             [self](boost::beast::error_code, size_t) {
                               self->Abort();
                               if (self->pipe_) self->pipe_->DropReceiver();
                               self->pipe_.reset();
                             });
  }

  Ws ws_;
  boost::asio::steady_timer drain_;
  const ChannelDirection dir_;
  std::shared_ptr<ChannelPipe> pipe_;
  boost::beast::flat_buffer in_;
  std::optional<ChannelItem> held_;  // a writer's item waiting for room
  ChannelItem out_;                  // the item being sent to the reader
  bool writing_ = false, done_ = false;
};

// channels.rs ChannelManager: channels by id, each with its access key, its
// pipe's two ends until a socket takes them, and its creation time for the
// TTL sweep.
class ChannelStore : public std::enable_shared_from_this<ChannelStore> {
 public:
  using json = nlohmann::json;
  using Clock = std::chrono::steady_clock;
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  using Response = boost::beast::http::response<boost::beast::http::string_body>;

  // `ttl`: channels.rs CHANNEL_TTL (5 min); `sweep_interval`: how often
  // start_sweep_task runs sweep_stale_channels (60 s).
  ChannelStore(boost::asio::any_io_executor ex, std::chrono::milliseconds ttl,
               std::chrono::milliseconds sweep_interval)
      : ex_(ex), sweep_(ex), ttl_(ttl), sweep_interval_(sweep_interval) {}

  // Starts the sweep (channels.rs start_sweep_task).
  void Start() { ArmSweep(); }
  // The double goes: no more sweeps, every channel socket dropped.
  void Stop() {
    sweep_.cancel();
    for (auto& w : sockets_) {
      if (auto s = w.lock()) s->Stop();
    }
    sockets_.clear();
  }

  // engine_fn/mod.rs create_channel: input CreateChannelInput {buffer_size?}
  // (serde_json::from_value; a bad input answers deserialization_error as
  // function-macros/src/lib.rs does), buffer_size.unwrap_or(64).min(1024),
  // then create_channel's .max(1); owner None, so the channel outlives the
  // worker that asked for it (only remove_channels_by_worker, for channels
  // with an owner, ties a channel to a worker). Answers CreateChannelOutput
  // {writer, reader}, two StreamChannelRef with one id and one access key.
  BuiltinAnswer Create(const json& in) {
    auto fail = [](const std::string& why) {
      return BuiltinAnswer{std::nullopt,
                           ErrorBody("deserialization_error",
                                     "Failed to deserialize input for engine::channels::create: " + why)};
    };
    // serde_json reads a struct from a map, or from a sequence by position
    // (a missing element takes the field's #[serde(default)]).
    json buffer_size;
    if (in.is_object()) {
      buffer_size = in.value("buffer_size", json());
    } else if (in.is_array()) {
      if (in.size() > 1)
        return fail("invalid length " + std::to_string(in.size()) + ", expected fewer elements in array");
      if (!in.empty()) buffer_size = in[0];
    } else {
      return fail(SerdeInvalidType(in, "struct CreateChannelInput"));
    }
    uint64_t size = 64;
    if (buffer_size.is_number_unsigned() ||
        (buffer_size.is_number_integer() && buffer_size.get<int64_t>() >= 0)) {
      size = buffer_size.get<uint64_t>();
    } else if (buffer_size.is_number_integer()) {
      return fail("invalid value: integer `" + buffer_size.dump() + "`, expected usize");
    } else if (!buffer_size.is_null()) {
      return fail(SerdeInvalidType(buffer_size, "usize"));
    }
    size = std::max<uint64_t>(std::min<uint64_t>(size, 1024), 1);

    Channel ch;
    ch.access_key = skiff::NewUuid();
    ch.created_at = Clock::now();
    ch.pipe = std::make_shared<ChannelPipe>(ex_, size);
    std::string id = skiff::NewUuid();
    json writer{{"channel_id", id}, {"access_key", ch.access_key}, {"direction", "write"}};
    json reader{{"channel_id", id}, {"access_key", ch.access_key}, {"direction", "read"}};
    channels_.emplace(std::move(id), std::move(ch));
    return BuiltinAnswer{json{{"writer", std::move(writer)}, {"reader", std::move(reader)}}, std::nullopt};
  }

  // Channels the store holds (for tests).
  size_t size() const { return channels_.size(); }

  // Whether `target` is for the channel endpoint (workers/worker/mod.rs
  // route "/ws/channels/{channel_id}"); Check says whether it matches.
  static bool IsChannelTarget(std::string_view target) {
    std::string_view path = target.substr(0, target.find('?'));
    return path == "/ws/channels" || path.starts_with("/ws/channels/");
  }

  // What the engine answers an upgrade request on the channel endpoint, in
  // the order its router runs: the route's path (no match: axum's fallback,
  // a bare 404), its method (`get` serves GET and HEAD; others a bare 405
  // with Allow), then channel_ws_upgrade's extractors in argument order —
  // Path, Query<ChannelQuery> (a 400 naming serde's error), WebSocketUpgrade
  // (axum's own refusals) — then the handler: get_channel by id and key, a
  // miss answered 404 "Channel not found" before any upgrade.
  ChannelRequest Check(const Request& req) const {
    namespace http = boost::beast::http;
    ChannelRequest out;
    std::string_view target(req.target().data(), req.target().size());
    size_t q = target.find('?');
    std::string_view path = target.substr(0, q);
    std::string_view query = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
    std::string_view segment = path.starts_with("/ws/channels/") ? path.substr(13) : std::string_view();
    if (segment.empty() || segment.find('/') != std::string_view::npos) {
      out.refusal = Answer(req, http::status::not_found, "");
      return out;
    }
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      out.refusal = Answer(req, http::status::method_not_allowed, "");
      out.refusal->set(http::field::allow, "GET,HEAD");
      return out;
    }
    out.channel_id = FormDecode(segment, false);  // Path<String>: percent-decoded
    if (auto error = ParseQuery(query, out)) {
      out.refusal = Answer(req, http::status::bad_request, "Failed to deserialize query string: " + *error);
      return out;
    }
    if (auto refusal = UpgradeRefusal(req)) {
      out.refusal = std::move(refusal);
      return out;
    }
    auto it = channels_.find(out.channel_id);
    if (it == channels_.end() || it->second.access_key != out.access_key) {
      out.refusal = Answer(req, http::status::not_found, "Channel not found");
    }
    return out;
  }

  // After the upgrade: take the side `r` asks for (take_sender /
  // take_receiver, by id and key again) and serve it on `ws`.
  template <class NextLayer>
  void Serve(boost::beast::websocket::stream<NextLayer> ws, const ChannelRequest& r) {
    std::shared_ptr<ChannelPipe> pipe;
    auto it = channels_.find(r.channel_id);
    if (it != channels_.end() && it->second.access_key == r.access_key) {
      bool& here = r.dir == ChannelDirection::kWrite ? it->second.tx_here : it->second.rx_here;
      if (here) pipe = it->second.pipe;
      here = false;
    }
    auto s = std::make_shared<ChannelSocket<NextLayer>>(std::move(ws), r.dir, std::move(pipe));
    std::erase_if(sockets_, [](const std::weak_ptr<ChannelSocketBase>& w) { return w.expired(); });
    sockets_.push_back(s);
    s->Start();
  }

 private:
  // channels.rs StreamChannel: `tx_here` / `rx_here` while tx / rx are still
  // Some (not taken by a socket). A channel whose both ends were taken stays
  // until the double goes: neither the socket handler nor the sweep removes
  // it (only the HTTP trigger's channels are removed, by rest_api/views.rs),
  // so a later request for it is upgraded, then closed.
  struct Channel {
    std::string access_key;
    Clock::time_point created_at;
    std::shared_ptr<ChannelPipe> pipe;
    bool tx_here = true, rx_here = true;
  };

  // channels.rs sweep_stale_channels, every sweep_interval: a channel older
  // than the TTL with an end nobody took is removed. Removing it drops the
  // ends it still holds: a reader already attached then sees the writer gone
  // (Close), a writer already attached fails its next send (dropped).
  void ArmSweep() {
    std::weak_ptr<ChannelStore> w = shared_from_this();
    sweep_.expires_after(sweep_interval_);
    sweep_.async_wait([w](boost::beast::error_code ec) {
      auto s = w.lock();
      if (ec || !s) return;
      s->Sweep();
      s->ArmSweep();
    });
  }
  void Sweep() {
    const auto now = Clock::now();
    for (auto it = channels_.begin(); it != channels_.end();) {
      Channel& ch = it->second;
      if (now - ch.created_at > ttl_ && (ch.tx_here || ch.rx_here)) {
        if (ch.tx_here) ch.pipe->DropSender();
        if (ch.rx_here) ch.pipe->DropReceiver();
        it = channels_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // ws_handler.rs ChannelQuery {key: String, dir: ChannelDirection} through
  // axum's Query: form_urlencoded pairs ('+' is a space, %XX decoded, bad
  // escapes kept), unknown names ignored, a repeated field refused, missing
  // fields reported in declaration order; serde_path_to_error prefixes an
  // error inside a field's value with the field's name. Returns the error.
  static std::optional<std::string> ParseQuery(std::string_view query, ChannelRequest& out) {
    bool have_key = false, have_dir = false;
    while (!query.empty()) {
      size_t amp = query.find('&');
      std::string_view pair = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
      if (pair.empty()) continue;
      size_t eq = pair.find('=');
      std::string name = FormDecode(pair.substr(0, eq), true);
      std::string value = eq == std::string_view::npos ? "" : FormDecode(pair.substr(eq + 1), true);
      if (name == "key") {
        if (have_key) return "duplicate field `key`";
        have_key = true;
        out.access_key = std::move(value);
      } else if (name == "dir") {
        if (have_dir) return "duplicate field `dir`";
        have_dir = true;
        if (value == "read") {
          out.dir = ChannelDirection::kRead;
        } else if (value == "write") {
          out.dir = ChannelDirection::kWrite;
        } else {
          return "dir: unknown variant `" + value + "`, expected `read` or `write`";
        }
      }
    }
    if (!have_key) return "missing field `key`";
    if (!have_dir) return "missing field `dir`";
    return std::nullopt;
  }

  // axum's WebSocketUpgrade extractor (extract/ws.rs from_request_parts), for
  // HTTP/1.x: GET, `Connection` containing "upgrade", `Upgrade` equal to
  // "websocket", a `Sec-WebSocket-Key`, `Sec-WebSocket-Version` equal to 13
  // (case-insensitive, first value of each header).
  static std::optional<Response> UpgradeRefusal(const Request& req) {
    namespace http = boost::beast::http;
    auto header = [&](http::field f) -> std::optional<std::string> {
      auto it = req.find(f);
      if (it == req.end()) return std::nullopt;
      std::string v(it->value().data(), it->value().size());
      for (auto& ch : v) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      return v;
    };
    if (req.method() != http::verb::get) {
      return Answer(req, http::status::method_not_allowed, "Request method must be `GET`");
    }
    auto connection = header(http::field::connection);
    if (!connection || connection->find("upgrade") == std::string::npos) {
      return Answer(req, http::status::bad_request, "Connection header did not include 'upgrade'");
    }
    if (header(http::field::upgrade) != "websocket") {
      return Answer(req, http::status::bad_request, "`Upgrade` header did not include 'websocket'");
    }
    if (!header(http::field::sec_websocket_key)) {
      return Answer(req, http::status::bad_request, "`Sec-WebSocket-Key` header missing");
    }
    if (header(http::field::sec_websocket_version) != "13") {
      return Answer(req, http::status::bad_request, "`Sec-WebSocket-Version` header did not include '13'");
    }
    return std::nullopt;
  }

  // An axum response: a text body (text/plain; charset=utf-8) or none, a
  // content-length, hyper's date header; kept alive as the request allows.
  // A HEAD answer has the length but no body.
  static Response Answer(const Request& req, boost::beast::http::status status, const std::string& body) {
    namespace http = boost::beast::http;
    Response res{status, req.version()};
    if (!body.empty()) res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.body() = body;
    res.prepare_payload();
    if (req.method() == http::verb::head) res.body().clear();
    char date[64];
    time_t now = ::time(nullptr);
    struct tm tm;
    ::gmtime_r(&now, &tm);
    ::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    res.set(http::field::date, date);
    res.keep_alive(req.keep_alive());
    return res;
  }

  // Percent-decoding as the url crates do it: %XX decoded, a malformed escape
  // kept as it is; with `plus_is_space` (form encoding) '+' is a space.
  static std::string FormDecode(std::string_view in, bool plus_is_space) {
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    std::string out;
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i] == '%' && i + 2 < in.size() && hex(in[i + 1]) >= 0 && hex(in[i + 2]) >= 0) {
        out.push_back(static_cast<char>(hex(in[i + 1]) * 16 + hex(in[i + 2])));
        i += 2;
      } else if (plus_is_space && in[i] == '+') {
        out.push_back(' ');
      } else {
        out.push_back(in[i]);
      }
    }
    return out;
  }

  boost::asio::any_io_executor ex_;
  boost::asio::steady_timer sweep_;
  const std::chrono::milliseconds ttl_, sweep_interval_;
  std::map<std::string, Channel> channels_;
  std::vector<std::weak_ptr<ChannelSocketBase>> sockets_;
};

}  // namespace skiff::e2e::engine_double
