// The real `skiff serve` binary driven over HTTP and the iii WebSocket
// protocol: function table and schemas, hostile input, errors with their
// statuses and wire objects, a sandbox lifecycle through every fs function,
// file streaming, data channels, auth, config errors and SIGTERM cleanup.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "daemon_harness.h"
#include "ws_client.h"

namespace skiff::e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const char* kConfig =
    "image_allowlist: [host, base, python, node]\n"
    "max_concurrent_exec_per_sandbox: 1\n"
    "default_idle_timeout_secs: 600\n"
    "per_image_caps: {host: {max_cpus: 2}}\n";

class DaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    daemon_ = new Daemon(kConfig);
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(daemon_->ready()) << "daemon did not start:\n" << daemon_->Log(); }
  Daemon& d() { return *daemon_; }

  // The published schema of a function (cached).
  json Schemas(const std::string& id) {
    static std::map<std::string, json> cache;
    if (!cache.count(id)) {
      auto r = d().Get("/v1/functions/" + id);
      EXPECT_EQ(r.status, 200) << id;
      cache[id] = r.Json();
    }
    return cache[id];
  }
  // Calls a function and checks the response (or error) against the contract.
  json CallOk(const std::string& fn, const json& payload) {
    auto r = d().Call(fn, payload);
    EXPECT_EQ(r.status, 200) << fn << " " << payload.dump() << " -> " << r.body;
    json body = r.Json();
    json schema = Schemas(fn)["response_schema"];
    EXPECT_EQ(Validate(body, schema, schema), "") << fn << ": " << r.body;
    return body;
  }
  json CallErr(const std::string& fn, const json& payload, const std::string& code, int status) {
    auto r = d().Call(fn, payload);
    EXPECT_EQ(r.status, status) << fn << " " << payload.dump() << " -> " << r.body;
    json body = r.Json();
    EXPECT_EQ(ValidateErrorObject(body), "") << r.body;
    EXPECT_EQ(body.value("code", ""), code) << fn << " " << payload.dump() << " -> " << r.body;
    return body;
  }
  void ExpectStillServing() {
    auto h = d().Get("/healthz");
    EXPECT_EQ(h.status, 200) << h.body;
  }

  static Daemon* daemon_;
};
Daemon* DaemonTest::daemon_ = nullptr;

const std::vector<std::string> kSandboxFunctions = {"sandbox::catalog::list",
                                                    "sandbox::create",
                                                    "sandbox::exec",
                                                    "sandbox::fork",
                                                    "sandbox::fs::chmod",
                                                    "sandbox::fs::grep",
                                                    "sandbox::fs::ls",
                                                    "sandbox::fs::mkdir",
                                                    "sandbox::fs::mv",
                                                    "sandbox::fs::read",
                                                    "sandbox::fs::rm",
                                                    "sandbox::fs::sed",
                                                    "sandbox::fs::stat",
                                                    "sandbox::fs::write",
                                                    "sandbox::list",
                                                    "sandbox::metrics",
                                                    "sandbox::pause",
                                                    "sandbox::process::forget",
                                                    "sandbox::process::input",
                                                    "sandbox::process::list",
                                                    "sandbox::process::output",
                                                    "sandbox::process::resize",
                                                    "sandbox::process::signal",
                                                    "sandbox::process::start",
                                                    "sandbox::process::wait",
                                                    "sandbox::resume",
                                                    "sandbox::run",
                                                    "sandbox::snapshot",
                                                    "sandbox::snapshot::delete",
                                                    "sandbox::snapshot::list",
                                                    "sandbox::stop"};

TEST_F(DaemonTest, HealthzShape) {
  auto r = d().Get("/healthz");
  ASSERT_EQ(r.status, 200);
  json h = r.Json();
  EXPECT_EQ(h["status"], "ok");
  EXPECT_EQ(h["mode"], "server");
  EXPECT_TRUE(h["version"].is_string());
  EXPECT_TRUE(h["isolation"] == "jail" || h["isolation"] == "microvm") << r.body;
  EXPECT_TRUE(h["accel"].is_null() || h["accel"] == "kvm" || h["accel"] == "tcg");
  EXPECT_TRUE(h["isolation_available"].is_array());
  EXPECT_TRUE(h["sandboxes"].is_number_integer());
}

