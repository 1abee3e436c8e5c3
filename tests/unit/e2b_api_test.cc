// The E2B-compatible API without a transport or sandboxes: Connect framing,
// proto3-JSON reading, user selection, and the control plane and envd
// routing against the SandboxService double. Hostile input gets E2B's own
// error shapes and changes nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "base/text.h"
#include "e2b/api.h"
#include "e2b/basic_user.h"
#include "e2b/connect_envelope.h"
#include "e2b/entry_info.h"
#include "e2b/file_signature.h"
#include "e2b/gzip_stream.h"
#include "e2b/proto_json.h"
#include "functions_fake_manager.h"
#include "sandbox/tenant_scope.h"

namespace skiff::e2b {
namespace {

using nlohmann::json;
using skiff::testing::Fake;
using skiff::testing::FakeSandboxService;
using skiff::testing::kLiveId;
using skiff::testing::kUnknownId;

// What a handler sent.
struct Captured final : ResponseWriter {
  int status = 0;
  std::string content_type, body;
  Headers headers;
  bool dropped = false;
  bool Start(int s, std::string_view ct, const Headers& h) override {
    status = s;
    content_type = ct;
    headers = h;
    return true;
  }
  bool Write(std::string_view b) override {
    body.append(b);
    return true;
  }
  bool Alive() override { return !dropped; }
  void Drop() override { dropped = true; }
  json Json() const { return json::parse(body, nullptr, false); }
};

TEST(E2bConnect, EnvelopesRoundTripAndBadBodiesAreRefused) {
  std::string e = Envelope(kEnvelopeMessage, "{\"a\":1}");
  ASSERT_EQ(e.size(), 5u + 7u);
  EXPECT_EQ(e[0], 0);
  EXPECT_EQ(static_cast<uint8_t>(e[4]), 7u);
  EXPECT_EQ(*SingleMessage(e), "{\"a\":1}");
  EXPECT_FALSE(SingleMessage("").ok());
  EXPECT_FALSE(SingleMessage(e.substr(0, 8)).ok()) << "truncated";
  EXPECT_FALSE(SingleMessage(e + e).ok()) << "two messages";
  EXPECT_FALSE(SingleMessage(Envelope(kEnvelopeCompressed, "x")).ok());
  EXPECT_FALSE(SingleMessage(Envelope(kEnvelopeEndStream, "{}")).ok());
  std::string huge = Envelope(kEnvelopeMessage, "");
  huge[1] = '\x7f';  // claims ~2 GiB
  EXPECT_FALSE(SingleMessage(huge).ok());
  std::string end = EndStream(std::make_pair(std::string("not_found"), std::string("no such process")));
  EXPECT_EQ(static_cast<uint8_t>(end[0]), kEnvelopeEndStream);
  EXPECT_EQ(json::parse(end.substr(5))["error"]["code"], "not_found");
  EXPECT_EQ(EndStream().substr(5), "{}");
}

TEST(E2bConnect, SCodesMapToConnectCodesAndStatuses) {
  EXPECT_EQ(ConnectCodeName(ConnectCodeOf(Error(Code::kS211, "x"))), "not_found");
  EXPECT_EQ(ConnectCodeName(ConnectCodeOf(Error(Code::kS213, "x"))), "already_exists");
  EXPECT_EQ(ConnectCodeName(ConnectCodeOf(Error(Code::kS001, "x"))), "invalid_argument");
  EXPECT_EQ(ConnectHttpStatus(ConnectCode::kNotFound), 404);
  EXPECT_EQ(ConnectHttpStatus(ConnectCode::kUnauthenticated), 401);
}

TEST(E2bProtoJson, AcceptsWhatConnectEsWrites) {
  json m = json::parse(R"({"pid":"42","snake_name":7,"b":"aGk","u":"-_8"})");
  EXPECT_EQ(**OptUint(m, "pid", 100), 42u);
  EXPECT_EQ(**OptUint(m, "snakeName", 100, "snake_name"), 7u);
  EXPECT_FALSE(OptUint(m, "pid", 10).ok()) << "above the bound";
  EXPECT_FALSE(OptUint(json{{"pid", -1}}, "pid", 100).ok());
  EXPECT_FALSE(OptUint(json{{"pid", "4x"}}, "pid", 100).ok());
  EXPECT_FALSE(OptUint(json{{"pid", "99999999999999999999"}}, "pid", 100).ok())
      << "beyond 2^64: no exception";
  EXPECT_EQ(*Bytes(m["b"], "b"), "hi") << "unpadded";
  EXPECT_EQ(*Bytes(m["u"], "u"), "\xfb\xff") << "URL-safe";
  EXPECT_FALSE(Bytes(json(5), "b").ok());
  EXPECT_FALSE(Bytes(json("!!!"), "b").ok());
  EXPECT_FALSE(ParseMessage("[1]").ok());
  EXPECT_FALSE(ParseMessage(std::string(100000, '[')).ok()) << "depth-bounded";
}

// The SDK's signature (its v1 scheme; the vectors are from Node's crypto).
TEST(E2bSignature, MatchesTheSdksScheme) {
  EXPECT_EQ(FileSignature("a.txt", "read", "", "tok", std::nullopt),
            "v1_gDv73H8R9a10OdCSX0/JNMqMYLPpmCQAYJY+U68oQjM");
  EXPECT_EQ(FileSignature("/tmp/x", "write", "user", "tok", 1700000000),
            "v1_OGdIe/HCvLjadeY2/ZgDetlMIyui586/JShQ85oH/QI");
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
}

// A source that yields `data` in pieces of `piece` bytes.
ByteSource Pieces(std::string data, size_t piece) {
  auto at = std::make_shared<size_t>(0);
  return [data = std::move(data), piece, at]() -> Result<std::string> {
    std::string out = data.substr(*at, piece);
    *at += out.size();
    return out;
  };
}

std::string Drain(const ByteSource& src, size_t* largest = nullptr) {
  std::string out;
  while (true) {
    auto r = src();
    EXPECT_TRUE(r.ok()) << r.error().message();
    if (!r.ok() || r->empty()) return out;
    if (largest) *largest = std::max(*largest, r->size());
    out += *r;
  }
}

TEST(E2bGzip, RoundTripsInBoundedPieces) {
  std::string data;
  for (int i = 0; i < 200000; ++i) data += std::to_string(i * 7919 % 1000) + ",";
  GzipWriter w;
  std::string gz;
  for (size_t at = 0; at < data.size(); at += 10000) gz += *w.Write(std::string_view(data).substr(at, 10000));
  gz += *w.Finish();
  EXPECT_LT(gz.size(), data.size());
  for (size_t piece : {size_t{1}, size_t{7}, size_t{4096}, gz.size()}) {
    size_t largest = 0;
    EXPECT_EQ(Drain(Gunzip(Pieces(gz, piece)), &largest), data) << piece;
    EXPECT_LE(largest, size_t{256} * 1024);
  }
}

TEST(E2bGzip, CorruptTruncatedAndTrailingBodiesAreRefused) {
  GzipWriter w;
  std::string gz = *w.Write("hello hello hello");
  gz += *w.Finish();
  auto fails = [](std::string body) {
    ByteSource src = Gunzip(Pieces(std::move(body), 3));
    while (true) {
      auto r = src();
      if (!r.ok()) return r.error().code() == Code::kS001;
      if (r->empty()) return false;
    }
  };
  EXPECT_TRUE(fails(gz.substr(0, gz.size() - 4))) << "truncated";
  EXPECT_TRUE(fails(gz + "extra")) << "trailing bytes";
  std::string bad = gz;
  bad[12] = static_cast<char>(bad[12] ^ 0x55);
  EXPECT_TRUE(fails(bad)) << "corrupt";
  EXPECT_TRUE(fails("not gzip at all")) << "not gzip";
  EXPECT_FALSE(fails(gz));
}

TEST(E2bUser, BasicAuthNamesTheUser) {
  EXPECT_EQ(*BasicUser(""), "");
  EXPECT_EQ(*BasicUser("Basic " + Base64Encode("user:")), "user");
  EXPECT_EQ(*BasicUser("basic " + Base64Encode("root:")), "root");
  EXPECT_FALSE(BasicUser("Bearer abc").ok());
  EXPECT_FALSE(BasicUser("Basic !!!").ok());
  EXPECT_FALSE(BasicUser("Basic " + Base64Encode("a;rm -rf /:")).ok());
  EXPECT_FALSE(BasicUser("Basic " + Base64Encode("../etc:")).ok());
}

class E2bApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Fake().Reset();
    Fake().live.insert(kLiveId);
  }
  Request Control(std::string method, std::string path) {
    Request r;
    r.method = std::move(method);
    r.path = std::move(path);
    r.headers["x-api-key"] = "key";
    return r;
  }
  Captured Run(const Request& r, const std::string& body = "") {
    Captured c;
    api.Handle(r, body, c);
    return c;
  }
  // Creates the fake's sandbox through the API; its access token.
  std::string Create(const json& body = json::object()) {
    Captured c = Run(Control("POST", "/v2/sandboxes"), body.dump());
    EXPECT_EQ(c.status, 201) << c.body;
    return c.Json().value("envdAccessToken", "");
  }
  Request Envd(std::string path, const std::string& token) {
    Request r;
    r.method = "POST";
    r.path = std::move(path);
    r.headers["e2b-sandbox-id"] = kLiveId;
    r.headers["e2b-sandbox-port"] = "49983";
    if (!token.empty()) r.headers["x-access-token"] = token;
    return r;
  }

