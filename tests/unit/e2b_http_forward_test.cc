// The HTTP of forwarding a request to a port inside a sandbox, without a
// sandbox: E2B's sandbox host names, the request written to the server,
// hop-by-hop headers, and the reading of the server's answer as it
// streams (any split of its bytes gives the same answer).
#include "e2b/http_forward.h"

#include <gtest/gtest.h>

namespace skiff::e2b {
namespace {

constexpr const char* kId = "0b7c3f1e-2d4a-4c8e-9f10-123456789abc";

TEST(E2bSandboxHost, NamesThePortAndTheSandbox) {
  auto h = ParseSandboxHost(std::string("8000-") + kId + ".localhost");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->port, 8000);
  EXPECT_EQ(h->sandbox_id, kId);
  h = ParseSandboxHost(std::string("49999-") + kId + ".sandbox.example.com:8080");
  ASSERT_TRUE(h) << "with the listener's port";
  EXPECT_EQ(h->port, 49999);
  h = ParseSandboxHost(std::string("1-") + kId + ".e2b.app");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->port, 1);
  EXPECT_EQ(ParseSandboxHost(std::string("65535-") + kId + ".x")->port, 65535);
}

TEST(E2bSandboxHost, AnythingElseIsNotASandboxHost) {
  std::string id = kId;
  for (const std::string& bad : std::vector<std::string>{
           std::string("127.0.0.1:8080"),
           std::string("localhost:8080"),
           std::string("localhost"),
           std::string("[::1]:8080"),
           std::string(""),
           "0-" + id + ".localhost",                               // port 0
           "65536-" + id + ".localhost",                           // above the range
           "99999-" + id + ".localhost",                           //
           "123456-" + id + ".localhost",                          // too many digits
           "08000-" + id + ".localhost",                           // a leading zero
           "80a0-" + id + ".localhost",                            // not digits
           "-" + id + ".localhost",                                // no port
           "8000" + id + ".localhost",                             // no dash
           "8000-" + id,                                           // no domain
           "8000-" + id + ".",                                     // an empty domain
           "8000-" + id + ".localhost:",                           // an empty listener port
           "8000-" + id + ".localhost:80x",                        // a bad listener port
           "8000-0B7C3F1E-2D4A-4C8E-9F10-123456789ABC.localhost",  // not skiff's lower-case form
           "8000-0b7c3f1e-2d4a-4c8e-9f10-123456789ab.localhost",   // one digit short
           "8000-0b7c3f1e_2d4a-4c8e-9f10-123456789abc.localhost",  // not a UUID
           "8000-zb7c3f1e-2d4a-4c8e-9f10-123456789abc.localhost",  // not hex
       }) {
    EXPECT_FALSE(ParseSandboxHost(bad)) << bad;
  }
}

TEST(E2bForward, HopByHopHeadersAreKnown) {
  for (const char* h : {"Connection", "keep-alive", "Proxy-Connection", "TE", "Trailer", "Transfer-Encoding",
                        "Upgrade", "Proxy-Authenticate", "Proxy-Authorization"})
    EXPECT_TRUE(IsHopByHop(h)) << h;
  for (const char* h : {"Content-Type", "Cookie", "Authorization", "X-Access-Token", "Host", "Accept"})
    EXPECT_FALSE(IsHopByHop(h)) << h;
  EXPECT_TRUE(IsHopByHop("X-Private", ConnectionTokens("keep-alive, X-Private")));
  EXPECT_EQ(ConnectionTokens(" Close ,,X-A\t"), (std::vector<std::string>{"close", "x-a"}));
}

TEST(E2bForward, RequestIsHttp11WithItsBodyAndWithoutHopByHopHeaders) {
  HeaderList h = {{"Host", "8000-x.localhost"},
                  {"Connection", "keep-alive, X-Drop"},
                  {"X-Drop", "1"},
                  {"Keep-Alive", "timeout=5"},
                  {"Transfer-Encoding", "chunked"},
                  {"Content-Length", "99"},
                  {"Expect", "100-continue"},
                  {"Cookie", "a=1"},
                  {"Cookie", "b=2"},
                  {"Content-Type", "text/plain"}};
  auto r = SerializeRequest("POST", "/upload?x=1%202", h, "hello");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r,
            "POST /upload?x=1%202 HTTP/1.1\r\n"
            "Host: 8000-x.localhost\r\n"
            "Cookie: a=1\r\n"
            "Cookie: b=2\r\n"
            "Content-Type: text/plain\r\n"
            "Content-Length: 5\r\n"
            "Connection: close\r\n\r\n"
            "hello");
  auto get = SerializeRequest("GET", "/", {{"Accept", "*/*"}}, "");
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(*get, "GET / HTTP/1.1\r\nAccept: */*\r\nConnection: close\r\n\r\n") << "no body, no length";
  EXPECT_NE(SerializeRequest("PUT", "/", {}, "")->find("Content-Length: 0\r\n"), std::string::npos);
}