TEST_F(DaemonTest, FunctionListAndSchemas) {
  auto r = d().Get("/v1/functions");
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<std::string> ids;
  json listed = r.Json();
  for (const auto& f : listed["functions"]) {
    ids.push_back(f["function_id"]);
    EXPECT_EQ(f["worker_name"], "iii-sandbox");
    EXPECT_EQ(f["namespace"], "default");
  }
  // The sandbox functions, then a fleet router's questions to a host (docs/multihost.md).
  std::vector<std::string> expected = kSandboxFunctions;
  expected.insert(expected.end(), {"skiff::host::has", "skiff::host::status"});
  EXPECT_EQ(ids, expected);
  auto all = d().Get("/v1/functions?include_internal=true").Json()["functions"];
  std::set<std::string> internal;
  for (const auto& f : all) {
    if (f["worker_name"] == "iii-engine-functions") internal.insert(f["function_id"]);
  }
  EXPECT_EQ(internal, (std::set<std::string>{"engine::channels::create", "engine::functions::info",
                                             "engine::functions::list"}));
  auto pre = d().Get("/v1/functions?prefix=sandbox%3A%3Afs").Json()["functions"];
  EXPECT_EQ(pre.size(), 10u);

  for (const auto& id : kSandboxFunctions) {
    for (const std::string& path : {id, std::string("sandbox%3A%3A") + id.substr(9)}) {
      auto info = d().Get("/v1/functions/" + path);
      ASSERT_EQ(info.status, 200) << path;
      json j = info.Json();
      EXPECT_EQ(j["function_id"], id);
      for (const char* k : {"request_schema", "response_schema"}) {
        const json& s = j[k];
        EXPECT_EQ(s["$schema"], "http://json-schema.org/draft-07/schema#") << id << " " << k;
        EXPECT_EQ(s["type"], "object") << id << " " << k;
        EXPECT_FALSE(s.dump().find("\"additionalProperties\":false") != std::string::npos);
        ASSERT_TRUE(s.contains("examples") && !s["examples"].empty()) << id << " " << k;
        for (const auto& ex : s["examples"]) {
          EXPECT_EQ(Validate(ex, s, s), "") << id << " " << k << " example " << ex.dump();
        }
        for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) {
          EXPECT_TRUE(it->contains("description")) << id << " " << k << "." << it.key();
        }
      }
    }
  }
  auto missing = d().Get("/v1/functions/sandbox::nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.Json()["code"], "function_not_found");
  EXPECT_EQ(missing.Json()["message"], "function 'sandbox::nope' is not provided by skiff");
}

TEST_F(DaemonTest, BadInputIsRejectedAndDaemonKeepsServing) {
  // Not JSON.
  auto r = d().Post("/v1/functions/sandbox::list", "{nope");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(ValidateErrorObject(r.Json()), "");
  EXPECT_THAT(r.Json()["message"].get<std::string>(),
              StartsWith("invalid request: payload is not valid JSON: "));
  // Not an object.
  r = d().Post("/v1/functions/sandbox::list", "[1,2]");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["message"], "invalid request: payload must be a JSON object, got array");
  r = d().Post("/v1/functions/sandbox::create", "\"python\"");
  EXPECT_EQ(r.Json()["message"], "invalid request: payload must be a JSON object, got string");
  // Empty body and null are {}.
  EXPECT_EQ(d().Post("/v1/functions/sandbox::list", "").status, 200);
  EXPECT_EQ(d().Post("/v1/functions/sandbox::list", "null").status, 200);
  // Unknown fields are ignored.
  EXPECT_EQ(d().Call("sandbox::list", {{"zzz", 1}, {"_caller_worker_id", "w"}}).status, 200);
  // Wrong types and missing fields.
  CallErr("sandbox::create", json::object(), "S001", 400);
  auto e = CallErr("sandbox::create", {{"image", 5}}, "S001", 400);
  EXPECT_EQ(e["message"], "invalid request: field 'image': expected string, got number");
  CallErr("sandbox::exec", {{"sandbox_id", "not-a-uuid"}, {"cmd", "ls"}}, "S001", 400);
  CallErr("sandbox::stop", {{"sandbox_id", true}}, "S001", 400);
  // 10 MB of '['.
  r = d().Post("/v1/functions/sandbox::list", std::string(10 << 20, '['));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["code"], "S001");
  // Unknown function, wrong method, unknown path.
  r = d().Call("sandbox::nope", json::object());
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.Json()["code"], "function_not_found");
  r = d().Request("DELETE", "/v1/functions/sandbox::list", nullptr);
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["allow"], "GET, POST");
  r = d().Request("POST", "/healthz", nullptr);
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["allow"], "GET");
  EXPECT_EQ(d().Get("/v2/whatever").status, 404);
  ExpectStillServing();
}

