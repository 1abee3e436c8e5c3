#include "cli/client.h"

#include <sys/stat.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

namespace skiff::cli {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Socket = net::generic::stream_protocol::socket;
using ErrorCode = boost::system::error_code;
using Clock = std::chrono::steady_clock;

constexpr auto kConnectTimeout = std::chrono::seconds(5);
constexpr size_t kChunk = size_t{64} * 1024;

Error Failed(const std::string& what) {
  return Error(Code::kS300, "platform failure: sandbox: daemon request failed: " + what);
}

// Where an endpoint's requests go: a unix socket, or host and port of an
// http:// URL, and the URL's path prefix.
struct Target {
  std::string unix_socket;
  std::string host;
  std::string port;
  std::string host_header;
  std::string prefix;
};

Result<Target> ParseTarget(const Endpoint& ep) {
  Target t;
  std::string url = ep.base_url;
  constexpr std::string_view kHttp = "http://";
  if (url.rfind(kHttp, 0) != 0) {
    return Error(Code::kS001,
                 "invalid request: daemon URL '" + url +
                     "': the daemon speaks plain HTTP (http://host:port, or unix:/path/to/socket)");
  }
  std::string rest = url.substr(kHttp.size());
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) t.prefix = rest.substr(slash);
  while (!t.prefix.empty() && t.prefix.back() == '/') t.prefix.pop_back();
  t.host_header = authority.empty() ? "localhost" : authority;
  t.unix_socket = ep.unix_socket;
  if (!t.unix_socket.empty()) return t;
  if (authority.empty()) return Error(Code::kS001, "invalid request: daemon URL '" + url + "' names no host");
  if (authority.front() == '[') {  // [v6]:port
    auto close = authority.find(']');
    if (close == std::string::npos) return Error(Code::kS001, "invalid request: daemon URL '" + url + "'");
    t.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':') t.port = authority.substr(close + 2);
  } else {
    auto colon = authority.rfind(':');
    t.host = authority.substr(0, colon);
    if (colon != std::string::npos) t.port = authority.substr(colon + 1);
  }
  if (t.port.empty()) t.port = "80";
  return t;
}

// One request on its own connection. Every operation is asynchronous and
// driven by Await, which wakes at least once a second: that is where a
// deadline or a caller's "stop" closes the socket, which ends the pending
// operation.
class Exchange {
 public:
  explicit Exchange(const Endpoint& ep) : ep_(ep) {}

  Status Connect(const Target& t) {
    ErrorCode ec;
    auto deadline = Clock::now() + kConnectTimeout;
    if (!t.unix_socket.empty()) {
      net::generic::stream_protocol::endpoint where{net::local::stream_protocol::endpoint(t.unix_socket)};
      ec = Run([&](auto done) { sock_.async_connect(where, std::move(done)); }, deadline);
      if (TimedOut()) return Failed("connecting to " + t.unix_socket + ": timed out");
      if (ec) return Failed("connecting to " + t.unix_socket + ": " + ec.message());
      return OkStatus();
    }
    net::ip::tcp::resolver resolver(ioc_);
    auto addrs = resolver.resolve(t.host, t.port, ec);
    if (ec) return Failed("resolving " + t.host + ": " + ec.message());
    ec = net::error::host_not_found;
    for (const auto& a : addrs) {
      ErrorCode close_ec;
      if (sock_.is_open()) sock_.close(close_ec);
      net::generic::stream_protocol::endpoint where(a.endpoint());
      ec = Run([&](auto done) { sock_.async_connect(where, std::move(done)); }, deadline);
      if (!ec) return OkStatus();
      if (TimedOut()) break;
    }
    std::string where = t.host + ":" + t.port;
    if (TimedOut()) return Failed("connecting to " + where + ": timed out");
    return Failed("connecting to " + where + ": " + ec.message());
  }

  template <class Request>
  void Prepare(Request& req, http::verb verb, const Target& t, const std::string& path) {
    req.method(verb);
    req.target(t.prefix + path);
    req.version(11);
    req.set(http::field::host, t.host_header);
    req.set(http::field::connection, "close");
    if (!ep_.token.empty()) req.set(http::field::authorization, "Bearer " + ep_.token);
  }

  // Writes a whole request held in memory.
  Status Write(http::request<http::string_body>& req) {
    req.prepare_payload();
    ErrorCode ec = Run([&](auto done) { http::async_write(sock_, req, std::move(done)); }, deadline_);
    if (ec) return Failed("sending the request: " + Why(ec));
    return OkStatus();
  }

