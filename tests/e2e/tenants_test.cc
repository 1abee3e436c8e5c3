// Tenants (docs/configuration.md#tenants) end to end, on the real `skiff
// serve`: with two API keys, each key lists and drives only its own
// sandboxes, and every call naming the other key's sandbox (functions over
// HTTP and the engine WebSocket, file GET and PUT) is answered byte for byte
// as an unknown id is; with one key everything is as before.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "daemon_harness.h"
#include "ws_client.h"

namespace skiff::e2e {
namespace {

using ::testing::HasSubstr;

const char* kTwoKeys =
    "image_allowlist: [host]\n"
    "default_idle_timeout_secs: 600\n"
    "api_keys:\n"
    "  - {name: alice, token: alice-token-1}\n"
    "  - {name: bob, token: bob-token-2}\n";
// A well-formed id that no sandbox ever had.
const char* kUnknownId = "00000000-0000-4000-8000-000000000000";

std::string Bearer(const std::string& token) { return "Authorization: Bearer " + token; }

// `s` with every occurrence of `from` replaced by `to`.
std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

class TenantsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    daemon_ = new Daemon(kTwoKeys);
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(daemon_->ready()) << "daemon did not start:\n" << daemon_->Log(); }
  Daemon& d() { return *daemon_; }

  Http Call(const std::string& token, const std::string& fn, const json& payload) {
    return d().Post("/v1/functions/" + fn, payload.dump(), {Bearer(token)});
  }
  std::string Create(const std::string& token) {
    auto r = Call(token, "sandbox::create", {{"image", "host"}});
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json().value("sandbox_id", "");
  }
  std::vector<std::string> ListedIds(const std::string& token) {
    auto r = Call(token, "sandbox::list", json::object());
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<std::string> ids;
    json list = r.Json();  // kept: a range over a temporary's member would dangle
    for (const auto& e : list["sandboxes"]) ids.push_back(e["sandbox_id"]);
    return ids;
  }

  static Daemon* daemon_;
};
Daemon* TenantsTest::daemon_ = nullptr;

// One request naming a sandbox: how `token` calls it for `id`.
struct IdCall {
  std::string what;
  std::function<Http(const std::string& id)> call;
};

TEST_F(TenantsTest, MissingOrWrongKeyIs401) {
  EXPECT_EQ(d().Get("/healthz").status, 200);
  EXPECT_EQ(d().Get("/v1/functions").status, 401);
  EXPECT_EQ(d().Get("/v1/functions", {Bearer("wrong")}).status, 401);
  EXPECT_EQ(d().Get("/v1/functions", {Bearer("alice-token-")}).status, 401);  // a prefix of a key
  EXPECT_EQ(d().Get("/v1/functions", {Bearer("alice-token-1")}).status, 200);
  EXPECT_EQ(d().Get("/v1/functions", {Bearer("bob-token-2")}).status, 200);
  EXPECT_EQ(d().Post("/v1/functions/sandbox::list", "{}").status, 401);
  EXPECT_EQ(d().Get("/metrics").status, 401);
  WsClient none, wrong, good;
  EXPECT_EQ(none.Open(d(), "/"), 401);
  EXPECT_EQ(wrong.Open(d(), "/?token=nope"), 401);
  EXPECT_EQ(good.Open(d(), "/?token=bob-token-2"), 101);
}