TEST_F(DaemonTest, GigabyteBodyGets413WithoutBeingRead) {
  int fd = d().Connect();
  ASSERT_GE(fd, 0);
  std::string head =
      "POST /v1/functions/sandbox::list HTTP/1.1\r\nHost: x\r\nContent-Length: 1073741824\r\n\r\n";
  ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  std::string chunk(1 << 20, 'x');
  for (int i = 0; i < 4; ++i) ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  std::string resp = ReadAll(fd, std::chrono::seconds(10));
  ::close(fd);
  ASSERT_THAT(resp, StartsWith("HTTP/1.1 413"));
  json body = json::parse(resp.substr(resp.find("\r\n\r\n") + 4), nullptr, false);
  EXPECT_EQ(body["code"], "S001");
  EXPECT_EQ(ValidateErrorObject(body), "");
  // Chunked bodies past 32 MiB are cut off too.
  fd = d().Connect();
  head = "POST /v1/functions/sandbox::list HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  ::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  char sz[32];
  std::snprintf(sz, sizeof sz, "%zx\r\n", chunk.size());
  std::string framed = std::string(sz) + chunk + "\r\n";
  for (int i = 0; i < 40; ++i) {
    if (::send(fd, framed.data(), framed.size(), MSG_NOSIGNAL) < 0) break;
  }
  resp = ReadAll(fd, std::chrono::seconds(10));
  ::close(fd);
  EXPECT_THAT(resp, StartsWith("HTTP/1.1 413"));
  ExpectStillServing();
}

TEST_F(DaemonTest, HeaderDeadlineClosesSlowClients) {
  int fd = d().Connect();
  ASSERT_GE(fd, 0);
  ::send(fd, "GET /healthz HTTP/1.1\r\n", 23, MSG_NOSIGNAL);  // and never finish
  auto t0 = std::chrono::steady_clock::now();
  std::string resp = ReadAll(fd, std::chrono::seconds(20));
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(fd);
  EXPECT_LT(secs, 15.0);
  EXPECT_GE(secs, 8.0);
  ExpectStillServing();
}