  FakeSandboxService svc;
  Api api{svc, [this](std::string_view key) -> SandboxService* { return key == "key" ? &svc : nullptr; },
          Options{}};
};

TEST_F(E2bApiTest, CreateAnswersTheSandboxAndAppliesTheRequest) {
  Captured c = Run(Control("POST", "/v2/sandboxes"),
                   R"({"templateID":"base","metadata":{"k":"v"},"envVars":{"A":"1"},"timeout":60})");
  ASSERT_EQ(c.status, 201) << c.body;
  json j = c.Json();
  EXPECT_EQ(j["sandboxID"], kLiveId);
  EXPECT_EQ(j["envdVersion"], "0.6.13");
  EXPECT_EQ(j["envdAccessToken"].get<std::string>().size(), 64u);
  EXPECT_EQ(Fake().last_create.image, "base");
  ASSERT_EQ(Fake().last_create.env.size(), 1u);
  EXPECT_EQ(Fake().last_create.env[0], std::make_pair(std::string("A"), std::string("1")));
  EXPECT_FALSE(Fake().last_create.network) << "deny by default";
}

// docs/images.md#services: an image's services start with the E2B create,
// and the create answers only once each one's readiness check passed.
TEST_F(E2bApiTest, CreateStartsTheImageServicesAndWaitsUntilTheyAreReady) {
  ImageService svc_decl;
  svc_decl.name = "interp";
  svc_decl.command = {"/usr/bin/python3", "/srv.py"};
  svc_decl.ready = {"/usr/bin/python3", "/srv.py", "--wait", "60"};
  svc_decl.ready_timeout_secs = 70;
  Fake().create_services = {svc_decl};
  Captured c = Run(Control("POST", "/v2/sandboxes"), R"({"templateID":"code-interpreter-v1"})");
  ASSERT_EQ(c.status, 201) << c.body;
  EXPECT_EQ(Fake().last_create.image, "code-interpreter") << "the alias names the code-interpreter preset";
  ASSERT_EQ(Fake().proc_calls.size(), 1u) << "one live process per service";
  std::string start = Fake().proc_calls[0].second.dump();
  EXPECT_NE(start.find(R"(["/usr/bin/python3","/srv.py"])"), std::string::npos) << start;
  EXPECT_NE(start.find("service:interp"), std::string::npos) << start;
  EXPECT_EQ(Fake().last_exec.argv, svc_decl.ready);
  EXPECT_EQ(Fake().last_exec.timeout_ms, std::optional<uint64_t>(70000));
  EXPECT_TRUE(Fake().last_stop.empty());
}

TEST_F(E2bApiTest, CreateFailsAndStopsTheSandboxWhenAServiceIsNotReady) {
  ImageService svc_decl;
  svc_decl.name = "interp";
  svc_decl.command = {"/srv"};
  svc_decl.ready = {"/probe"};
  svc_decl.ready_timeout_secs = 5;
  Fake().create_services = {svc_decl};
  Fake().exec_result.exit_code = 1;
  Fake().exec_result.stderr_text = "no answer on 49999\n";
  Captured c = Run(Control("POST", "/v2/sandboxes"), R"({"templateID":"code-interpreter-v1"})");
  EXPECT_EQ(c.status, 500) << c.body;
  EXPECT_NE(c.body.find("image service 'interp' was not ready within 5 s (exit 1: no answer on 49999)"),
            std::string::npos);
  EXPECT_EQ(Fake().last_stop, kLiveId) << "a sandbox whose service failed is not left behind";
  EXPECT_EQ(Run(Control("GET", "/v2/sandboxes")).Json().size(), 0u) << "and not booked";
}

TEST_F(E2bApiTest, AnImageWithoutServicesStartsNothing) {
  Captured c = Run(Control("POST", "/v2/sandboxes"), R"({"templateID":"base"})");
  ASSERT_EQ(c.status, 201) << c.body;
  EXPECT_TRUE(Fake().proc_calls.empty());
  EXPECT_TRUE(Fake().last_exec.argv.empty());
}

TEST_F(E2bApiTest, HostileCreateBodiesAreRefusedAndCreateNothing) {
  for (const char* body :
       {R"({"metadata":{"k":1}})", R"({"metadata":"x"})", R"({"envVars":[1]})", R"({"timeout":-5})",
        R"({"timeout":"60"})", R"({"timeout":999999999})", R"({"templateID":7})",
        R"({"allow_internet_access":"yes"})", "[1,2]", "{nope", R"({"autoPause":"yes"})",
        R"({"autoResume":true})", R"({"autoResume":{"enabled":1}})"}) {
    Captured c = Run(Control("POST", "/v2/sandboxes"), body);
    EXPECT_EQ(c.status, 400) << body << " -> " << c.body;
    EXPECT_EQ(c.Json().value("code", 0), 400) << body;
  }
  EXPECT_EQ(Fake().calls, 0) << "no sandbox was created";
}

TEST_F(E2bApiTest, ApiKeyIsRequired) {
  Request r = Control("GET", "/v2/sandboxes");
  r.headers.erase("x-api-key");
  EXPECT_EQ(Run(r).status, 401);
  r.headers["x-api-key"] = "wrong";
  Captured c = Run(r);
  EXPECT_EQ(c.status, 401);
  EXPECT_EQ(c.Json().value("code", 0), 401);
}

TEST_F(E2bApiTest, UnknownSandboxIs404WithTheCodeInTheBody) {
  for (auto [m, p] :
       std::vector<std::pair<std::string, std::string>>{{"GET", "/sandboxes/nope"},
                                                        {"DELETE", "/sandboxes/nope"},
                                                        {"POST", "/sandboxes/nope/timeout"},
                                                        {"POST", "/v2/sandboxes/nope/connect"}}) {
    Captured c = Run(Control(m, p), R"({"timeout":10})");
    EXPECT_EQ(c.status, 404) << m << " " << p;
    EXPECT_EQ(c.Json().value("code", 0), 404) << m << " " << p;
  }
}

TEST_F(E2bApiTest, TimeoutShortensTheLifeAndTheTimerStopsIt) {
  Create();
  EXPECT_EQ(
      Run(Control("POST", "/sandboxes/" + std::string(kLiveId) + "/timeout"), R"({"timeout":1})").status,
      204);
  api.ExpireOnce(NowUnixMillis() + 500);
  EXPECT_EQ(Fake().last_stop, "") << "not yet";
  api.ExpireOnce(NowUnixMillis() + 1500);
  EXPECT_EQ(Fake().last_stop, kLiveId);
}