TEST_F(TenantsTest, AnotherKeysSandboxIsAnUnknownIdToEveryCall) {
  const std::string a = "alice-token-1", b = "bob-token-2";
  std::string id = Create(a);
  ASSERT_FALSE(id.empty());
  EXPECT_THAT(ListedIds(a), ::testing::Contains(id));
  EXPECT_THAT(ListedIds(b), ::testing::Not(::testing::Contains(id)));
  ASSERT_EQ(
      Call(a, "sandbox::fs::write", {{"sandbox_id", id}, {"path", "/tmp/secret"}, {"content", "alice's"}})
          .status,
      200);

  std::string body = "bob was here";
  std::vector<IdCall> calls = {
      {"exec",
       [&](const std::string& x) {
         return Call(b, "sandbox::exec", {{"sandbox_id", x}, {"cmd", "id"}});
       }},
      {"fs::read",
       [&](const std::string& x) {
         return Call(b, "sandbox::fs::read", {{"sandbox_id", x}, {"path", "/tmp/secret"}});
       }},
      {"fs::write",
       [&](const std::string& x) {
         return Call(b, "sandbox::fs::write",
                     {{"sandbox_id", x}, {"path", "/tmp/secret"}, {"content", "bob"}});
       }},
      {"fs::ls",
       [&](const std::string& x) {
         return Call(b, "sandbox::fs::ls", {{"sandbox_id", x}, {"path", "/tmp"}});
       }},
      {"fs::stat",
       [&](const std::string& x) {
         return Call(b, "sandbox::fs::stat", {{"sandbox_id", x}, {"path", "/tmp/secret"}});
       }},
      {"fs::mkdir",
       [&](const std::string& x) {
         return Call(b, "sandbox::fs::mkdir", {{"sandbox_id", x}, {"path", "/tmp/d"}});
       }},
      {"fs::chmod",
       [&](const std::string& x) {
         return Call(b, "sandbox::fs::chmod", {{"sandbox_id", x}, {"path", "/tmp/secret"}, {"mode", "0777"}});
       }},
      {"fs::grep",
       [&](const std::string& x) {
         return Call(b, "sandbox::fs::grep", {{"sandbox_id", x}, {"path", "/tmp"}, {"pattern", "alice"}});
       }},
      {"fs::sed",
       [&](const std::string& x) {
         return Call(
             b, "sandbox::fs::sed",
             {{"sandbox_id", x}, {"path", "/tmp/secret"}, {"pattern", "alice"}, {"replacement", "bob"}});
       }},
      {"fs::mv",
       [&](const std::string& x) {
         return Call(b, "sandbox::fs::mv",
                     {{"sandbox_id", x}, {"src", "/tmp/secret"}, {"dst", "/tmp/moved"}});
       }},
      {"fs::rm",
       [&](const std::string& x) {
         return Call(b, "sandbox::fs::rm", {{"sandbox_id", x}, {"path", "/tmp/secret"}});
       }},
      {"stop",
       [&](const std::string& x) {
         return Call(b, "sandbox::stop", {{"sandbox_id", x}, {"wait", true}});
       }},
      {"GET files",
       [&](const std::string& x) {
         return d().Get("/v1/sandboxes/" + x + "/files?path=/tmp/secret", {Bearer(b)});
       }},
      {"PUT files",
       [&](const std::string& x) {
         return d().Request("PUT", "/v1/sandboxes/" + x + "/files?path=/tmp/secret", &body, {Bearer(b)});
       }},
  };
  for (const auto& c : calls) {
    Http theirs = c.call(id);
    Http unknown = c.call(kUnknownId);
    EXPECT_EQ(unknown.status, 404) << c.what << ": " << unknown.body;
    EXPECT_EQ(unknown.Json().value("code", ""), "S002") << c.what << ": " << unknown.body;
    EXPECT_EQ(theirs.status, unknown.status) << c.what;
    EXPECT_EQ(Replace(theirs.body, id, "<id>"), Replace(unknown.body, kUnknownId, "<id>")) << c.what;
    EXPECT_EQ(theirs.headers.count("content-length") ? theirs.headers["content-length"] : "",
              unknown.headers.count("content-length") ? unknown.headers["content-length"] : "")
        << c.what;
  }

  // The engine WebSocket: the connection authenticates once, its calls are
  // bob's.
  WsClient ws;
  ASSERT_EQ(ws.Open(d(), "/", Bearer(b) + "\r\n"), 101);
  ASSERT_TRUE(ws.RecvJson());  // workerregistered
  auto invoke = [&](const std::string& inv, const std::string& fn, const json& data) {
    ws.SendJson({{"type", "invokefunction"}, {"invocation_id", inv}, {"function_id", fn}, {"data", data}});
    auto m = ws.RecvJson(30000);
    EXPECT_TRUE(m) << fn;
    if (!m) return std::string();
    EXPECT_EQ((*m)["invocation_id"], inv);
    m->erase("invocation_id");
    return m->dump();
  };
  auto payload = [](const std::string& fn, const std::string& x) {
    json p = {{"sandbox_id", x}};
    if (fn == "sandbox::exec") p["cmd"] = "id";
    if (fn == "sandbox::fs::ls") p["path"] = "/tmp";
    return p;
  };
  for (const std::string fn : {"sandbox::exec", "sandbox::fs::ls", "sandbox::stop"}) {
    std::string t = invoke("t", fn, payload(fn, id)), u = invoke("u", fn, payload(fn, kUnknownId));
    EXPECT_THAT(u, HasSubstr("S002")) << fn;
    EXPECT_EQ(Replace(t, id, "<id>"), Replace(u, kUnknownId, "<id>")) << fn;
  }
  std::string listed = invoke("l", "sandbox::list", json::object());
  EXPECT_THAT(listed, ::testing::Not(HasSubstr(id)));

  // Nothing of alice's sandbox shows in bob's /metrics.
  auto metrics = d().Get("/metrics", {Bearer(b)});
  ASSERT_EQ(metrics.status, 200);
  EXPECT_THAT(metrics.body, ::testing::Not(HasSubstr(id)));

  // Alice's sandbox is untouched and hers to drive: bob's write, sed, mv,
  // rm and stop did nothing.
  EXPECT_THAT(ListedIds(a), ::testing::Contains(id));
  auto rd = Call(a, "sandbox::fs::read", {{"sandbox_id", id}, {"path", "/tmp/secret"}});
  ASSERT_EQ(rd.status, 200) << rd.body;
  EXPECT_EQ(rd.Json()["body"], "alice's");
  auto ex = Call(a, "sandbox::exec", {{"sandbox_id", id}, {"cmd", "cat /tmp/secret"}});
  ASSERT_EQ(ex.status, 200) << ex.body;
  EXPECT_EQ(ex.Json()["stdout"], "alice's");
  auto get = d().Get("/v1/sandboxes/" + id + "/files?path=/tmp/secret", {Bearer(a)});
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.body, "alice's");
  WsClient aws;
  ASSERT_EQ(aws.Open(d(), "/?token=" + a), 101);
  ASSERT_TRUE(aws.RecvJson());
  aws.SendJson({{"type", "invokefunction"},
                {"invocation_id", "al"},
                {"function_id", "sandbox::list"},
                {"data", json::object()}});
  auto al = aws.RecvJson(30000);
  ASSERT_TRUE(al);
  EXPECT_THAT(al->dump(), HasSubstr(id));
  auto st = Call(a, "sandbox::stop", {{"sandbox_id", id}, {"wait", true}});
  EXPECT_EQ(st.status, 200) << st.body;
  EXPECT_THAT(ListedIds(a), ::testing::Not(::testing::Contains(id)));
}