TEST_F(DaemonTest, MetricsExposition) {
  d().Call("sandbox::list", json::object());
  auto r = d().Get("/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(r.headers["content-type"], HasSubstr("version=0.0.4"));
  for (const char* m :
       {"skiff_sandboxes", "skiff_sandbox_creates_total", "skiff_sandbox_create_seconds",
        "skiff_sandboxes_reaped_total", "skiff_execs_in_flight", "skiff_exec_seconds",
        "skiff_function_calls_total", "skiff_pool_ready", "skiff_ws_connections", "skiff_build_info"}) {
    EXPECT_THAT(r.body, HasSubstr(std::string("# TYPE ") + m + " ")) << m;
  }
  EXPECT_THAT(r.body, HasSubstr("skiff_function_calls_total{function=\"sandbox::list\",result=\"ok\"}"));
}

TEST_F(DaemonTest, SandboxErrorsBeforeAnySandbox) {
  const std::string ghost = "3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11";
  auto e = CallErr("sandbox::exec", {{"sandbox_id", ghost}, {"cmd", "ls"}}, "S002", 404);
  EXPECT_EQ(e["message"], "sandbox not found: " + ghost);
  CallErr("sandbox::fs::ls", {{"sandbox_id", ghost}, {"path", "/"}}, "S002", 404);
  // Check order: a malformed request for an unknown sandbox is S001, not S002.
  CallErr("sandbox::exec", {{"sandbox_id", ghost}, {"cmd", "ls -l"}, {"args", {"/"}}}, "S001", 400);
  CallErr("sandbox::fs::mkdir", {{"sandbox_id", ghost}, {"path", "/x"}, {"mode", "rwx"}}, "S210", 400);
  CallErr("sandbox::fs::grep", {{"sandbox_id", ghost}, {"path", "/"}, {"pattern", "("}}, "S217", 400);
  CallErr("sandbox::create", {{"image", "definitely-not-an-image"}}, "S100", 400);
  CallErr("sandbox::create", {{"image", "host"}, {"cpus", 0}}, "S001", 400);
  // Files endpoints follow the same order.
  auto r = d().Get("/v1/sandboxes/" + ghost + "/files?path=/etc/hostname");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.Json()["code"], "S002");
  r = d().Get("/v1/sandboxes/nope/files?path=/x");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["message"], "invalid request: sandbox_id: not a UUID: nope");
  r = d().Get("/v1/sandboxes/" + ghost + "/files");
  EXPECT_EQ(r.status, 400);
  std::string body = "x";
  r = d().Request("PUT", "/v1/sandboxes/" + ghost + "/files?path=/x&mode=9", &body);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["code"], "S210");
  r = d().Request("PUT", "/v1/sandboxes/" + ghost + "/files?path=/x&parents=maybe", &body);
  EXPECT_EQ(r.Json()["code"], "S001");
  r = d().Request("PUT", "/v1/sandboxes/" + ghost + "/files?path=/x", &body);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.Json()["code"], "S002");
}