TEST_F(E2bApiTest, PauseIs204ThenConflictAndConnectResumesWith201) {
  Create();
  ListEntry e;
  e.sandbox_id = kLiveId;
  Fake().list.push_back(e);
  const std::string base = "/sandboxes/" + std::string(kLiveId);
  for (const char* bad : {"[]", "{\"memory\": \"no\"}", "{\"memory\": 0}", "not json"}) {
    Captured refused = Run(Control("POST", base + "/pause"), bad);
    EXPECT_EQ(refused.status, 400) << bad;
    EXPECT_EQ(Fake().paused.count(kLiveId), 0u) << "a refused pause changes nothing: " << bad;
  }
  EXPECT_EQ(Run(Control("POST", base + "/pause"), "{\"memory\": true}").status, 204);
  Captured again = Run(Control("POST", base + "/pause"), "{}");
  EXPECT_EQ(again.status, 409);
  EXPECT_EQ(again.Json().value("code", 0), 409) << "the SDK reads the body's code";
  EXPECT_EQ(Run(Control("GET", base)).Json()["state"], "paused");
  Request health = Envd("/health", "");
  health.method = "GET";
  EXPECT_EQ(Run(health).status, 502) << "isRunning() is false while paused";
  Request running = Control("GET", "/v2/sandboxes");
  running.query["state"] = "running";
  Request paused = running;
  paused.query["state"] = "paused";
  EXPECT_EQ(Run(running).Json().size(), 0u);
  EXPECT_EQ(Run(paused).Json().size(), 1u);
  api.ExpireOnce(NowUnixMillis() + 100'000'000);
  EXPECT_EQ(Fake().last_stop, "") << "a paused sandbox waits for its connect";
  Captured c = Run(Control("POST", "/v2/sandboxes/" + std::string(kLiveId) + "/connect"), "{}");
  EXPECT_EQ(c.status, 201) << c.body;
  EXPECT_EQ(Fake().paused.count(kLiveId), 0u);
  EXPECT_EQ(Run(health).status, 204);
  EXPECT_EQ(Run(Control("POST", "/sandboxes/nope/pause"), "{}").status, 404);
}

TEST_F(E2bApiTest, MetricsAreOneSampleInE2bsShape) {
  Create();
  Fake().metrics.usage = {2, 37.5, 1000, 2000, 300, 4000};
  Fake().metrics.timestamp_unix_ms = 1764892800123;
  Captured c = Run(Control("GET", "/sandboxes/" + std::string(kLiveId) + "/metrics"));
  ASSERT_EQ(c.status, 200) << c.body;
  json j = c.Json();
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0], (json{{"timestamp", "2025-12-05T00:00:00.123Z"},
                        {"timestampUnix", 1764892800},
                        {"cpuCount", 2},
                        {"cpuUsedPct", 37.5},
                        {"memUsed", 1000},
                        {"memTotal", 2000},
                        {"memCache", 0},
                        {"diskUsed", 300},
                        {"diskTotal", 4000}}));
  Captured unknown = Run(Control("GET", "/sandboxes/nope/metrics"));
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.Json().value("code", 0), 404);
}

TEST_F(E2bApiTest, AutoPauseLifecyclePausesAtTheEndInsteadOfKilling) {
  Create(json{{"timeout", 1}, {"autoPause", true}, {"autoResume", {{"enabled", true}}}});
  EXPECT_TRUE(Fake().last_create.auto_resume);
  api.ExpireOnce(NowUnixMillis() + 1500);
  EXPECT_EQ(Fake().last_stop, "");
  EXPECT_EQ(Fake().paused.count(kLiveId), 1u);
}

TEST_F(E2bApiTest, ConnectNeverShortensTheLife) {
  Create(json{{"timeout", 3600}});
  Captured c = Run(Control("POST", "/v2/sandboxes/" + std::string(kLiveId) + "/connect"), R"({"timeout":1})");
  EXPECT_EQ(c.status, 200) << c.body;
  api.ExpireOnce(NowUnixMillis() + 10000);
  EXPECT_EQ(Fake().last_stop, "");
}

TEST_F(E2bApiTest, EnvdNeedsTheSandboxsAccessToken) {
  std::string token = Create();
  Captured none = Run(Envd("/filesystem.Filesystem/Stat", ""), R"({"path":"/"})");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.Json().value("code", ""), "unauthenticated");
  Captured wrong = Run(Envd("/filesystem.Filesystem/Stat", std::string(64, 'a')), R"({"path":"/"})");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_TRUE(Fake().fs_calls.empty()) << "nothing reached the sandbox";
  // /health needs no token.
  Request h = Envd("/health", "");
  h.method = "GET";
  EXPECT_EQ(Run(h).status, 204);
}

TEST_F(E2bApiTest, UnknownSandboxOnEnvdIs502AsE2bsProxySays) {
  Request r = Envd("/health", "");
  r.method = "GET";
  r.headers["e2b-sandbox-id"] = "nope";
  Captured c = Run(r);
  EXPECT_EQ(c.status, 502);
  EXPECT_EQ(c.Json().value("sandboxId", ""), "nope");
}

// A request for a port of the sandbox, routed by E2B's headers.
Request PortRequest(const std::string& port, std::string method = "GET", std::string target = "/a.txt?x=1") {
  Request r;
  r.method = std::move(method);
  r.path = target.substr(0, target.find('?'));
  r.target = std::move(target);
  r.headers["e2b-sandbox-id"] = kLiveId;
  r.headers["e2b-sandbox-port"] = port;
  r.raw_headers = {{"Host", "127.0.0.1:8080"},
                   {"E2b-Sandbox-Id", kLiveId},
                   {"E2b-Sandbox-Port", port},
                   {"Connection", "keep-alive"},
                   {"Accept", "*/*"}};
  return r;
}

TEST_F(E2bApiTest, APortsTrafficIsForwardedAndItsAnswerStreamsBack) {
  Create();
  Fake().port_response =
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nX-Served-By: test\r\n"
      "Keep-Alive: timeout=5\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
  Request r = PortRequest("8000");
  EXPECT_TRUE(Api::IsForward(r));
  auto target = api.TargetOf(r);
  ASSERT_TRUE(target);
  EXPECT_EQ(target->sandbox_id, kLiveId);
  EXPECT_TRUE(target->stream) << "a forwarded answer may stream for long";
  Captured c = Run(r);
  EXPECT_EQ(c.status, 200);
  EXPECT_EQ(c.content_type, "text/plain");
  EXPECT_EQ(c.body, "hello world");
  EXPECT_FALSE(c.dropped);
  EXPECT_EQ(c.headers, (Headers{{"X-Served-By", "test"}})) << "no hop-by-hop or framing headers";
  ASSERT_EQ(Fake().port_calls.size(), 1u);
  EXPECT_EQ(Fake().port_calls[0], std::make_pair(std::string(kLiveId), uint16_t{8000}));
  EXPECT_EQ(Fake().port_request,
            std::string("GET /a.txt?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nE2b-Sandbox-Id: ") + kLiveId +
                "\r\nE2b-Sandbox-Port: 8000\r\nAccept: */*\r\nConnection: close\r\n\r\n");
}

TEST_F(E2bApiTest, ThePostedBodyIsForwardedWithItsLength) {
  Create();
  Fake().port_response = "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
  Request r = PortRequest("49999", "POST", "/execute");
  EXPECT_FALSE(Api::IsUpload(r));
  Captured c = Run(r, R"({"code":"1+1"})");
  EXPECT_EQ(c.status, 201);
  EXPECT_NE(Fake().port_request.find("Content-Length: 14\r\nConnection: close\r\n\r\n{\"code\":\"1+1\"}"),
            std::string::npos)
      << Fake().port_request;
}

TEST_F(E2bApiTest, ACompleteAnswerEndsTheConnection) {
  Create();
  // Bytes after a complete answer (a server that keeps the connection
  // open) are not read: the answer ends with its last byte.
  Fake().port_response = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 500 Nope\r\n\r\n";
  Fake().port_piece = 1;
  Captured c = Run(PortRequest("8000"));
  EXPECT_EQ(c.status, 200);
  EXPECT_EQ(c.body, "ok");
  EXPECT_FALSE(c.dropped);
}