TEST_F(TenantsTest, EachKeySeesOnlyWhatItCreated) {
  const std::string a = "alice-token-1", b = "bob-token-2";
  std::string mine = Create(a);
  // sandbox::run's sandbox is the caller's too, kept or not.
  auto run = Call(b, "sandbox::run",
                  {{"image", "host"}, {"lang", "sh"}, {"code", "echo ran"}, {"keep_sandbox", true}});
  ASSERT_EQ(run.status, 200) << run.body;
  std::string kept = run.Json().value("sandbox_id", "");
  ASSERT_FALSE(kept.empty()) << run.body;
  auto a_ids = ListedIds(a), b_ids = ListedIds(b);
  EXPECT_THAT(a_ids, ::testing::Contains(mine));
  EXPECT_THAT(a_ids, ::testing::Not(::testing::Contains(kept)));
  EXPECT_THAT(b_ids, ::testing::Contains(kept));
  EXPECT_THAT(b_ids, ::testing::Not(::testing::Contains(mine)));
  EXPECT_EQ(Call(a, "sandbox::exec", {{"sandbox_id", kept}, {"cmd", "true"}}).status, 404);
  EXPECT_EQ(Call(b, "sandbox::exec", {{"sandbox_id", kept}, {"cmd", "true"}}).status, 200);
  EXPECT_EQ(Call(a, "sandbox::stop", {{"sandbox_id", mine}, {"wait", true}}).status, 200);
  EXPECT_EQ(Call(b, "sandbox::stop", {{"sandbox_id", kept}, {"wait", true}}).status, 200);
}

// One key is the single-key case of auth_token: no tenants, everything as
// before.
TEST(TenantsSingleKeyTest, OneKeyBehavesAsAuthToken) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  Daemon d("image_allowlist: [host]\napi_keys: [{name: solo, token: solo-token}]\n");
  ASSERT_TRUE(d.ready()) << d.Log();
  EXPECT_EQ(d.Get("/v1/functions").status, 401);
  EXPECT_EQ(d.Get("/v1/functions", {Bearer("wrong")}).status, 401);
  auto cr = d.Post("/v1/functions/sandbox::create", json{{"image", "host"}}.dump(), {Bearer("solo-token")});
  ASSERT_EQ(cr.status, 200) << cr.body;
  std::string id = cr.Json()["sandbox_id"];
  auto ls = d.Post("/v1/functions/sandbox::list", "{}", {Bearer("solo-token")});
  EXPECT_THAT(ls.body, HasSubstr(id));
  WsClient ws;
  ASSERT_EQ(ws.Open(d, "/?token=solo-token"), 101);
  ASSERT_TRUE(ws.RecvJson());
  ws.SendJson({{"type", "invokefunction"},
               {"invocation_id", "x"},
               {"function_id", "sandbox::exec"},
               {"data", {{"sandbox_id", id}, {"cmd", "echo hi"}}}});
  auto m = ws.RecvJson(30000);
  ASSERT_TRUE(m);
  EXPECT_THAT(m->dump(), HasSubstr("hi\\n"));
  auto st = d.Post("/v1/functions/sandbox::stop", json{{"sandbox_id", id}, {"wait", true}}.dump(),
                   {Bearer("solo-token")});
  EXPECT_EQ(st.status, 200) << st.body;
}

// Bad api_keys stop the daemon at start, naming the key.
TEST(TenantsConfigTest, BadApiKeysStopTheDaemon) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  Daemon dup("api_keys: [{name: a, token: dup-secret-77}, {name: b, token: dup-secret-77}]\n");
  EXPECT_EQ(dup.exit_status(), 2);
  EXPECT_THAT(dup.Log(), HasSubstr("invalid config: api_keys[1].token"));
  EXPECT_THAT(dup.Log(), ::testing::Not(HasSubstr("dup-secret-77")));
  Daemon shape("api_keys: [{name: a}]\n");
  EXPECT_EQ(shape.exit_status(), 2);
  EXPECT_THAT(shape.Log(), HasSubstr("api_keys[0]: missing required key 'token'"));
}

}  // namespace
}  // namespace skiff::e2e