// A whole lifecycle on the `host` image (no install needed).
TEST_F(DaemonTest, LifecycleThroughEveryFunction) {
  auto cr = d().Call("sandbox::create", {{"image", "host"}, {"name", "e2e"}});
  ASSERT_EQ(cr.status, 200) << "create failed (needs root and a working backend): " << cr.body;
  json created = cr.Json();
  std::string id = created["sandbox_id"];
  json s = Schemas("sandbox::create")["response_schema"];
  EXPECT_EQ(Validate(created, s, s), "");

  json ex = CallOk("sandbox::exec", {{"sandbox_id", id}, {"cmd", "echo hello"}});
  EXPECT_EQ(ex["stdout"], "hello\n");
  EXPECT_EQ(ex["exit_code"], 0);
  ex = CallOk("sandbox::exec", {{"sandbox_id", id}, {"argv", {"sh", "-c", "echo err >&2; exit 3"}}});
  EXPECT_EQ(ex["exit_code"], 3);
  EXPECT_EQ(ex["stderr"], "err\n");
  auto to = CallErr("sandbox::exec", {{"sandbox_id", id}, {"argv", {"sleep", "5"}}, {"timeout_ms", 200}},
                    "S200", 504);
  EXPECT_TRUE(to.contains("details"));
  CallErr("sandbox::exec", {{"sandbox_id", id}, {"cmd", "true"}, {"workdir", "/nonexistent"}}, "S211", 404);
  // The exec cap is 1 here: a second concurrent exec is S003.
  {
    std::thread slow([&] { d().Call("sandbox::exec", {{"sandbox_id", id}, {"argv", {"sleep", "2"}}}); });
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    CallErr("sandbox::exec", {{"sandbox_id", id}, {"cmd", "true"}}, "S003", 429);
    slow.join();
  }
  CallErr("sandbox::create", {{"image", "host"}, {"cpus", 3}}, "S400", 429);

  auto list = CallOk("sandbox::list", json::object());
  bool found = false;
  for (const auto& e : list["sandboxes"]) found = found || e["sandbox_id"] == id;
  EXPECT_TRUE(found);
  CallOk("sandbox::catalog::list", json::object());

  // fs functions.
  auto mk = CallErr("sandbox::fs::mkdir", {{"sandbox_id", id}, {"path", "/tmp/a/b"}}, "S211", 404);
  EXPECT_EQ(mk["fix"], json({{"parents", true}}));
  CallOk("sandbox::fs::mkdir", {{"sandbox_id", id}, {"path", "/tmp/a/b"}, {"parents", true}});
  CallErr("sandbox::fs::mkdir", {{"sandbox_id", id}, {"path", "/tmp/a/b"}}, "S213", 409);
  auto w = CallOk("sandbox::fs::write",
                  {{"sandbox_id", id}, {"path", "/tmp/a/b/f.txt"}, {"content", "hello world\n"}});
  EXPECT_EQ(w["bytes_written"], 12);
  CallErr("sandbox::fs::write", {{"sandbox_id", id}, {"path", "/tmp/zz/f"}, {"content", "x"}}, "S211", 404);
  CallErr("sandbox::fs::write", {{"sandbox_id", id}, {"path", "/tmp/a"}, {"content", "x"}}, "S212", 409);
  auto rd = CallOk("sandbox::fs::read", {{"sandbox_id", id}, {"path", "/tmp/a/b/f.txt"}});
  EXPECT_EQ(rd["body"], "hello world\n");
  CallErr("sandbox::fs::read", {{"sandbox_id", id}, {"path", "/tmp/a"}}, "S212", 409);
  CallErr("sandbox::fs::read", {{"sandbox_id", id}, {"path", "/tmp/none"}}, "S211", 404);
  auto ls = CallOk("sandbox::fs::ls", {{"sandbox_id", id}, {"path", "/tmp/a/b"}});
  ASSERT_EQ(ls["entries"].size(), 1u);
  EXPECT_EQ(ls["entries"][0]["name"], "f.txt");
  CallOk("sandbox::fs::stat", {{"sandbox_id", id}, {"path", "/tmp/a/b/f.txt"}});
  CallOk("sandbox::fs::chmod", {{"sandbox_id", id}, {"path", "/tmp/a/b/f.txt"}, {"mode", "0600"}});
  auto g = CallOk("sandbox::fs::grep", {{"sandbox_id", id}, {"path", "/tmp/a"}, {"pattern", "wor"}});
  EXPECT_EQ(g["matches"].size(), 1u);
  CallErr("sandbox::fs::grep",
          {{"sandbox_id", id}, {"path", "/tmp/a"}, {"pattern", "x"}, {"recursive", false}}, "S210", 400);
  CallOk("sandbox::fs::sed",
         {{"sandbox_id", id}, {"path", "/tmp/a/b/f.txt"}, {"pattern", "world"}, {"replacement", "skiff"}});
  CallOk("sandbox::fs::mv", {{"sandbox_id", id}, {"src", "/tmp/a/b/f.txt"}, {"dst", "/tmp/a/g.txt"}});
  CallErr("sandbox::fs::rm", {{"sandbox_id", id}, {"path", "/tmp/a"}}, "S214", 409);
  CallOk("sandbox::fs::rm", {{"sandbox_id", id}, {"path", "/tmp/a"}, {"recursive", true}});

  // HTTP file streaming: 3 MiB up and down, byte for byte.
  std::string big;
  for (size_t i = 0; i < (3u << 20); ++i) big.push_back(static_cast<char>((i * 7 + i / 4096) & 0xff));
  auto put = d().Request("PUT", "/v1/sandboxes/" + id + "/files?path=/tmp/big.bin&mode=0640", &big);
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(put.Json()["bytes_written"], big.size());
  auto get = d().Get("/v1/sandboxes/" + id + "/files?path=/tmp/big.bin");
  ASSERT_EQ(get.status, 200);
  EXPECT_EQ(get.headers["x-skiff-size"], std::to_string(big.size()));
  EXPECT_EQ(get.headers["x-skiff-mode"], "0640");
  EXPECT_EQ(get.headers["content-type"], "application/octet-stream");
  EXPECT_TRUE(get.body == big) << "download differs from upload";
  auto missing = d().Get("/v1/sandboxes/" + id + "/files?path=/tmp/none");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.Json()["code"], "S211");

  // Streaming fs::write through a data channel, and fs::read's content channel.
  auto pair = d().Call("engine::channels::create", {{"buffer_size", 4}}).Json();
  ASSERT_TRUE(pair.contains("writer")) << pair.dump();
  std::string cid = pair["writer"]["channel_id"], key = pair["writer"]["access_key"];
  std::thread writer([&] {
    WsClient ws;
    ASSERT_EQ(ws.Open(d(), "/ws/channels/" + cid + "?key=" + key + "&dir=write"), 101);
    for (int i = 0; i < 20; ++i) ws.Send(2, std::string(65536, static_cast<char>('a' + i)));
    ws.Close();
    ws.Recv(5000);
  });
  auto sw = d().Call("sandbox::fs::write",
                     {{"sandbox_id", id}, {"path", "/tmp/chan.bin"}, {"content", pair["reader"]}});
  writer.join();
  ASSERT_EQ(sw.status, 200) << sw.body;
  EXPECT_EQ(sw.Json()["bytes_written"], 20 * 65536);
  auto rr = CallOk("sandbox::fs::read", {{"sandbox_id", id}, {"path", "/tmp/chan.bin"}});
  EXPECT_FALSE(rr.contains("body"));  // > 1 MiB
  WsClient reader;
  ASSERT_EQ(reader.Open(d(), "/ws/channels/" + rr["content"]["channel_id"].get<std::string>() +
                                 "?key=" + rr["content"]["access_key"].get<std::string>() + "&dir=read"),
            101);
  size_t total = 0;
  int close_code = -1;
  while (auto m = reader.Recv(10000)) {
    if (m->opcode == 2) {
      EXPECT_LE(m->data.size(), 65536u);
      total += m->data.size();
    } else if (m->opcode == 8) {
      close_code = WsClient::CloseCode(*m);
      break;
    }
  }
  EXPECT_EQ(total, 20u * 65536);
  EXPECT_EQ(close_code, 1000);

  // run.
  auto run = CallOk("sandbox::run", {{"image", "host"}, {"lang", "sh"}, {"code", "echo ran"}});
  EXPECT_EQ(run["stdout"], "ran\n");
  EXPECT_FALSE(run.contains("sandbox_id"));

  // stop, then everything is S002.
  auto st = CallOk("sandbox::stop", {{"sandbox_id", id}, {"wait", true}});
  EXPECT_EQ(st["stopped"], true);
  CallErr("sandbox::exec", {{"sandbox_id", id}, {"cmd", "true"}}, "S002", 404);
  CallErr("sandbox::stop", {{"sandbox_id", id}}, "S002", 404);
  ExpectStillServing();
}