  // Writes a request whose body is read from `in`: with its length when
  // `in` is a regular file, else chunked.
  Status WriteFrom(http::request<http::buffer_body>& req, std::FILE* in) {
    struct stat sb {};
    if (::fstat(::fileno(in), &sb) == 0 && S_ISREG(sb.st_mode))
      req.content_length(static_cast<uint64_t>(sb.st_size));
    else
      req.chunked(true);
    req.body().data = nullptr;
    req.body().more = true;
    http::request_serializer<http::buffer_body> sr(req);
    ErrorCode ec = Run([&](auto done) { http::async_write_header(sock_, sr, std::move(done)); }, deadline_);
    if (ec) return Failed("sending the request: " + Why(ec));
    std::unique_ptr<char[]> buf(new char[kChunk]);  // not zeroed: fread fills what is sent
    for (;;) {
      size_t n = std::fread(buf.get(), 1, kChunk, in);
      if (n == 0 && std::ferror(in)) return Failed("reading the file to send");
      req.body().data = n ? buf.get() : nullptr;
      req.body().size = n;
      req.body().more = n != 0;
      ec = Run([&](auto done) { http::async_write(sock_, sr, std::move(done)); }, deadline_);
      if (ec == http::error::need_buffer) ec = {};
      if (ec) return Failed("sending the request: " + Why(ec));
      if (n == 0) return OkStatus();
    }
  }

  // Reads the response's head into `parser_`.
  Status ReadHeader() {
    // No limit (a download is as large as the file). Not boost::none: Boost
    // 1.74 compares a length with an empty optional as larger than it.
    parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
    ErrorCode ec =
        Run([&](auto done) { http::async_read_header(sock_, buf_, parser_, std::move(done)); }, deadline_);
    if (ec) return Failed("reading the response: " + Why(ec));
    return OkStatus();
  }

  long StatusCode() const { return static_cast<long>(parser_.get().result_int()); }

  // Hands the body to `on_bytes` as it arrives; false from it ends the
  // read early (not an error).
  Status ReadBody(const std::function<bool(std::string_view)>& on_bytes) {
    // Not zeroed: 64 KiB of memset was 16 page faults for every answer,
    // most of them a few hundred bytes; only what arrives is touched.
    std::unique_ptr<char[]> chunk(new char[kChunk]);
    while (!parser_.is_done()) {
      parser_.get().body().data = chunk.get();
      parser_.get().body().size = kChunk;
      ErrorCode ec =
          Run([&](auto done) { http::async_read_some(sock_, buf_, parser_, std::move(done)); }, deadline_);
      if (ec == http::error::need_buffer) ec = {};
      size_t got = kChunk - parser_.get().body().size;
      if (got > 0 && !on_bytes(std::string_view(chunk.get(), got))) return OkStatus();
      if (stopped_) return OkStatus();
      if (ec) return Failed("reading the response: " + Why(ec));
    }
    return OkStatus();
  }

  void SetDeadline(Clock::time_point d) { deadline_ = d; }
  void SetKeepGoing(const std::function<bool()>* k) { keep_going_ = k; }

 private:
  // Starts one operation through `start`, which is handed the completion
  // handler to pass on, and waits for it (Await); returns its error.
  template <class Start>
  ErrorCode Run(Start&& start, std::optional<Clock::time_point> deadline) {
    ErrorCode ec;
    bool done = false;
    std::forward<Start>(start)([&](ErrorCode e, auto&&...) {
      ec = e;
      done = true;
    });
    Await(done, deadline);
    return ec;
  }

  // Runs the I/O until the pending operation's handler set `done`. Past
  // `deadline`, or when the caller's keep_going says stop (asked at most
  // once a second, also while nothing arrives), the socket is closed and the
  // operation ends with an error.
  void Await(bool& done, std::optional<Clock::time_point> deadline) {
    ioc_.restart();
    for (;;) {
      if (!done) ioc_.run_one_for(std::chrono::seconds(1));
      auto now = Clock::now();
      bool late = !done && deadline && now >= *deadline;
      bool stop = false;
      if (keep_going_ && *keep_going_ && now - last_asked_ >= std::chrono::seconds(1)) {
        last_asked_ = now;
        stop = !(*keep_going_)();
      }
      if ((late || stop) && sock_.is_open()) {
        timed_out_ = timed_out_ || late;
        stopped_ = stopped_ || stop;
        ErrorCode ignored;
        sock_.close(ignored);
      }
      if (done) return;
    }
  }
  bool TimedOut() const { return timed_out_; }
  std::string Why(const ErrorCode& ec) const {
    if (timed_out_) return "timed out";
    if (ec == http::error::end_of_stream || ec == net::error::eof) return "the daemon closed the connection";
    return ec.message();
  }

  const Endpoint& ep_;
  net::io_context ioc_{1};
  Socket sock_{ioc_};
  beast::flat_buffer buf_;
  http::response_parser<http::buffer_body> parser_;
  std::optional<Clock::time_point> deadline_;
  const std::function<bool()>* keep_going_ = nullptr;
  Clock::time_point last_asked_ = Clock::now();
  bool timed_out_ = false;
  bool stopped_ = false;
};