TEST_F(E2bApiTest, NothingListeningOrNoSandboxIs502InE2bsShape) {
  Create();
  Fake().port_refused = true;
  Captured refused = Run(PortRequest("8001"));
  EXPECT_EQ(refused.status, 502);
  EXPECT_EQ(refused.Json().value("sandboxId", ""), kLiveId);
  EXPECT_EQ(refused.Json().value("code", 0), 502);
  EXPECT_NE(refused.Json().value("message", "").find("nothing listens on port 8001"), std::string::npos)
      << refused.body;

  Request unknown = PortRequest("8000");
  unknown.headers["e2b-sandbox-id"] = kUnknownId;
  Captured gone = Run(unknown);
  EXPECT_EQ(gone.status, 502);
  EXPECT_EQ(gone.Json().value("message", ""), "The sandbox was not found");
  EXPECT_EQ(gone.Json().value("sandboxId", ""), kUnknownId);
  EXPECT_EQ(Fake().port_calls.size(), 1u) << "nothing was forwarded to an unknown sandbox";
}

TEST_F(E2bApiTest, OnlySandboxesOfTheE2bApiAreReachable) {
  // The fake's sandbox is live but was never created through E2B.
  Captured c = Run(PortRequest("8000"));
  EXPECT_EQ(c.status, 502);
  EXPECT_TRUE(Fake().port_calls.empty());
}

TEST_F(E2bApiTest, BadPortsUpgradesAndGarbageAnswersAreRefused) {
  Create();
  for (const char* port : {"0", "65536", "80a", "-1", "999999"}) {
    Captured c = Run(PortRequest(port));
    EXPECT_EQ(c.status, 400) << port;
  }
  Request ws = PortRequest("8000");
  ws.headers["upgrade"] = "websocket";
  EXPECT_EQ(Run(ws).status, 501);
  EXPECT_TRUE(Fake().port_calls.empty());

  Fake().port_response = "not http at all\r\n\r\n";
  Captured junk = Run(PortRequest("8000"));
  EXPECT_EQ(junk.status, 502);
  Fake().port_response = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
  Captured cut = Run(PortRequest("8000"));
  EXPECT_EQ(cut.status, 200);
  EXPECT_TRUE(cut.dropped) << "an answer cut short is never passed off as whole";
}

TEST_F(E2bApiTest, PrivateTrafficNeedsTheTrafficToken) {
  Captured created = Run(Control("POST", "/v2/sandboxes"), R"({"network":{"allowPublicTraffic":false}})");
  ASSERT_EQ(created.status, 201);
  std::string token = created.Json().value("trafficAccessToken", "");
  ASSERT_EQ(token.size(), 64u);
  Fake().port_response = "HTTP/1.1 204 No Content\r\n\r\n";
  Request r = PortRequest("8000");
  EXPECT_EQ(Run(r).status, 403);
  r.headers["e2b-traffic-access-token"] = "wrong";
  EXPECT_EQ(Run(r).status, 403);
  EXPECT_TRUE(Fake().port_calls.empty());
  r.headers["e2b-traffic-access-token"] = token;
  EXPECT_EQ(Run(r).status, 204);
  Captured open = Run(Control("POST", "/v2/sandboxes"), "{}");
  EXPECT_TRUE(open.Json()["trafficAccessToken"].is_null()) << "public by default, as E2B's";
  EXPECT_EQ(Run(Control("POST", "/v2/sandboxes"), R"({"network":{"allowPublicTraffic":"no"}})").status, 400);
}

TEST_F(E2bApiTest, BadStreamingRequestsEndTheStreamWithTheError) {
  std::string token = Create();
  // Not an envelope; then a StartRequest without a process.
  for (const std::string& body : {std::string("{}"), Envelope(kEnvelopeMessage, "{}"),
                                  Envelope(kEnvelopeMessage, R"({"process":{"cmd":5}})")}) {
    Captured c = Run(Envd("/process.Process/Start", token), body);
    EXPECT_EQ(c.status, 200);
    EXPECT_EQ(c.content_type, "application/connect+json");
    ASSERT_GE(c.body.size(), 5u);
    EXPECT_EQ(static_cast<uint8_t>(c.body[0]), kEnvelopeEndStream);
    EXPECT_EQ(json::parse(c.body.substr(5))["error"]["code"], "invalid_argument") << c.body;
  }
  EXPECT_TRUE(Fake().proc_calls.empty()) << "no process was started";
}

// The envelopes of a streamed answer: (flags, JSON) each.
std::vector<std::pair<uint8_t, json>> Envelopes(const std::string& body) {
  std::vector<std::pair<uint8_t, json>> out;
  for (size_t at = 0; at + 5 <= body.size();) {
    uint32_t n = (uint32_t{static_cast<uint8_t>(body[at + 1])} << 24) |
                 (uint32_t{static_cast<uint8_t>(body[at + 2])} << 16) |
                 (uint32_t{static_cast<uint8_t>(body[at + 3])} << 8) |
                 uint32_t{static_cast<uint8_t>(body[at + 4])};
    out.emplace_back(static_cast<uint8_t>(body[at]), json::parse(body.substr(at + 5, n), nullptr, false));
    at += 5 + n;
  }
  return out;
}

TEST_F(E2bApiTest, WatchDirStartsThenStreamsEventsWithNamesAndEntries) {
  std::string token = Create();
  Fake().watch_events = {{"a.txt", proto::FsWatchChange::kCreate},
                         {"sub/b", proto::FsWatchChange::kWrite},
                         {"gone", proto::FsWatchChange::kRemove}};
  Fake().fs_result =
      proto::FsEntry{"x", false, 3, "0644", 1788264000, false, 0, 0, "user", "user", {}}.ToJson();
  Captured c =
      Run(Envd("/filesystem.Filesystem/WatchDir", token),
          Envelope(kEnvelopeMessage, R"({"path":"/home/user/w","recursive":true,"includeEntry":true})"));
  EXPECT_EQ(c.status, 200);
  EXPECT_EQ(c.content_type, "application/connect+json");
  ASSERT_TRUE(Fake().watch_request);
  EXPECT_EQ(Fake().watch_request->path, "/home/user/w");
  EXPECT_TRUE(Fake().watch_request->recursive);
  auto ev = Envelopes(c.body);
  ASSERT_EQ(ev.size(), 5u) << c.body;
  EXPECT_EQ(ev[0].second, json::parse(R"({"start":{}})"));
  EXPECT_EQ(ev[1].second["filesystem"]["name"], "a.txt");
  EXPECT_EQ(ev[1].second["filesystem"]["type"], "EVENT_TYPE_CREATE");
  EXPECT_EQ(ev[1].second["filesystem"]["entry"]["path"], "/home/user/w/a.txt");
  EXPECT_EQ(ev[2].second["filesystem"]["name"], "sub/b");
  EXPECT_EQ(ev[2].second["filesystem"]["type"], "EVENT_TYPE_WRITE");
  EXPECT_EQ(ev[3].second["filesystem"]["type"], "EVENT_TYPE_REMOVE");
  EXPECT_FALSE(ev[3].second["filesystem"].contains("entry")) << "a removed entry has none";
  // The directory went away: the stream ends cleanly.
  EXPECT_EQ(ev[4].first, kEnvelopeEndStream);
  EXPECT_EQ(ev[4].second, json::object());
  // The stats asked for the entries, of the paths below the watched directory.
  ASSERT_EQ(Fake().fs_calls.size(), 2u);
  EXPECT_EQ(Fake().fs_calls[1].second["path"], "/home/user/w/sub/b");
}

TEST_F(E2bApiTest, WatchDirResolvesRelativePathsAndDefaultsToNotRecursive) {
  std::string token = Create();
  Request r = Envd("/filesystem.Filesystem/WatchDir", token);
  r.headers["authorization"] = "Basic " + Base64Encode("user:");  // as the SDK names its user
  Captured c = Run(r, Envelope(kEnvelopeMessage, R"({"path":"w"})"));
  ASSERT_TRUE(Fake().watch_request);
  EXPECT_EQ(Fake().watch_request->path, "/home/user/w");
  EXPECT_FALSE(Fake().watch_request->recursive);
  auto ev = Envelopes(c.body);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].second, json::parse(R"({"start":{}})"));
}