TEST(E2bForward, NothingCanSmuggleASecondRequest) {
  EXPECT_FALSE(SerializeRequest("GET", "/ HTTP/1.1\r\nX: y", {}, "").ok());
  EXPECT_FALSE(SerializeRequest("GET", "/a b", {}, "").ok());
  EXPECT_FALSE(SerializeRequest("GET", "", {}, "").ok());
  EXPECT_FALSE(SerializeRequest("G ET", "/", {}, "").ok());
  EXPECT_FALSE(SerializeRequest("GET", "/", {{"X", "a\r\nGET /evil HTTP/1.1"}}, "").ok());
  EXPECT_FALSE(SerializeRequest("GET", "/", {{"X: y", "z"}}, "").ok());
  EXPECT_FALSE(SerializeRequest("GET", "/", {{"X", std::string("a\0b", 3)}}, "").ok());
}

// Feeds `wire` in pieces of `piece` bytes; what the reader gave.
struct Read {
  ResponseReader::Head head;
  int heads = 0;
  std::string body;
  Status fed = OkStatus();
  Status finished = OkStatus();
};
Read ReadIn(const std::string& wire, size_t piece, bool head_request = false, bool finish = true) {
  Read out;
  ResponseReader r(
      head_request,
      [&](const ResponseReader::Head& h) {
        out.head = h;
        ++out.heads;
        return true;
      },
      [&](std::string_view b) {
        out.body.append(b);
        return true;
      });
  for (size_t at = 0; at < wire.size() && out.fed.ok(); at += piece) out.fed = r.Feed(wire.substr(at, piece));
  if (out.fed.ok() && finish) out.finished = r.Finish();
  return out;
}

TEST(E2bForward, ResponsesOfEveryFramingReadTheSameInAnyPieces) {
  const std::string chunked =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
      "Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nX-Kept: yes\r\n\r\n"
      "6\r\ndata: \r\n3\r\nhi\n\r\n0\r\n\r\n";
  const std::string sized =
      "HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nnope!";
  const std::string to_eof = "HTTP/1.0 200 OK\r\nServer: SimpleHTTP/0.6\r\n\r\nbody until the end";
  for (size_t piece : {size_t{1}, size_t{3}, size_t{7}, size_t{4096}}) {
    Read c = ReadIn(chunked, piece);
    ASSERT_TRUE(c.fed.ok()) << c.fed.error().message();
    ASSERT_TRUE(c.finished.ok()) << c.finished.error().message();
    EXPECT_EQ(c.heads, 1);
    EXPECT_EQ(c.head.status, 200);
    EXPECT_EQ(c.head.content_type, "text/event-stream");
    EXPECT_EQ(c.head.headers, (HeaderList{{"X-Kept", "yes"}})) << "hop-by-hop and framing headers removed";
    EXPECT_EQ(c.body, "data: hi\n");

    Read s = ReadIn(sized, piece);
    ASSERT_TRUE(s.finished.ok());
    EXPECT_EQ(s.head.status, 404);
    EXPECT_EQ(s.head.content_type, "text/plain");
    EXPECT_TRUE(s.head.headers.empty());
    EXPECT_EQ(s.body, "nope!");

    Read e = ReadIn(to_eof, piece);
    ASSERT_TRUE(e.finished.ok()) << "a body to the end of the connection ends with it";
    EXPECT_EQ(e.head.headers, (HeaderList{{"Server", "SimpleHTTP/0.6"}}));
    EXPECT_EQ(e.body, "body until the end");
  }
}

TEST(E2bForward, InterimAnswersAreSkippedAndHeadHasNoBody) {
  Read c = ReadIn("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok", 5);
  ASSERT_TRUE(c.finished.ok());
  EXPECT_EQ(c.heads, 1);
  EXPECT_EQ(c.head.status, 201);
  EXPECT_EQ(c.body, "ok");
  Read h = ReadIn("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", 4, /*head_request=*/true);
  ASSERT_TRUE(h.finished.ok());
  EXPECT_EQ(h.head.status, 200);
  EXPECT_TRUE(h.body.empty());
}

TEST(E2bForward, BrokenAnswersAreErrors) {
  EXPECT_FALSE(ReadIn("SSH-2.0-OpenSSH\r\n\r\n", 4).fed.ok()) << "not HTTP";
  EXPECT_FALSE(ReadIn("", 4).finished.ok()) << "closed without an answer";
  Read cut = ReadIn("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 4);
  EXPECT_EQ(cut.body, "abc");
  EXPECT_FALSE(cut.finished.ok()) << "closed mid-body";
  Read cut_chunk = ReadIn("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", 4);
  EXPECT_FALSE(cut_chunk.finished.ok());
  EXPECT_FALSE(ReadIn("HTTP/1.1 200 OK\r\nX: " + std::string(70000, 'a') + "\r\n\r\n", 4096).fed.ok())
      << "header above 64 KiB";
}

TEST(E2bForward, AReaderThatGoesAwayStopsTheReading) {
  ResponseReader r(
      false, [](const ResponseReader::Head&) { return true; }, [](std::string_view) { return false; });
  Status st = r.Feed("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Code::kS216);
}

}  // namespace
}  // namespace skiff::e2b
