#include "api/engine_socket.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <variant>

#include "base/version.h"

namespace skiff::api {

namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

namespace {
constexpr auto kStepTimeout = std::chrono::seconds(10);
using Plain = websocket::stream<beast::tcp_stream>;
using Tls = websocket::stream<beast::ssl_stream<beast::tcp_stream>>;
}  // namespace

struct EngineSocket::Impl : std::enable_shared_from_this<Impl> {
  Impl(const EngineLinkOptions& o, size_t max) : options(o), max_message(max) {}
  const EngineLinkOptions& options;
  size_t max_message;
  std::variant<std::unique_ptr<Plain>, std::unique_ptr<Tls>> ws;
  websocket::response_type upgrade_response;
  // The peer's close frame came (a read that ends after it is a clean end,
  // even when the TLS teardown that follows is cut short).
  bool close_received = false;
  std::function<void()> on_control;

  // Every control frame passes here: it records a close, then tells the owner.
  template <class Stream>
  void WatchControlFrames(Stream& s) {
    s.control_callback([this](websocket::frame_type kind, beast::string_view) {
      if (kind == websocket::frame_type::close) close_received = true;
      if (on_control) on_control();
    });
  }

  template <class F>
  void Visit(F&& f) {
    std::visit([&](auto& p) { f(*p); }, ws);
  }

  // Why OpenSSL did not trust the engine's certificate, when that was it.
  std::string VerifyFailure() {
    auto* tls = std::get_if<std::unique_ptr<Tls>>(&ws);
    if (!tls) return "";
    long r = SSL_get_verify_result((*tls)->next_layer().native_handle());
    if (r == X509_V_OK) return "";
    return std::string(" (certificate: ") + X509_verify_cert_error_string(r) + ")";
  }

  std::string HostHeader() const {
    const auto& u = options.parsed;
    std::string h = u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host;
    return h + ":" + u.port;
  }

  // Certificate and host name checks, and SNI for names (not for addresses).
  std::string PrepareTls(Tls& s) {
    SSL* ssl_handle = s.next_layer().native_handle();
    const std::string& host = options.parsed.host;
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl_handle);
    boost::system::error_code ec;
    net::ip::make_address(host, ec);
    if (!ec) {
      if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1)
        return "TLS: cannot check the address " + host;
    } else {
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      if (X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0) != 1)
        return "TLS: cannot check the name " + host;
      if (SSL_set_tlsext_host_name(ssl_handle, host.c_str()) != 1) return "TLS: cannot set SNI for " + host;
    }
    return "";
  }

  template <class Stream>
  void Upgrade(Stream& s, const std::string& target, Done done) {
    beast::get_lowest_layer(s).expires_never();
    auto opt = websocket::stream_base::timeout::suggested(beast::role_type::client);
    opt.handshake_timeout = kStepTimeout;
    s.set_option(opt);
    s.read_message_max(max_message);
    std::string token = options.token;
    s.set_option(websocket::stream_base::decorator([token](websocket::request_type& req) {
      req.set(beast::http::field::user_agent, std::string("skiff/") + SkiffVersion());
      if (!token.empty()) req.set(beast::http::field::authorization, "Bearer " + token);
    }));
    s.async_handshake(upgrade_response, HostHeader(), target.empty() ? options.parsed.path : target,
                      [keep = shared_from_this(), done = std::move(done)](beast::error_code ec) {
                        done(ec ? "WebSocket upgrade: " + ec.message() : "");
                      });
  }
};

EngineSocket::EngineSocket(net::io_context& ioc, const EngineLinkOptions& options, size_t max_message)
    : impl_(std::make_shared<Impl>(options, max_message)) {
  if (options.parsed.tls)
    impl_->ws = std::make_unique<Tls>(ioc, *options.tls);
  else
    impl_->ws = std::make_unique<Plain>(ioc);
  impl_->Visit([this](auto& s) { impl_->WatchControlFrames(s); });
}

EngineSocket::~EngineSocket() = default;

void EngineSocket::AsyncOpen(const tcp::resolver::results_type& endpoints, Done done, std::string target) {
  std::shared_ptr<Impl> impl = impl_;
  impl->Visit([&](auto& s) { beast::get_lowest_layer(s).expires_after(kStepTimeout); });
  auto connected = [impl, done = std::move(done), target = std::move(target)](beast::error_code ec,
                                                                              const tcp::endpoint&) mutable {
    if (ec) return done("connect: " + ec.message());
    // Calls are small frames each waiting for an answer: Nagle's delay
    // would hold every one behind the peer's delayed ACK (~40 ms).
    impl->Visit([](auto& s) {
      beast::error_code ignored;
      beast::get_lowest_layer(s).socket().set_option(tcp::no_delay(true), ignored);
    });
    if (auto* plain = std::get_if<std::unique_ptr<Plain>>(&impl->ws))
      return impl->Upgrade(**plain, target, std::move(done));
    Tls& s = *std::get<std::unique_ptr<Tls>>(impl->ws);
    if (auto why = impl->PrepareTls(s); !why.empty()) return done(why);
    s.next_layer().async_handshake(ssl::stream_base::client,
                                   [impl, &s, done = std::move(done), target](beast::error_code ec) mutable {
                                     if (ec)
                                       return done("TLS handshake: " + ec.message() + impl->VerifyFailure());
                                     impl->Upgrade(s, target, std::move(done));
                                   });
  };
  impl->Visit([&](auto& s) { beast::get_lowest_layer(s).async_connect(endpoints, std::move(connected)); });
}

void EngineSocket::AsyncWrite(const std::string& data, Io done, bool binary) {
  impl_->Visit([&](auto& s) {
    s.binary(binary);
    s.async_write(net::buffer(data), [keep = impl_, done = std::move(done)](beast::error_code ec, size_t n) {
      done(ec ? ec.message() : "", n);
    });
  });
}

void EngineSocket::AsyncRead(beast::flat_buffer& buffer, Io done) {
  impl_->Visit([&](auto& s) {
    s.async_read(buffer, [keep = impl_, done = std::move(done)](beast::error_code ec, size_t n) {
      if (ec == websocket::error::closed || (ec && keep->close_received)) return done("closed", n);
      done(ec ? ec.message() : "", n);
    });
  });
}

unsigned EngineSocket::upgrade_status() const { return impl_->upgrade_response.result_int(); }

bool EngineSocket::got_binary() const {
  bool b = false;
  impl_->Visit([&](auto& s) { b = s.got_binary(); });
  return b;
}

void EngineSocket::AsyncClose(Done done) {
  impl_->Visit([&](auto& s) {
    s.async_close(websocket::close_code::normal, [keep = impl_, done = std::move(done)](
                                                     beast::error_code ec) { done(ec ? ec.message() : ""); });
  });
}

void EngineSocket::AsyncPing() {
  impl_->Visit([this](auto& s) { s.async_ping({}, [keep = impl_](beast::error_code) {}); });
}

void EngineSocket::OnControlFrame(std::function<void()> seen) { impl_->on_control = std::move(seen); }

void EngineSocket::Close() {
  impl_->Visit([](auto& s) {
    beast::error_code ec;
    beast::get_lowest_layer(s).socket().close(ec);
  });
}

}  // namespace skiff::api