TEST_F(E2bApiTest, WatchDirErrorsEndTheStreamWithTheirConnectCode) {
  std::string token = Create();
  const std::pair<Error, const char*> cases[] = {
      {Error(Code::kS211, "file not found: /nope"), "not_found"},
      {Error(Code::kS212, "not a directory: /f"), "invalid_argument"},
      {Error(Code::kS216, "fs.watch: the kernel's limit of inotify watches is reached"), "unknown"},
  };
  for (const auto& [err, code] : cases) {
    Fake().watch_refusal = err;
    Captured c =
        Run(Envd("/filesystem.Filesystem/WatchDir", token), Envelope(kEnvelopeMessage, R"({"path":"/x"})"));
    EXPECT_EQ(c.status, 200);
    auto ev = Envelopes(c.body);
    ASSERT_EQ(ev.size(), 1u) << c.body;
    EXPECT_EQ(ev[0].first, kEnvelopeEndStream);
    EXPECT_EQ(ev[0].second["error"]["code"], code) << c.body;
  }
  // Lost events after the start: the stream ends with the error, not silently.
  Fake().watch_refusal.reset();
  Fake().watch_end = Error(Code::kS218, "fs.watch: events were lost");
  auto ev = Envelopes(
      Run(Envd("/filesystem.Filesystem/WatchDir", token), Envelope(kEnvelopeMessage, R"({"path":"/x"})"))
          .body);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].first, kEnvelopeEndStream);
  EXPECT_NE(ev[1].second["error"]["message"].get<std::string>().find("lost"), std::string::npos);
  // Bad requests never reach the sandbox.
  Fake().watch_request.reset();
  for (const std::string& body :
       {std::string("{}"), Envelope(kEnvelopeMessage, "{}"), Envelope(kEnvelopeMessage, R"({"path":5})"),
        Envelope(kEnvelopeMessage, R"({"path":"/x","recursive":"yes"})")}) {
    auto bad = Envelopes(Run(Envd("/filesystem.Filesystem/WatchDir", token), body).body);
    ASSERT_EQ(bad.size(), 1u);
    EXPECT_EQ(bad[0].second["error"]["code"], "invalid_argument");
  }
  EXPECT_FALSE(Fake().watch_request) << "nothing was watched";
}

TEST_F(E2bApiTest, SignedUrlsNameTheirSandboxAndNothingElse) {
  std::string token = Create();
  Request r;
  r.method = "GET";
  r.path = "/files";
  r.root_level = true;
  r.query = {{"path", "/etc/hostname"},
             {"signature", FileSignature("/etc/hostname", "read", "", token, std::nullopt)}};
  Fake().file = "box\n";
  Captured ok = Run(r);
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.body, "box\n");
  // The same signature for another path, for a write, or with an expiry
  // it was not made with: refused, and nothing is read.
  int reads = Fake().reads;
  for (auto change : std::vector<std::pair<std::string, std::string>>{
           {"path", "/etc/shadow"}, {"username", "root"}, {"signature_expiration", "99999999999"}}) {
    Request bad = r;
    bad.query[change.first] = change.second;
    Captured c = Run(bad);
    EXPECT_EQ(c.status, 401) << change.first;
    EXPECT_EQ(c.Json().value("message", ""), "invalid signature") << change.first;
  }
  r.query.erase("signature");
  EXPECT_EQ(Run(r).Json().value("message", ""), "missing signature query parameter");
  EXPECT_EQ(Fake().reads, reads);
}

TEST_F(E2bApiTest, UploadsRawGzipAndMultipartInOrder) {
  std::string token = Create();
  Request r = Envd("/files", token);
  r.query = {{"path", "dir/a.txt"}};
  r.headers["content-type"] = "application/octet-stream";
  Reply raw = api.Upload(r, Pieces("plain", 2));
  EXPECT_EQ(raw.status, 200) << raw.body;
  EXPECT_EQ(Fake().write_path, "/root/dir/a.txt") << "relative to the user's home";
  EXPECT_EQ(Fake().write_data, "plain");
  EXPECT_TRUE(Fake().write_parents);

  GzipWriter w;
  std::string gz = *w.Write("inflated on the way");
  gz += *w.Finish();
  r.headers["content-encoding"] = "gzip";
  Reply zipped = api.Upload(r, Pieces(gz, 5));
  EXPECT_EQ(zipped.status, 200) << zipped.body;
  EXPECT_EQ(Fake().write_data, "inflated on the way");
  r.headers["content-encoding"] = "br";
  EXPECT_EQ(api.Upload(r, Pieces("x", 1)).status, 400);
  r.headers.erase("content-encoding");

  r.query.clear();
  r.headers["content-type"] = "multipart/form-data; boundary=XyZ";
  std::string form =
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/one\"\r\n\r\n1\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"two\"\r\n\r\n22\r\n--XyZ--\r\n";
  Reply multi = api.Upload(r, Pieces(form, 3));
  ASSERT_EQ(multi.status, 200) << multi.body;
  json files = json::parse(multi.body);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0]["path"], "/tmp/one");
  EXPECT_EQ(files[1]["path"], "/root/two");
  EXPECT_EQ(Fake().write_data, "22");
}

TEST_F(E2bApiTest, MetadataHeadersGoToEveryFileAndBadOnesAre400) {
  std::string token = Create();
  Request r = Envd("/files", token);
  r.query = {{"path", "/tmp/m"}};
  r.headers["content-type"] = "application/octet-stream";
  r.raw_headers = {{"X-Metadata-Owner", "Alice B"}, {"x-metadata-tag", ""}, {"X-Other", "no"}};
  Reply raw = api.Upload(r, Pieces("data", 2));
  ASSERT_EQ(raw.status, 200) << raw.body;
  EXPECT_EQ(Fake().write_metadata, (proto::FileMetadata{{"owner", "Alice B"}, {"tag", ""}}))
      << "keys lower-cased";
  EXPECT_EQ(json::parse(raw.body)[0]["metadata"], json({{"owner", "Alice B"}, {"tag", ""}}));

  r.query.clear();
  r.headers["content-type"] = "multipart/form-data; boundary=XyZ";
  std::string form =
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/one\"\r\n\r\n1\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"two\"\r\n\r\n22\r\n--XyZ--\r\n";
  r.raw_headers = {{"X-Metadata-K", "v"}};
  Reply multi = api.Upload(r, Pieces(form, 3));
  ASSERT_EQ(multi.status, 200) << multi.body;
  for (const json& f : json::parse(multi.body)) EXPECT_EQ(f["metadata"], json({{"k", "v"}})) << f.dump();

  // Without X-Metadata headers: none asked (the old ones go), none answered.
  r.raw_headers.clear();
  Reply plain = api.Upload(r, Pieces(form, 3));
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_TRUE(Fake().write_metadata.empty());
  for (const json& f : json::parse(plain.body)) EXPECT_FALSE(f.contains("metadata")) << f.dump();

  Fake().write_path.clear();
  for (const Headers& bad : std::vector<Headers>{{{"X-Metadata-bad:key", "v"}},
                                                 {{"X-Metadata-", "v"}},
                                                 {{"X-Metadata-k", "new\nline"}},
                                                 {{"X-Metadata-k", "caf\xc3\xa9"}},
                                                 {{"X-Metadata-k", std::string(5000, 'v')}}}) {
    r.raw_headers = bad;
    Reply refused = api.Upload(r, Pieces(form, 3));
    EXPECT_EQ(refused.status, 400) << bad[0].first;
    EXPECT_EQ(Fake().write_path, "") << "nothing written for " << bad[0].first;
  }
  Headers many;
  for (int i = 0; i <= 40; ++i) many.emplace_back("X-Metadata-k" + std::to_string(i), "v");
  r.raw_headers = many;
  EXPECT_EQ(api.Upload(r, Pieces(form, 3)).status, 400);
}

