// The CLI's HTTP client of a daemon against a scripted server of one
// connection: what it sends, how it reads every answer shape, and how a
// daemon that stalls, vanishes or cuts a body short is reported.
#include "cli/client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "base/unique_fd.h"
#include "support/temp_dir.h"

namespace skiff::cli {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using Request = http::request<http::string_body>;

void WriteRaw(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// Blocks until the client closes its end.
void WaitForClose(int fd) {
  char c[256];
  while (::read(fd, c, sizeof c) > 0) {
  }
}

// Accepts one connection, reads one request, hands the raw descriptor to
// `answer`, closes.
class OneShotServer {
 public:
  using Answer = std::function<void(int fd, const Request& req)>;

  // On a unix socket in a directory of its own.
  static std::unique_ptr<OneShotServer> Unix(Answer answer) {
    auto s = std::unique_ptr<OneShotServer>(new OneShotServer(std::move(answer)));
    s->dir_.emplace("cli-client");
    s->ep_.unix_socket = *s->dir_ / "d.sock";
    s->ep_.base_url = "http://localhost";
    s->listener_ = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", s->ep_.unix_socket.c_str());
    if (::bind(s->listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return nullptr;
    s->Listen();
    return s;
  }

  // On a loopback TCP port, with `prefix` in its base URL.
  static std::unique_ptr<OneShotServer> Tcp(Answer answer, const std::string& prefix) {
    auto s = std::unique_ptr<OneShotServer>(new OneShotServer(std::move(answer)));
    s->listener_ = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(s->listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return nullptr;
    socklen_t len = sizeof addr;
    ::getsockname(s->listener_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    s->ep_.base_url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + prefix;
    s->Listen();
    return s;
  }

  ~OneShotServer() {
    if (thread_.joinable()) thread_.join();
  }

  Endpoint endpoint() const { return ep_; }
  // The request, once the exchange is over.
  const Request& received() {
    if (thread_.joinable()) thread_.join();
    return req_;
  }

 private:
  explicit OneShotServer(Answer answer) : answer_(std::move(answer)) {}

  void Listen() {
    ::listen(listener_.get(), 1);
    thread_ = std::thread([this] {
      UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn) return;
      // Beast reads the request off a duplicate; the answer is raw bytes.
      net::io_context ioc;
      net::local::stream_protocol::socket sock(ioc);
      boost::system::error_code ec;
      boost::beast::flat_buffer buf;
      int dup = ::dup(conn.get());
      if (dup < 0) return;
      sock.assign(net::local::stream_protocol(), dup, ec);  // any stream socket reads the same
      http::read(sock, buf, req_, ec);
      if (!ec) answer_(conn.get(), req_);
    });
  }

  Answer answer_;
  Endpoint ep_;
  std::optional<testing_support::TempDir> dir_;  // Unix() only
  UniqueFd listener_;
  std::thread thread_;
  Request req_;
};

TEST(CliClient, PostSendsJsonWithTheTokenAndReadsTheAnswer) {
  auto srv = OneShotServer::Unix([](int fd, const Request&) {
    WriteRaw(fd,
             "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}");
  });
  ASSERT_NE(srv, nullptr);
  Endpoint ep = srv->endpoint();
  ep.token = "s3cret";
  auto r = Client(ep).Post("/v1/functions/sandbox::list", R"({"a":1})");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, R"({"ok":true})");
  const Request& req = srv->received();
  EXPECT_EQ(req.method(), http::verb::post);
  EXPECT_EQ(req.target(), "/v1/functions/sandbox::list");
  EXPECT_EQ(req.body(), R"({"a":1})");
  EXPECT_EQ(req[http::field::content_type], "application/json");
  EXPECT_EQ(req[http::field::authorization], "Bearer s3cret");
  EXPECT_EQ(req[http::field::host], "localhost");
}

TEST(CliClient, AChunkedErrorAnswerIsReadWhole) {
  auto srv = OneShotServer::Unix([](int fd, const Request&) {
    WriteRaw(fd,
             "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n"
             "6\r\n{\"code\r\n"
             "9\r\n\":\"S002\"}\r\n0\r\n\r\n");
  });
  ASSERT_NE(srv, nullptr);
  auto r = Client(srv->endpoint()).Get("/v1/sandboxes/x", 5);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->body, R"({"code":"S002"})");
  EXPECT_EQ(srv->received().method(), http::verb::get);
}

TEST(CliClient, ATcpBaseUrlsPathPrefixAndHostAreSent) {
  auto srv = OneShotServer::Tcp(
      [](int fd, const Request&) { WriteRaw(fd, "HTTP/1.1 204 No Content\r\n\r\n"); }, "/skiff/");
  ASSERT_NE(srv, nullptr);
  auto r = Client(srv->endpoint()).Get("/healthz", 5);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->body, "");
  const Request& req = srv->received();
  EXPECT_EQ(req.target(), "/skiff/healthz");
  const std::string url = srv->endpoint().base_url;  // http://127.0.0.1:<port>/skiff/
  EXPECT_EQ(std::string(req[http::field::host]), url.substr(7, url.find('/', 7) - 7));
}

TEST(CliClient, AnUploadFromAPipeIsChunkedAndFromAFileHasItsLength) {
  std::string big(300 * 1024, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  auto ok = [](int fd, const Request&) { WriteRaw(fd, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"); };
  {
    auto srv = OneShotServer::Unix(ok);
    ASSERT_NE(srv, nullptr);
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    std::thread feeder([&] {
      WriteRaw(p[1], big);
      ::close(p[1]);
    });
    std::FILE* in = ::fdopen(p[0], "r");
    auto r = Client(srv->endpoint()).Upload("/v1/sandboxes/x/files?path=/a", in);
    feeder.join();
    std::fclose(in);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(r->status, 201);
    const Request& req = srv->received();
    EXPECT_EQ(req.method(), http::verb::put);
    EXPECT_TRUE(req.chunked());
    EXPECT_EQ(req.body(), big);
  }
  {
    auto srv = OneShotServer::Unix(ok);
    ASSERT_NE(srv, nullptr);
    std::FILE* in = std::tmpfile();
    ASSERT_NE(in, nullptr);
    ASSERT_EQ(std::fwrite(big.data(), 1, big.size(), in), big.size());
    std::rewind(in);
    auto r = Client(srv->endpoint()).Upload("/v1/sandboxes/x/files?path=/a", in);
    std::fclose(in);
    ASSERT_TRUE(r.ok()) << r.error().message();
    const Request& req = srv->received();
    EXPECT_FALSE(req.chunked());
    EXPECT_EQ(req[http::field::content_length], std::to_string(big.size()));
    EXPECT_EQ(req.body(), big);
  }
}

TEST(CliClient, ADownloadIsWrittenWholeAndOneCutShortIsAnError) {
  const std::string body(200 * 1024, 'x');
  {
    auto srv = OneShotServer::Unix([&](int fd, const Request&) {
      WriteRaw(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    });
    ASSERT_NE(srv, nullptr);
    std::FILE* out = std::tmpfile();
    auto r = Client(srv->endpoint()).Download("/f", out);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(std::ftell(out), static_cast<long>(body.size()));
    std::fclose(out);
  }
  {
    auto srv = OneShotServer::Unix([&](int fd, const Request&) {
      WriteRaw(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
                       body.substr(0, 1000));
    });
    ASSERT_NE(srv, nullptr);
    std::FILE* out = std::tmpfile();
    auto r = Client(srv->endpoint()).Download("/f", out);
    std::fclose(out);
    ASSERT_FALSE(r.ok()) << "a download cut short was reported whole";
    EXPECT_EQ(r.error().code(), Code::kS300);
  }
}

TEST(CliClient, AStreamEndsWhenTheCallerStopsWaiting) {
  std::atomic<int> asked{0};
  auto srv = OneShotServer::Unix([](int fd, const Request&) {
    WriteRaw(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nline1\n\r\n");
    WaitForClose(fd);  // then silence: only keep_going can end the wait
  });
  ASSERT_NE(srv, nullptr);
  std::string got;
  auto r = Client(srv->endpoint())
               .Stream(
                   "/v1/sandboxes/x/processes/1/output",
                   [&](std::string_view b) {
                     got.append(b);
                     return true;
                   },
                   [&] { return ++asked < 2; });
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(got, "line1\n");
  EXPECT_EQ(asked.load(), 2);
}

TEST(CliClient, AStreamEndsWhenTheReaderHasEnough) {
  auto srv = OneShotServer::Unix([](int fd, const Request&) {
    WriteRaw(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n");
    WaitForClose(fd);
  });
  ASSERT_NE(srv, nullptr);
  std::string got;
  auto r = Client(srv->endpoint()).Stream("/s", [&](std::string_view b) {
    got.append(b);
    return false;
  });
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(got, "ab");
}

TEST(CliClient, ADaemonThatNeverAnswersTimesOut) {
  auto srv = OneShotServer::Unix([](int fd, const Request&) { WaitForClose(fd); });
  ASSERT_NE(srv, nullptr);
  auto r = Client(srv->endpoint()).Get("/healthz", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS300);
  EXPECT_NE(r.error().message().find("timed out"), std::string::npos) << r.error().message();
}

TEST(CliClient, NoDaemonAndAClosedConnectionAreTransportErrors) {
  Endpoint none{"/nonexistent-dir/skiffd.sock", "http://localhost", ""};
  auto r = Client(none).Get("/healthz", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS300);
  EXPECT_NE(r.error().message().find("/nonexistent-dir/skiffd.sock"), std::string::npos)
      << r.error().message();

  auto srv = OneShotServer::Unix([](int, const Request&) {});  // reads the request, closes
  ASSERT_NE(srv, nullptr);
  auto closed = Client(srv->endpoint()).Post("/v1/functions/sandbox::list", "{}");
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.error().code(), Code::kS300);
  EXPECT_NE(closed.error().message().find("closed"), std::string::npos) << closed.error().message();
}

TEST(CliClient, OnlyPlainHttpUrlsAreAccepted) {
  for (const char* url : {"https://daemon.example:443", "ftp://x", "localhost:49134", "http://"}) {
    auto r = Client(Endpoint{"", url, ""}).Get("/healthz", 1);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_EQ(r.error().code(), Code::kS001) << url << ": " << r.error().message();
  }
}

}  // namespace
}  // namespace skiff::cli