TEST_F(DaemonTest, EngineWebSocketProtocol) {
  WsClient ws;
  ASSERT_EQ(ws.Open(d(), "/"), 101);
  auto first = ws.RecvJson();
  ASSERT_TRUE(first);
  EXPECT_EQ((*first)["type"], "workerregistered");
  EXPECT_TRUE((*first)["worker_id"].is_string());
  EXPECT_TRUE((*first)["reattach_token"].is_string());

  // Garbage is logged and ignored; the connection keeps working.
  ws.SendText("not json");
  ws.SendText(R"({"type":"martian"})");
  ws.SendText(R"({"type":"invokefunction"})");
  ws.Send(2, "OTLP binary telemetry");
  ws.SendText(std::string(1 << 20, '['));
  ws.SendJson({{"type", "registerfunction"}, {"id", "client::fn"}});
  ws.SendJson({{"type", "invokefunction"},
               {"invocation_id", nullptr},
               {"function_id", "engine::workers::register"},
               {"data", {{"runtime", "node"}}},
               {"action", {{"type", "void"}}}});
  ws.SendJson({{"type", "ping"}});
  auto pong = ws.RecvJson();
  ASSERT_TRUE(pong);
  EXPECT_EQ((*pong)["type"], "pong");

  ws.SendJson({{"type", "registertrigger"}, {"id", "t1"}, {"trigger_type", "cron"}, {"function_id", "f"}});
  auto trig = ws.RecvJson();
  ASSERT_TRUE(trig);
  EXPECT_EQ((*trig)["type"], "triggerregistrationresult");
  EXPECT_EQ((*trig)["id"], "t1");

  // Several invocations in flight at once; results matched by id.
  ws.SendJson({{"type", "invokefunction"}, {"invocation_id", "a1"}, {"function_id", "sandbox::list"}});
  ws.SendJson({{"type", "invokefunction"},
               {"invocation_id", "a2"},
               {"function_id", "sandbox::fs::ls"},
               {"data", {{"sandbox_id", "nope"}, {"path", "/"}}}});
  ws.SendJson({{"type", "invokefunction"}, {"invocation_id", "a3"}, {"function_id", "sandbox::nope"}});
  ws.SendJson({{"type", "invokefunction"},
               {"invocation_id", "a4"},
               {"function_id", "sandbox::list"},
               {"action", {{"type", "enqueue"}, {"queue", "q"}}}});
  ws.SendJson({{"type", "invokefunction"},
               {"invocation_id", "a5"},
               {"function_id", "engine::functions::info"},
               {"data", {{"function_id", "sandbox::exec"}}}});
  ws.SendJson({{"type", "invokefunction"},
               {"invocation_id", "a6"},
               {"function_id", "engine::functions::info"},
               {"data", json::object()}});
  ws.SendJson({{"type", "invokefunction"},
               {"invocation_id", "a7"},
               {"function_id", "sandbox::list"},
               {"namespace", "other"}});
  ws.SendJson({{"type", "invokefunction"},
               {"invocation_id", "a8"},
               {"function_id", "engine::workers::register"},
               {"data", {{"runtime", "node"}}}});
  ws.SendJson({{"type", "invokefunction"},
               {"invocation_id", nullptr},
               {"function_id", "sandbox::list"}});  // no reply
  std::map<std::string, json> got;
  while (got.size() < 8) {
    auto m = ws.RecvJson(15000);
    ASSERT_TRUE(m) << "missing replies; got " << got.size();
    ASSERT_EQ((*m)["type"], "invocationresult") << m->dump();
    got[(*m)["invocation_id"]] = *m;
  }
  EXPECT_TRUE(got["a1"]["result"].contains("sandboxes"));
  EXPECT_EQ(got["a1"]["function_id"], "sandbox::list");
  EXPECT_EQ(got["a2"]["error"]["code"], "invocation_failed");
  std::string msg = got["a2"]["error"]["message"];
  ASSERT_THAT(msg, StartsWith("handler error: {"));
  json inner = json::parse(msg.substr(msg.find('{')));
  EXPECT_EQ(inner["code"], "S001");
  EXPECT_EQ(ValidateErrorObject(inner), "");
  EXPECT_EQ(got["a3"]["error"]["code"], "function_not_found");
  EXPECT_EQ(got["a3"]["error"]["message"], "function 'sandbox::nope' is not provided by skiff");
  EXPECT_EQ(got["a4"]["error"]["code"], "enqueue_error");
  EXPECT_EQ(got["a5"]["result"]["function_id"], "sandbox::exec");
  EXPECT_TRUE(got["a5"]["result"].contains("request_schema"));
  EXPECT_EQ(got["a6"]["error"]["code"], "INVALID_ARGUMENTS");
  EXPECT_EQ(got["a7"]["error"]["code"], "function_not_found");
  EXPECT_TRUE(got["a8"].contains("result"));
  EXPECT_TRUE(got["a8"]["result"].is_null());
  // Nothing else arrives (the void and null-id invocations got no reply).
  EXPECT_FALSE(ws.RecvJson(500));

  // A frame over 32 MiB closes the connection with 1009.
  ws.Send(1, std::string(1024, ' '), uint64_t{40} << 20);
  bool saw_1009 = false;
  while (auto m = ws.Recv(10000)) {
    if (m->opcode == 8) {
      saw_1009 = WsClient::CloseCode(*m) == 1009;
      break;
    }
  }
  EXPECT_TRUE(saw_1009);
  ExpectStillServing();
}