// Sends a request with an in-memory body and collects the whole answer.
Result<HttpResponse> Simple(const Endpoint& ep, http::verb verb, const std::string& path,
                            const std::string& body, std::optional<std::chrono::seconds> timeout) {
  SKIFF_ASSIGN_OR_RETURN(Target t, ParseTarget(ep));
  Exchange x(ep);
  if (timeout) x.SetDeadline(Clock::now() + *timeout);
  SKIFF_RETURN_IF_ERROR(x.Connect(t));
  http::request<http::string_body> req;
  x.Prepare(req, verb, t, path);
  if (verb == http::verb::post) req.set(http::field::content_type, "application/json");
  req.body() = body;
  SKIFF_RETURN_IF_ERROR(x.Write(req));
  SKIFF_RETURN_IF_ERROR(x.ReadHeader());
  HttpResponse resp;
  resp.status = x.StatusCode();
  SKIFF_RETURN_IF_ERROR(x.ReadBody([&](std::string_view b) {
    resp.body.append(b);
    return true;
  }));
  return resp;
}

}  // namespace

Result<HttpResponse> Client::Get(const std::string& path, long timeout_secs) {
  return Simple(ep_, http::verb::get, path, {}, std::chrono::seconds(timeout_secs));
}

Result<HttpResponse> Client::Post(const std::string& path, const std::string& body) {
  return Simple(ep_, http::verb::post, path, body, std::nullopt);
}

Result<HttpResponse> Client::Download(const std::string& path, std::FILE* out) {
  SKIFF_ASSIGN_OR_RETURN(Target t, ParseTarget(ep_));
  Exchange x(ep_);
  SKIFF_RETURN_IF_ERROR(x.Connect(t));
  http::request<http::string_body> req;
  x.Prepare(req, http::verb::get, t, path);
  SKIFF_RETURN_IF_ERROR(x.Write(req));
  SKIFF_RETURN_IF_ERROR(x.ReadHeader());
  HttpResponse resp;
  resp.status = x.StatusCode();
  bool write_failed = false;
  // A download cut short is an error: the file would be silently short.
  SKIFF_RETURN_IF_ERROR(x.ReadBody([&](std::string_view b) {
    if (resp.status != 200) {
      resp.body.append(b);
      return true;
    }
    write_failed = std::fwrite(b.data(), 1, b.size(), out) != b.size();
    return !write_failed;
  }));
  if (write_failed) return Failed("writing the download: " + std::string(std::strerror(errno)));
  return resp;
}

namespace {

// A request whose 200 body is handed to `on_bytes` as it arrives.
Result<HttpResponse> Streamed(const Endpoint& ep, http::verb verb, const std::string& path,
                              const std::string* body, const std::function<bool(std::string_view)>& on_bytes,
                              const std::function<bool()>& keep_going) {
  SKIFF_ASSIGN_OR_RETURN(Target t, ParseTarget(ep));
  Exchange x(ep);
  if (keep_going) x.SetKeepGoing(&keep_going);
  SKIFF_RETURN_IF_ERROR(x.Connect(t));
  http::request<http::string_body> req;
  x.Prepare(req, verb, t, path);
  if (body != nullptr) {
    req.set(http::field::content_type, "application/json");
    req.body() = *body;
  }
  SKIFF_RETURN_IF_ERROR(x.Write(req));
  SKIFF_RETURN_IF_ERROR(x.ReadHeader());
  HttpResponse resp;
  resp.status = x.StatusCode();
  if (resp.status != 200) {
    SKIFF_RETURN_IF_ERROR(x.ReadBody([&](std::string_view b) {
      resp.body.append(b);
      return true;
    }));
    return resp;
  }
  // Once the stream has begun, its end (by the reader, the caller or a
  // broken connection) is the end of the transfer, not a failed request.
  (void)x.ReadBody(on_bytes);
  return resp;
}

}  // namespace

Result<HttpResponse> Client::Stream(const std::string& path,
                                    const std::function<bool(std::string_view)>& on_bytes,
                                    const std::function<bool()>& keep_going) {
  return Streamed(ep_, http::verb::get, path, nullptr, on_bytes, keep_going);
}

Result<HttpResponse> Client::PostStream(const std::string& path, const std::string& body,
                                        const std::function<bool(std::string_view)>& on_bytes,
                                        const std::function<bool()>& keep_going) {
  return Streamed(ep_, http::verb::post, path, &body, on_bytes, keep_going);
}

Result<HttpResponse> Client::Upload(const std::string& path, std::FILE* in) {
  SKIFF_ASSIGN_OR_RETURN(Target t, ParseTarget(ep_));
  Exchange x(ep_);
  SKIFF_RETURN_IF_ERROR(x.Connect(t));
  http::request<http::buffer_body> req;
  x.Prepare(req, http::verb::put, t, path);
  SKIFF_RETURN_IF_ERROR(x.WriteFrom(req, in));
  SKIFF_RETURN_IF_ERROR(x.ReadHeader());
  HttpResponse resp;
  resp.status = x.StatusCode();
  SKIFF_RETURN_IF_ERROR(x.ReadBody([&](std::string_view b) {
    resp.body.append(b);
    return true;
  }));
  return resp;
}

}  // namespace skiff::cli