TEST_F(E2bApiTest, PolledWatchersHoldEventsUntilPolledThenAnswerTheEnd) {
  std::string token = Create();
  Fake().watch_events = {{"a.txt", proto::FsWatchChange::kCreate}, {"sub/b", proto::FsWatchChange::kWrite}};
  Captured made =
      Run(Envd("/filesystem.Filesystem/CreateWatcher", token), R"({"path":"w","recursive":true})");
  ASSERT_EQ(made.status, 200) << made.body;
  std::string id = made.Json().value("watcherId", "");
  ASSERT_EQ(id.size(), 32u) << made.body;
  ASSERT_TRUE(Fake().watch_request);
  EXPECT_EQ(Fake().watch_request->path, "/root/w") << "relative to the user's home";
  EXPECT_TRUE(Fake().watch_request->recursive);

  // The fake's watch delivered its events and ended (its directory went
  // away): the events first, each once, then not_found, then the id is gone.
  // The watch runs on its own thread: poll until both arrived.
  json poll = json{{"watcherId", id}};
  json events = json::array();
  for (int i = 0; i < 10000 && events.size() < 2; ++i) {
    Captured c = Run(Envd("/filesystem.Filesystem/GetWatcherEvents", token), poll.dump());
    ASSERT_EQ(c.status, 200) << c.body;
    json got = c.Json();
    for (const json& e : got["events"]) events.push_back(e);
    if (events.size() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(events.size(), 2u) << events.dump();
  EXPECT_EQ(events[0], json({{"name", "a.txt"}, {"type", "EVENT_TYPE_CREATE"}}));
  EXPECT_EQ(events[1], json({{"name", "sub/b"}, {"type", "EVENT_TYPE_WRITE"}}));
  int end_status = 200;
  json end_body;
  for (int i = 0; i < 10000 && end_status == 200; ++i) {  // until the thread saw the watch end
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    Captured c = Run(Envd("/filesystem.Filesystem/GetWatcherEvents", token), poll.dump());
    end_status = c.status;
    end_body = c.Json();
    if (end_status == 200) {
      EXPECT_EQ(end_body["events"], json::array()) << "no event twice";
    }
  }
  EXPECT_EQ(end_status, 404) << end_body.dump();
  EXPECT_EQ(end_body.value("code", ""), "not_found");
  Captured gone = Run(Envd("/filesystem.Filesystem/RemoveWatcher", token), poll.dump());
  EXPECT_EQ(gone.Json().value("code", ""), "not_found");

  // RemoveWatcher of a live one, then it is unknown.
  Fake().watch_events.clear();
  Fake().watch_end = Error(Code::kS004, "the sandbox stopped");
  std::string id2 = Run(Envd("/filesystem.Filesystem/CreateWatcher", token), R"({"path":"/w"})")
                        .Json()
                        .value("watcherId", "");
  ASSERT_FALSE(id2.empty());
  json poll2 = json{{"watcher_id", id2}};  // proto3-JSON's original name works too
  EXPECT_EQ(Run(Envd("/filesystem.Filesystem/RemoveWatcher", token), poll2.dump()).status, 200);
  EXPECT_EQ(Run(Envd("/filesystem.Filesystem/GetWatcherEvents", token), poll2.dump()).status, 404);

  // The watch's own refusal is CreateWatcher's answer; no id is made.
  Fake().watch_refusal = Error(Code::kS212, "not a directory or wrong type: /w");
  Captured file = Run(Envd("/filesystem.Filesystem/CreateWatcher", token), R"({"path":"/w"})");
  EXPECT_EQ(file.Json().value("code", ""), "invalid_argument") << file.body;
  EXPECT_EQ(Run(Envd("/filesystem.Filesystem/GetWatcherEvents", token), R"({})").Json().value("code", ""),
            "invalid_argument")
      << "watcherId is required";
  EXPECT_EQ(Run(Envd("/filesystem.Filesystem/GetWatcherEvents", token), R"({"watcherId":"nope"})").status,
            404);
}

TEST(E2bEntryInfo, CarriesMetadataOnlyWhenThereIsSome) {
  proto::FsEntry f;
  f.name = "f";
  f.mode = "0644";
  f.owner = f.group = "user";
  EXPECT_FALSE(EntryInfo(f, "/f").contains("metadata"));
  f.metadata = {{"k", "v"}};
  EXPECT_EQ(EntryInfo(f, "/f")["metadata"], json({{"k", "v"}}));
}

TEST_F(E2bApiTest, AFullDiskIs507AndAnUploadWithoutTheTokenWritesNothing) {
  std::string token = Create();
  Request r = Envd("/files", token);
  r.query = {{"path", "/tmp/f"}};
  ByteSource full = []() -> Result<std::string> {
    return Error(Code::kS216, "fs i/o error: /tmp/f: ENOSPC");
  };
  EXPECT_EQ(api.Upload(r, full).status, 507);
  Fake().write_path.clear();
  r.headers.erase("x-access-token");
  Reply refused = api.Upload(r, Pieces("data", 4));
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(json::parse(refused.body)["message"], "missing signature query parameter");
  EXPECT_EQ(Fake().write_path, "");
}

// Snapshots and fork (docs/e2b.md#snapshots-and-fork).

class E2bSnapshotTest : public E2bApiTest {
 protected:
  std::string Base() const { return "/sandboxes/" + std::string(kLiveId); }
  // A snapshot of the booked sandbox through the API; its answer.
  json Snap(const json& body = json::object()) {
    Captured c = Run(Control("POST", Base() + "/snapshots"), body.dump());
    EXPECT_EQ(c.status, 201) << c.body;
    return c.Json();
  }
  Request ListReq(std::map<std::string, std::string> query = {}) {
    Request r = Control("GET", "/snapshots");
    r.query = std::move(query);
    return r;
  }
  static std::vector<std::string> Ids(const json& list) {
    std::vector<std::string> out;
    for (const json& e : list) out.push_back(e.value("snapshotID", ""));
    return out;
  }
  static std::string NextToken(const Captured& c) {
    for (const auto& [k, v] : c.headers)
      if (k == "x-next-token") return v;
    return "";
  }
};

TEST_F(E2bSnapshotTest, CreateAnswers201WithItsIdAndNames) {
  Create();
  json named = Snap({{"name", "snap-1"}});
  ASSERT_EQ(Fake().snapshots.size(), 1u);
  EXPECT_EQ(named, json({{"snapshotID", Fake().snapshots[0].snapshot_id}, {"names", {"snap-1"}}}));
  EXPECT_EQ(Fake().snapshots[0].name, "snap-1");
  json unnamed = Snap();
  ASSERT_EQ(Fake().snapshots.size(), 2u);
  EXPECT_EQ(unnamed, json({{"snapshotID", Fake().snapshots[1].snapshot_id}, {"names", json::array()}}));
  EXPECT_EQ(Fake().snapshots[1].name, "");
  EXPECT_EQ(Snap({{"name", nullptr}})["names"], json::array()) << "null is no name";
}

TEST_F(E2bSnapshotTest, UnknownOrUnbookedSandboxIs404AndNothingIsSaved) {
  // The fake knows kLiveId, but E2B never created it: not E2B's sandbox.
  for (const std::string& path : {Base() + "/snapshots", std::string("/sandboxes/nope/snapshots")}) {
    Captured c = Run(Control("POST", path), R"({"name":"x"})");
    EXPECT_EQ(c.status, 404) << path;
    EXPECT_EQ(c.Json(), json({{"code", 404}, {"message", c.Json().value("message", "")}})) << c.body;
    EXPECT_NE(c.Json().value("message", ""), "");
  }
  EXPECT_TRUE(Fake().snapshots.empty());
  Captured fork = Run(Control("POST", Base() + "/fork"), "{}");
  EXPECT_EQ(fork.status, 404);
  EXPECT_EQ(fork.Json().value("code", 0), 404);
  EXPECT_EQ(Fake().last_fork_count, 0u) << "nothing was forked";
}

TEST_F(E2bSnapshotTest, HostileSnapshotBodiesAre400AndSaveNothing) {
  Create();
  CatalogEntry python;
  python.name = "python";
  Fake().catalog.push_back(python);
  Snap({{"name", "taken"}});
  for (const std::string& body : std::vector<std::string>{
           R"({"name":5})", R"({"name":""})", R"({"name":"team/snap"})", R"({"name":"snap:v1"})",
           R"({"name":"a b"})", R"({"name":"\u0000"})", json({{"name", std::string(65, 'a')}}).dump(),
           R"({"name":"3F0C1A52-6A7E-4C1E-9D2B-0B6F2A9E4D11"})", R"({"name":"base"})",
           R"({"name":"code-interpreter-v1"})", R"({"name":"python"})", R"({"name":["x"]})",
           R"({"name":"taken"})", "[1]", "{nope", "\"x\""}) {
    Captured c = Run(Control("POST", Base() + "/snapshots"), body);
    EXPECT_EQ(c.status, 400) << body << " -> " << c.body;
    EXPECT_EQ(c.Json().value("code", 0), 400) << body;
  }
  EXPECT_EQ(Fake().snapshots.size(), 1u) << "only the first one";
  EXPECT_EQ(Snap({{"name", std::string(64, 'a')}})["names"][0], std::string(64, 'a')) << "64 is the bound";
}

TEST_F(E2bSnapshotTest, ListFiltersAndPagesWithTheNextToken) {
  Create();
  Snap({{"name", "one"}});
  Snap();
  Snap({{"name", "three"}});
  SnapshotRecord other;  // another sandbox's
  other.snapshot_id = "6b6b6b6b-0000-4000-8000-000000000001";
  other.source_sandbox_id = kUnknownId;
  other.created_unix_ms = 1800000000000;
  Fake().snapshots.push_back(other);
  std::vector<std::string> mine = {Fake().snapshots[0].snapshot_id, Fake().snapshots[1].snapshot_id,
                                   Fake().snapshots[2].snapshot_id};

  Captured all = Run(ListReq());
  ASSERT_EQ(all.status, 200) << all.body;
  ASSERT_EQ(all.Json().size(), 4u);
  EXPECT_EQ(all.Json()[0], json({{"snapshotID", mine[0]}, {"names", {"one"}}}))
      << "SnapshotInfo's fields only";
  EXPECT_EQ(all.Json()[1]["names"], json::array());
  EXPECT_EQ(NextToken(all), "");

  EXPECT_EQ(Ids(Run(ListReq({{"sandboxID", kLiveId}})).Json()), mine);
  EXPECT_EQ(Ids(Run(ListReq({{"sandboxID", kUnknownId}})).Json()),
            std::vector<std::string>{other.snapshot_id});
  EXPECT_EQ(Run(ListReq({{"sandboxID", "nope"}})).Json(), json::array());
  EXPECT_EQ(Ids(Run(ListReq({{"name", "three"}})).Json()), std::vector<std::string>{mine[2]});
  EXPECT_EQ(Ids(Run(ListReq({{"name", mine[1]}})).Json()), std::vector<std::string>{mine[1]}) << "or the id";
  EXPECT_EQ(Run(ListReq({{"name", "none"}})).Json(), json::array());

  Captured p1 = Run(ListReq({{"sandboxID", kLiveId}, {"limit", "2"}}));
  EXPECT_EQ(Ids(p1.Json()), std::vector<std::string>(mine.begin(), mine.begin() + 2));
  ASSERT_EQ(NextToken(p1), mine[2]);
  Captured p2 = Run(ListReq({{"sandboxID", kLiveId}, {"limit", "2"}, {"nextToken", NextToken(p1)}}));
  EXPECT_EQ(Ids(p2.Json()), std::vector<std::string>{mine[2]});
  EXPECT_EQ(NextToken(p2), "") << "the last page";

  for (auto [k, v] : std::vector<std::pair<std::string, std::string>>{{"limit", "0"},
                                                                      {"limit", "1001"},
                                                                      {"limit", "-1"},
                                                                      {"limit", " 2"},
                                                                      {"limit", "2x"},
                                                                      {"nextToken", "nope"},
                                                                      {"name", "team/one"},
                                                                      {"name", "one:v1"},
                                                                      {"name", std::string(65, 'a')}}) {
    Captured c = Run(ListReq({{k, v}}));
    EXPECT_EQ(c.status, 400) << k << "=" << v;
    EXPECT_EQ(c.Json().value("code", 0), 400) << k << "=" << v;
  }
  Request no_key = ListReq();
  no_key.headers.erase("x-api-key");
  EXPECT_EQ(Run(no_key).status, 401);
}

TEST_F(E2bSnapshotTest, DeleteByIdOrNameIs204ThenUnknownIs404) {
  Create();
  Snap({{"name", "gone-soon"}});
  std::string id = Snap()["snapshotID"];
  Captured by_name = Run(Control("DELETE", "/templates/gone-soon"));
  EXPECT_EQ(by_name.status, 204) << by_name.body;
  EXPECT_EQ(Run(Control("DELETE", "/templates/" + id)).status, 204);
  EXPECT_TRUE(Fake().snapshots.empty());
  for (const std::string& ref :
       std::vector<std::string>{std::string("gone-soon"), id, std::string("never")}) {
    Captured c = Run(Control("DELETE", "/templates/" + ref));
    EXPECT_EQ(c.status, 404) << ref;
    EXPECT_EQ(c.Json().value("code", 0), 404) << "the SDK's deleteSnapshot reads it as false";
  }
}

TEST_F(E2bSnapshotTest, DeleteOfASnapshotInUseIs409AndOfAnImageIs400) {
  Create();
  std::string id = Snap({{"name", "busy"}})["snapshotID"];
  Fake().snapshots_in_use.insert(id);
  Captured busy = Run(Control("DELETE", "/templates/busy"));
  EXPECT_EQ(busy.status, 409) << busy.body;
  EXPECT_EQ(busy.Json().value("code", 0), 409);
  EXPECT_EQ(Fake().snapshots.size(), 1u);
  // An image's name (an alias, a catalog image) is not a snapshot's, even
  // when a snapshot of that name was made through the native API.
  SnapshotRecord shadowed;
  shadowed.snapshot_id = "6b6b6b6b-0000-4000-8000-000000000002";
  shadowed.name = "base";
  Fake().snapshots.push_back(shadowed);
  Captured image = Run(Control("DELETE", "/templates/base"));
  EXPECT_EQ(image.status, 400) << image.body;
  EXPECT_EQ(image.Json().value("code", 0), 400);
  EXPECT_EQ(Fake().snapshots.size(), 2u);
  // Hostile references never reach the service.
  for (const std::string& path :
       std::vector<std::string>{"/templates/" + std::string(65, 'a'), std::string("/templates/a%2Fb"),
                                std::string("/templates/..")}) {
    Captured c = Run(Control("DELETE", path));
    EXPECT_EQ(c.status, 404) << path;
    EXPECT_EQ(c.Json().value("code", 0), 404) << path;
  }
  EXPECT_EQ(Run(Control("DELETE", "/templates/busy/x")).status, 404) << "no such endpoint";
  EXPECT_EQ(Run(Control("DELETE", "/templates/")).status, 404);
  EXPECT_EQ(Fake().snapshots.size(), 2u);
}

TEST_F(E2bSnapshotTest, CreateFromASnapshotByIdOrName) {
  Create();
  std::string id = Snap({{"name", "golden"}})["snapshotID"];
  for (const std::string& ref : std::vector<std::string>{id, std::string("golden")}) {
    Fake().last_create = CreateSpec();
    Captured c = Run(Control("POST", "/v2/sandboxes"), json({{"templateID", ref}, {"timeout", 60}}).dump());
    ASSERT_EQ(c.status, 201) << c.body;
    EXPECT_EQ(Fake().last_create.snapshot, std::optional<std::string>(id)) << ref;
    EXPECT_EQ(Fake().last_create.image, "") << "the snapshot's";
    EXPECT_FALSE(Fake().last_create.isolation) << "the snapshot's";
    EXPECT_EQ(c.Json()["templateID"], ref);
    EXPECT_EQ(c.Json()["envdAccessToken"].get<std::string>().size(), 64u);
  }
  // An alias or a catalog image of the name wins over a snapshot of it
  // (named through the native API); an unknown name stays an image name.
  CatalogEntry python;
  python.name = "python";
  Fake().catalog.push_back(python);
  for (const char* name : {"base", "python"}) {
    SnapshotRecord shadowed;
    shadowed.snapshot_id = "6b6b6b6b-0000-4000-8000-00000000000" + std::to_string(Fake().snapshots.size());
    shadowed.name = name;
    Fake().snapshots.push_back(shadowed);
  }
  Create(json{{"templateID", "base"}});
  EXPECT_FALSE(Fake().last_create.snapshot);
  EXPECT_EQ(Fake().last_create.image, "base");
  Create(json{{"templateID", "python"}});
  EXPECT_FALSE(Fake().last_create.snapshot);
  EXPECT_EQ(Fake().last_create.image, "python");
  Create(json{{"templateID", "not-a-snapshot"}});
  EXPECT_FALSE(Fake().last_create.snapshot);
  EXPECT_EQ(Fake().last_create.image, "not-a-snapshot");
}

TEST_F(E2bSnapshotTest, ForkBooksEachCopyAsAFullE2bSandbox) {
  std::string source_token =
      Create(json{{"metadata", {{"k", "v"}}}, {"envVars", {{"A", "1"}}}, {"timeout", 600}});
  proto::FsEntry root;
  root.name = "/";
  root.is_dir = true;
  root.mode = "0755";
  root.owner = root.group = "root";
  Fake().fs_result = root.ToJson();
  Captured c = Run(Control("POST", Base() + "/fork"), R"({"count":2,"timeout":60})");
  ASSERT_EQ(c.status, 201) << c.body;
  EXPECT_EQ(Fake().last_fork_count, 2u);
  json forks = c.Json();
  ASSERT_TRUE(forks.is_array());
  ASSERT_EQ(forks.size(), 2u);
  std::set<std::string> tokens = {source_token};
  for (const json& f : forks) {
    ASSERT_EQ(f.size(), 1u) << f;
    const json& s = f["sandbox"];
    std::string id = s.value("sandboxID", "");
    EXPECT_NE(id, kLiveId);
    EXPECT_EQ(s["templateID"], "base");
    EXPECT_EQ(s["envdVersion"], "0.6.13");
    std::string token = s.value("envdAccessToken", "");
    EXPECT_EQ(token.size(), 64u);
    EXPECT_TRUE(tokens.insert(token).second) << "a token of its own";
    Captured info = Run(Control("GET", "/sandboxes/" + id));
    ASSERT_EQ(info.status, 200) << info.body;
    EXPECT_EQ(info.Json()["metadata"], json({{"k", "v"}}));
    // envd: its own token, not the source's.
    Request stat = Envd("/filesystem.Filesystem/Stat", token);
    stat.headers["e2b-sandbox-id"] = id;
    EXPECT_EQ(Run(stat, R"({"path":"/"})").status, 200);
    ASSERT_FALSE(Fake().fs_calls.empty());
    EXPECT_EQ(Fake().fs_calls.back().first, id);
    stat.headers["x-access-token"] = source_token;
    EXPECT_EQ(Run(stat, R"({"path":"/"})").status, 401);
  }
  Request listed = Control("GET", "/v2/sandboxes");
  EXPECT_EQ(Run(listed).Json().size(), 3u);
  // Each copy lives its own timeout; the source lives on.
  api.ExpireOnce(NowUnixMillis() + 30'000);
  EXPECT_EQ(Fake().last_stop, "");
  api.ExpireOnce(NowUnixMillis() + 61'000);
  EXPECT_NE(Fake().last_stop, "");
  EXPECT_NE(Fake().last_stop, kLiveId);
  EXPECT_EQ(Run(listed).Json().size(), 1u);
}

TEST_F(E2bSnapshotTest, ForkDefaultsToOneCopyOfE2bsDefaultLifetime) {
  Create(json{{"timeout", 600}});
  Captured c = Run(Control("POST", Base() + "/fork"), "");
  ASSERT_EQ(c.status, 201) << c.body;
  EXPECT_EQ(Fake().last_fork_count, 1u);
  ASSERT_EQ(c.Json().size(), 1u);
  std::string id = c.Json()[0]["sandbox"]["sandboxID"];
  api.ExpireOnce(NowUnixMillis() + 14'000);
  EXPECT_EQ(Fake().last_stop, "");
  api.ExpireOnce(NowUnixMillis() + 16'000);
  EXPECT_EQ(Fake().last_stop, id);
}

TEST_F(E2bSnapshotTest, ForkRefusesHostileBodiesUnknownSandboxesAndReportsFailures) {
  Create();
  for (const char* body : {R"({"count":0})", R"({"count":17})", R"({"count":"2"})", R"({"count":1.5})",
                           R"({"count":-1})", R"({"count":18446744073709551615})", R"({"timeout":-1})",
                           R"({"timeout":"60"})", R"({"timeout":86401})", "[1]", "{nope"}) {
    Captured c = Run(Control("POST", Base() + "/fork"), body);
    EXPECT_EQ(c.status, 400) << body << " -> " << c.body;
    EXPECT_EQ(c.Json().value("code", 0), 400) << body;
  }
  EXPECT_EQ(Fake().last_fork_count, 0u) << "nothing was forked";
  Captured unknown = Run(Control("POST", "/sandboxes/nope/fork"), "{}");
  EXPECT_EQ(unknown.status, 404) << "the SDK reads the HTTP status";
  EXPECT_EQ(unknown.Json().value("code", 0), 404);
  EXPECT_EQ(Fake().last_fork_count, 0u);
  // skiff's fork is all or nothing: its error is the request's, in E2B's
  // body, and nothing is booked.
  Fake().fork_error = Error(Code::kS400, "resource limit exceeded: max_sandboxes");
  Captured full = Run(Control("POST", Base() + "/fork"), R"({"count":3})");
  EXPECT_EQ(full.status, 429);
  EXPECT_EQ(full.Json().value("code", 0), 429);
  Fake().fork_error = Error(Code::kS300, "a VM with network cannot be snapshotted");
  EXPECT_EQ(Run(Control("POST", Base() + "/fork"), "{}").Json().value("code", 0), 500);
  EXPECT_EQ(Run(Control("GET", "/v2/sandboxes")).Json().size(), 1u);
}

TEST(E2bTenants, SnapshotsAndForksAreTheCallersTenantsOwn) {
  Fake().Reset();
  Fake().live.insert(kLiveId);
  Fake().tenants[kLiveId] = "alice";
  FakeSandboxService inner;
  TenantScope alice(inner, "alice"), bob(inner, "bob");
  Api api(
      inner,
      [&](std::string_view key) -> SandboxService* {
        return key == "alice-key" ? &alice : key == "bob-key" ? &bob : nullptr;
      },
      Options{});
  auto run = [&](const std::string& key, const std::string& method, const std::string& path,
                 const std::string& body = "") {
    Request r;
    r.method = method;
    r.path = path;
    r.headers["x-api-key"] = key;
    Captured c;
    api.Handle(r, body, c);
    return c;
  };
  ASSERT_EQ(run("alice-key", "POST", "/v2/sandboxes", "{}").status, 201);
  const std::string base = "/sandboxes/" + std::string(kLiveId);
  Captured snap = run("alice-key", "POST", base + "/snapshots", R"({"name":"alices"})");
  ASSERT_EQ(snap.status, 201) << snap.body;
  std::string id = snap.Json()["snapshotID"];
  EXPECT_EQ(Fake().snapshots.at(0).tenant, "alice");

  // Bob: alice's sandbox and snapshot are unknown to every call.
  EXPECT_EQ(run("bob-key", "POST", base + "/snapshots", "{}").status, 404);
  EXPECT_EQ(run("bob-key", "POST", base + "/fork", "{}").status, 404);
  EXPECT_EQ(run("bob-key", "GET", "/snapshots").Json(), json::array());
  for (const std::string& ref : std::vector<std::string>{id, std::string("alices")})
    EXPECT_EQ(run("bob-key", "DELETE", "/templates/" + ref).status, 404) << ref;
  Fake().last_create = CreateSpec();
  ASSERT_EQ(run("bob-key", "POST", "/v2/sandboxes", R"({"templateID":"alices"})").status, 201);
  EXPECT_FALSE(Fake().last_create.snapshot) << "bob's create never names alice's snapshot";
  EXPECT_EQ(Fake().last_create.tenant, "bob");
  EXPECT_EQ(Fake().snapshots.size(), 1u);
  EXPECT_EQ(Fake().last_fork_count, 0u);

  // Alice: hers to list, fork and delete.
  EXPECT_EQ(run("alice-key", "GET", "/snapshots").Json().size(), 1u);
  Captured fork = run("alice-key", "POST", base + "/fork", "{}");
  ASSERT_EQ(fork.status, 201) << fork.body;
  std::string copy = fork.Json()[0]["sandbox"]["sandboxID"];
  EXPECT_EQ(run("alice-key", "GET", "/sandboxes/" + copy).status, 200);
  EXPECT_EQ(run("bob-key", "GET", "/sandboxes/" + copy).status, 404);
  EXPECT_EQ(run("alice-key", "DELETE", "/templates/alices").status, 204);
  EXPECT_TRUE(Fake().snapshots.empty());
}

}  // namespace
}  // namespace skiff::e2b