TEST_F(DaemonTest, DataChannelAttachRules) {
  auto pair = d().Call("engine::channels::create", json::object()).Json();
  std::string cid = pair["reader"]["channel_id"], key = pair["reader"]["access_key"];
  std::string base = "/ws/channels/" + cid + "?key=";
  {
    WsClient bad;
    EXPECT_EQ(bad.Open(d(), base + "wrong&dir=read"), 404);
  }
  {
    WsClient bad;
    EXPECT_EQ(bad.Open(d(), base + key + "&dir=sideways"), 400);
  }
  WsClient reader, writer;
  ASSERT_EQ(reader.Open(d(), base + key + "&dir=read"), 101);
  {
    WsClient again;
    EXPECT_EQ(again.Open(d(), base + key + "&dir=read"), 409);
  }
  ASSERT_EQ(writer.Open(d(), base + key + "&dir=write"), 101);
  // More frames than the buffer holds: nothing is dropped, order is kept.
  std::thread w([&] {
    for (int i = 0; i < 200; ++i) writer.Send(i % 2 ? 2 : 1, "frame " + std::to_string(i));
    writer.Close();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the buffer fill
  int n = 0, close_code = -1;
  while (auto m = reader.Recv(10000)) {
    if (m->opcode == 8) {
      close_code = WsClient::CloseCode(*m);
      break;
    }
    EXPECT_EQ(m->opcode, n % 2 ? 2 : 1);
    EXPECT_EQ(m->data, "frame " + std::to_string(n));
    ++n;
  }
  w.join();
  EXPECT_EQ(n, 200);
  EXPECT_EQ(close_code, 1000);
}

TEST(DaemonConfigTest, BadConfigExitsWith2) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  Daemon bad("listen_address: 0.0.0.0\n");
  EXPECT_TRUE(bad.exited());
  EXPECT_EQ(bad.exit_status(), 2);
  EXPECT_THAT(bad.Log(), HasSubstr("listen_address"));
  Daemon wrapped("sandbox:\n  auto_install: true\n");
  EXPECT_EQ(wrapped.exit_status(), 2);
}

TEST(DaemonCapsTest, SandboxCapIsS400) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  Daemon d("image_allowlist: [host]\nmax_concurrent_sandboxes: 0\n");
  ASSERT_TRUE(d.ready()) << d.Log();
  auto r = d.Call("sandbox::create", {{"image", "host"}});
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.Json()["code"], "S400");
  EXPECT_EQ(ValidateErrorObject(r.Json()), "");
}

