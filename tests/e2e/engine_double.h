// A test double of the iii engine, written from the message shapes of the
// skiff spec (docs/architecture.md#transports-and-their-limits,
// docs/architecture.md#transports-and-their-limits) and checked against what the iii-sdk (npm, the version
// pinned in tests/e2e/node) sends and accepts. It is not the iii engine: it only accepts worker connections
// on "/", greets each with `workerregistered`, records every frame the worker sends, lets a test push engine
// → worker frames (`invokefunction`, `ping`, …), and can reject a function registration or drop connection
// attempts to simulate an engine that is restarting.
#pragma once

#include <fcntl.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace skiff::e2e {

struct EngineDoubleOptions {
  uint16_t port = 0;               // 0 = any free loopback port
  int drop_first = 0;              // close this many TCP connections at once
  std::string reject_function_id;  // answer its registerfunction with registrationrejected
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
  explicit EngineDouble(Options o) : opt_(std::move(o)), acceptor_(ioc_) {
    namespace net = boost::asio;
    net::ip::tcp::endpoint ep(net::ip::make_address("127.0.0.1"), opt_.port);
    acceptor_.open(ep.protocol());
    // The daemon under test is forked later: it must not inherit the listener.
    ::fcntl(acceptor_.native_handle(), F_SETFD, FD_CLOEXEC);
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    Accept();
    thread_ = std::thread([this] { ioc_.run(); });
  }

  // The engine "goes away": listener and every connection closed abruptly.
  ~EngineDouble() {
    boost::asio::post(ioc_, [this] {
      boost::beast::error_code ec;
      acceptor_.close(ec);
      for (auto& c : conns_) boost::beast::get_lowest_layer(c->ws).socket().close(ec);
      ioc_.stop();
    });
    thread_.join();
  }

  uint16_t port() const { return port_; }
  std::string url() const { return "ws://127.0.0.1:" + std::to_string(port_); }

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
  void Send(const json& m) {
    boost::asio::post(ioc_, [this, s = m.dump()]() mutable {
      if (!conns_.empty()) conns_.back()->Send(std::move(s));
    });
  }
  // engine → worker invokefunction, in the shape the iii engine forwards
  // a caller's trigger (the caller's id rides in data._caller_worker_id).
  void Invoke(const json& invocation_id, const std::string& function_id, json data) {
    data["_caller_worker_id"] = "caller-worker";
    Send({{"type", "invokefunction"},
          {"invocation_id", invocation_id},
          {"function_id", function_id},
          {"data", std::move(data)},
          {"metadata", nullptr},
          {"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
          {"baggage", ""}});
  }

 private:
  struct Conn : std::enable_shared_from_this<Conn> {
    Conn(EngineDouble& e, boost::asio::ip::tcp::socket s, int i) : eng(e), ws(std::move(s)), index(i) {}
    EngineDouble& eng;
    boost::beast::websocket::stream<boost::beast::tcp_stream> ws;
    boost::beast::flat_buffer in;
    std::deque<std::string> out;
    bool writing = false, open = false;
    int index;

    void Start() {
      ws.read_message_max(64u << 20);
      auto self = shared_from_this();
      ws.async_accept([self](boost::beast::error_code ec) {
        if (ec) return;
        self->open = true;
        self->Send(json{{"type", "workerregistered"},
                        {"worker_id", "worker-" + std::to_string(self->index)},
                        {"reattach_token", "token-" + std::to_string(self->index)}}
                       .dump());
        self->Read();
      });
    }
    void Read() {
      auto self = shared_from_this();
      ws.async_read(in, [self](boost::beast::error_code ec, size_t) {
        if (ec) return;
        std::string s = boost::beast::buffers_to_string(self->in.data());
        self->in.consume(self->in.size());
        json m = json::parse(s, nullptr, false);
        self->eng.Record(self->index, m);
        if (m.is_object() && m.value("type", "") == "registerfunction" &&
            !self->eng.opt_.reject_function_id.empty() &&
            m.value("id", "") == self->eng.opt_.reject_function_id) {
          self->Send(json{{"type", "registrationrejected"},
                          {"code", "FUNCTION_NAMESPACE_CONFLICT"},
                          {"namespace", "default"},
                          {"function_id", m["id"]},
                          {"owner_worker_id", "another-iii-sandbox"}}
                         .dump());
        }
        self->Read();
      });
    }
    void Send(std::string s) {
      out.push_back(std::move(s));
      if (!writing && open) Write();
    }
    void Write() {
      if (out.empty()) {
        writing = false;
        return;
      }
      writing = true;
      ws.text(true);
      auto self = shared_from_this();
      ws.async_write(boost::asio::buffer(out.front()), [self](boost::beast::error_code ec, size_t) {
        self->out.pop_front();
        if (ec) {
          self->out.clear();
          self->writing = false;
          return;
        }
        self->Write();
      });
    }
  };

  void Record(int conn, json m) {
    {
      std::lock_guard<std::mutex> l(mu_);
      got_.push_back({conn, std::move(m)});
    }
    cv_.notify_all();
  }

  void Accept() {
    acceptor_.async_accept([this](boost::beast::error_code ec, boost::asio::ip::tcp::socket s) {
      if (ec) return;
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
        auto c = std::make_shared<Conn>(*this, std::move(s), index);
        conns_.push_back(c);
        c->Start();
      }
      Accept();
    });
  }

  Options opt_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::thread thread_;
  std::vector<std::shared_ptr<Conn>> conns_;  // event-loop thread only
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Received> got_;
  std::vector<Clock::time_point> accept_times_;
  int ws_conns_ = 0, dropped_ = 0;
};

}  // namespace skiff::e2e