TEST(DaemonAuthTest, BearerTokenRequired) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  Daemon d("auth_token: s3cret-token\n");
  ASSERT_TRUE(d.ready()) << d.Log();
  EXPECT_EQ(d.Get("/healthz").status, 200);
  EXPECT_EQ(d.Get("/v1/functions").status, 401);
  EXPECT_EQ(d.Get("/v1/functions", {"Authorization: Bearer wrong"}).status, 401);
  EXPECT_EQ(d.Get("/v1/functions", {"Authorization: Bearer s3cret-token"}).status, 200);
  EXPECT_EQ(d.Post("/v1/functions/sandbox::list", "{}").status, 401);
  WsClient no;
  EXPECT_EQ(no.Open(d, "/"), 401);
  WsClient yes;
  EXPECT_EQ(yes.Open(d, "/?token=s3cret-token"), 101);
}

TEST(DaemonLifecycleTest, SigtermStopsEverySandboxAndExitsZero) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  Daemon d("image_allowlist: [host]\n");
  ASSERT_TRUE(d.ready()) << d.Log();
  auto cr = d.Call("sandbox::create", {{"image", "host"}});
  ASSERT_EQ(cr.status, 200) << cr.body;
  std::string id = cr.Json()["sandbox_id"];
  // Busy sandbox: a long exec in flight when the signal arrives.
  std::thread busy([&] { d.Call("sandbox::exec", {{"sandbox_id", id}, {"argv", {"sleep", "60"}}}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(d.Terminate(std::chrono::seconds(30)), 0) << d.Log();
  busy.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  // Nothing of the sandbox remains mounted or running.
  std::ifstream mounts("/proc/self/mountinfo");
  std::string all((std::istreambuf_iterator<char>(mounts)), {});
  EXPECT_EQ(all.find(id), std::string::npos) << "a mount of " << id << " survived";
  std::string self_pid = std::to_string(d.pid());
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::ifstream env(e.path() / "environ");
    std::string s((std::istreambuf_iterator<char>(env)), {});
    EXPECT_EQ(s.find(id), std::string::npos) << "process " << e.path() << " mentions " << id;
  }
}

}  // namespace
}  // namespace skiff::e2e
