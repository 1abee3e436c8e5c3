// Worker mode (docs/architecture.md#transports-and-their-limits): the real `skiff serve --engine ws://…`
// joins an engine as worker `iii-sandbox`. No iii engine can be installed here, so the engine side is
// EngineDouble (engine_double.h), a double whose rules are copied from the engine's source. Covered:
// the register invocation and the 33 registerfunction messages with the same schemas as GET
// /v1/functions/{id}; invocations of sandbox::run and fs operations answered with invocationresult; an S-code
// error carried as `invocation_failed` + `handler error: {…}`; no reply for a null invocation_id; engine loss
// → /healthz engine_disconnected → retries every 2 s → reattach + re-registration, sandboxes kept; a
// workerregistered with non-string fields survived; and exit status 3 when the engine rejects the
// registration.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <random>
#include <set>

#include "channel_client.h"
#include "daemon_harness.h"
#include "engine_double.h"
#include "support/temp_dir.h"
#include "test_ca.h"

namespace skiff::e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;
using Received = EngineDouble::Received;

const char* kConfig =
    "image_allowlist: [host]\n"
    "isolation: jail\n"
    "default_idle_timeout_secs: 600\n";

const std::set<std::string> kSandboxFunctions = {"sandbox::catalog::list",
                                                 "sandbox::create",
                                                 "sandbox::exec",
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
                                                 "sandbox::resume",
                                                 "sandbox::run",
                                                 "sandbox::stop",
                                                 "sandbox::snapshot",
                                                 "sandbox::snapshot::list",
                                                 "sandbox::snapshot::delete",
                                                 "sandbox::fork",
                                                 "sandbox::process::forget",
                                                 "sandbox::process::input",
                                                 "sandbox::process::list",
                                                 "sandbox::process::output",
                                                 "sandbox::process::resize",
                                                 "sandbox::process::signal",
                                                 "sandbox::process::start",
                                                 "sandbox::process::wait",
                                                 "skiff::host::has",
                                                 "skiff::host::status"};

bool IsType(const Received& r, const std::string& t) {
  return r.msg.is_object() && r.msg.value("type", "") == t;
}

// Waits until connection `conn` has sent its 33 registerfunction frames and
// returns everything that connection sent, in order.
std::vector<json> Registration(EngineDouble& eng, int conn) {
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<json> mine;
    int regs = 0;
    for (auto& r : eng.received()) {
      if (r.conn != conn) continue;
      mine.push_back(r.msg);
      if (IsType(r, "registerfunction")) ++regs;
    }
    if (regs >= static_cast<int>(kSandboxFunctions.size())) return mine;
    std::this_thread::sleep_for(50ms);
  }
  return {};
}

// The engine invokes `fn` on the daemon's worker; its invocationresult
// (null, and a failure, when none came).
json Answer(EngineDouble& eng, Daemon& d, const std::string& inv, const std::string& fn, const json& data) {
  eng.Invoke(inv, fn, data);
  auto r = eng.WaitResult(inv);
  EXPECT_TRUE(r) << fn << "\n" << d.Log();
  return r ? *r : json();
}

json InnerError(const json& error) {
  std::string msg = error.value("message", "");
  auto brace = msg.find('{');
  if (brace == std::string::npos) return json();
  return json::parse(msg.substr(brace), nullptr, false);
}

TEST(WorkerModeTest, RegistersServesReconnectsAndReregisters) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  auto eng = std::make_unique<EngineDouble>();
  const uint16_t engine_port = eng->port();
  Daemon d(kConfig, {"--engine", eng->url()});
  ASSERT_TRUE(d.ready()) << d.Log();

  // --- registration: the register invocation first, then the 33 functions.
  auto sent = Registration(*eng, 0);
  ASSERT_FALSE(sent.empty()) << "no registration within 30 s\n" << d.Log();
  const json& first = sent.front();
  EXPECT_EQ(first["type"], "invokefunction") << first.dump();
  EXPECT_TRUE(first["invocation_id"].is_null());
  EXPECT_EQ(first["function_id"], "engine::workers::register");
  EXPECT_EQ(first["action"], json({{"type", "void"}}));
  EXPECT_EQ(first["data"]["runtime"], "cpp");
  EXPECT_EQ(first["data"]["name"], "iii-sandbox");
  EXPECT_EQ(first["data"]["pid"], d.pid());
  EXPECT_TRUE(first["data"]["version"].is_string());
  EXPECT_TRUE(first["data"]["description"].is_string());
  EXPECT_TRUE(first["data"]["os"].is_string());
  std::set<std::string> ids;
  for (size_t i = 1; i < sent.size(); ++i) {
    const json& m = sent[i];
    ASSERT_EQ(m["type"], "registerfunction") << "unexpected frame " << m.dump();
    std::string id = m["id"];
    EXPECT_TRUE(ids.insert(id).second) << id << " registered twice";
    // The same description and schemas as the HTTP function info.
    auto info = d.Get("/v1/functions/" + id);
    ASSERT_EQ(info.status, 200) << id;
    json j = info.Json();
    EXPECT_EQ(m["description"], j["description"]) << id;
    EXPECT_EQ(m["request_format"], j["request_schema"]) << id;
    EXPECT_EQ(m["response_format"], j["response_schema"]) << id;
    for (const char* f : {"request_format", "response_format"}) {
      EXPECT_EQ(m[f]["$schema"], "http://json-schema.org/draft-07/schema#") << id << " " << f;
      EXPECT_EQ(m[f]["type"], "object") << id << " " << f;
    }
  }
  EXPECT_EQ(ids, kSandboxFunctions);

  auto health = d.Get("/healthz");
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(health.Json()["mode"], "worker");
  EXPECT_EQ(health.Json()["status"], "ok");

  // --- invocations from the engine.
  eng->Invoke("run-1", "sandbox::run", {{"image", "host"}, {"lang", "sh"}, {"code", "echo worker-$((6*7))"}});
  auto run = eng->WaitResult("run-1");
  ASSERT_TRUE(run) << d.Log();
  EXPECT_EQ((*run)["function_id"], "sandbox::run");
  ASSERT_TRUE(run->contains("result")) << run->dump();
  EXPECT_EQ((*run)["result"]["stdout"], "worker-42\n");
  EXPECT_EQ((*run)["result"]["exit_code"], 0);
  EXPECT_FALSE((*run)["result"].contains("sandbox_id"));
  json run_schema = d.Get("/v1/functions/sandbox::run").Json()["response_schema"];
  EXPECT_EQ(Validate((*run)["result"], run_schema, run_schema), "");

  eng->Invoke("c-1", "sandbox::create", {{"image", "host"}});
  auto created = eng->WaitResult("c-1");
  ASSERT_TRUE(created && created->contains("result")) << (created ? created->dump() : d.Log());
  std::string sid = (*created)["result"]["sandbox_id"];

  eng->Invoke("w-1", "sandbox::fs::write",
              {{"sandbox_id", sid}, {"path", "/tmp/w.txt"}, {"content", "hello engine"}});
  auto wrote = eng->WaitResult("w-1");
  ASSERT_TRUE(wrote) << d.Log();
  EXPECT_EQ((*wrote)["result"]["bytes_written"], 12) << wrote->dump();

  // Concurrent invocations; results matched by id, whatever their order.
  eng->Invoke("st-1", "sandbox::fs::stat", {{"sandbox_id", sid}, {"path", "/tmp/w.txt"}});
  eng->Invoke("ls-1", "sandbox::fs::ls", {{"sandbox_id", sid}, {"path", "/tmp"}});
  eng->Invoke("err-1", "sandbox::fs::ls", {{"sandbox_id", sid}, {"path", "/no/such/dir"}});
  eng->Invoke("nf-1", "sandbox::nope", json::object());
  eng->Invoke(nullptr, "sandbox::list", json::object());  // no reply
  auto st = eng->WaitResult("st-1");
  auto ls = eng->WaitResult("ls-1");
  auto err = eng->WaitResult("err-1");
  auto nf = eng->WaitResult("nf-1");
  ASSERT_TRUE(st && ls && err && nf) << d.Log();
  EXPECT_EQ((*st)["result"]["size"], 12) << st->dump();
  bool listed = false;
  for (const auto& e : (*ls)["result"]["entries"]) listed = listed || e["name"] == "w.txt";
  EXPECT_TRUE(listed) << ls->dump();
  // An S-code error: invocation_failed + "handler error: " + the docs/errors.md object.
  EXPECT_FALSE(err->contains("result"));
  EXPECT_EQ((*err)["function_id"], "sandbox::fs::ls");
  EXPECT_EQ((*err)["error"]["code"], "invocation_failed");
  EXPECT_THAT((*err)["error"]["message"].get<std::string>(), StartsWith("handler error: {"));
  json inner = InnerError((*err)["error"]);
  EXPECT_EQ(inner["code"], "S211") << err->dump();
  EXPECT_EQ(ValidateErrorObject(inner), "") << inner.dump();
  EXPECT_FALSE((*err)["error"].contains("stacktrace"));
  EXPECT_EQ((*nf)["error"]["code"], "function_not_found");

  // --- the engine goes away.
  std::string old_worker = "worker-0", old_token = "token-0";
  eng.reset();
  auto down_since = std::chrono::steady_clock::now();
  bool disconnected = false;
  while (std::chrono::steady_clock::now() - down_since < 10s && !disconnected) {
    auto h = d.Get("/healthz");
    disconnected = h.status == 503 && h.Json()["status"] == "engine_disconnected";
    if (!disconnected) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(disconnected) << d.Get("/healthz").body;
  // HTTP keeps serving, and the sandbox is unaffected.
  auto list = d.Call("sandbox::list", json::object());
  ASSERT_EQ(list.status, 200);
  ASSERT_EQ(list.Json()["sandboxes"].size(), 1u);
  EXPECT_EQ(list.Json()["sandboxes"][0]["sandbox_id"], sid);
  std::this_thread::sleep_for(4s);  // refused connection attempts meanwhile

  // The engine restarts on the same port; its first two TCP accepts are
  // dropped, as by an engine that is not ready yet.
  EngineDouble::Options again;
  again.port = engine_port;
  again.drop_first = 2;
  eng = std::make_unique<EngineDouble>(again);
  auto resent = Registration(*eng, 0);
  ASSERT_FALSE(resent.empty()) << "no re-registration within 30 s\n" << d.Log();
  // Fixed retry period: 2 s between attempts (neither hammering nor stalling).
  auto accepts = eng->accept_times();
  ASSERT_GE(accepts.size(), 3u);
  for (size_t i = 1; i < 3; ++i) {
    auto gap = accepts[i] - accepts[i - 1];
    EXPECT_GE(gap, 1500ms) << "retry " << i;
    EXPECT_LE(gap, 4000ms) << "retry " << i;
  }
  // reattach first, then the register invocation, then the 33 functions.
  ASSERT_GE(resent.size(), 18u);
  EXPECT_EQ(resent[0],
            json({{"type", "reattach"}, {"previous_worker_id", old_worker}, {"reattach_token", old_token}}));
  EXPECT_EQ(resent[1]["function_id"], "engine::workers::register");
  std::set<std::string> again_ids;
  for (size_t i = 2; i < resent.size(); ++i) {
    if (resent[i]["type"] == "registerfunction") again_ids.insert(resent[i]["id"].get<std::string>());
  }
  EXPECT_EQ(again_ids, kSandboxFunctions);
  bool up = false;
  for (int i = 0; i < 50 && !up; ++i) {
    up = d.Get("/healthz").status == 200;
    if (!up) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(up);
  EXPECT_THAT(d.Log(), HasSubstr("lost the engine: read: End of file; reconnecting every 2 s"));

  // The sandbox survived the reconnect and is served through the new link.
  eng->Invoke("l-2", "sandbox::list", json::object());
  auto l2 = eng->WaitResult("l-2");
  ASSERT_TRUE(l2) << d.Log();
  ASSERT_EQ((*l2)["result"]["sandboxes"].size(), 1u);
  EXPECT_EQ((*l2)["result"]["sandboxes"][0]["sandbox_id"], sid);
  eng->Invoke("stop-1", "sandbox::stop", {{"sandbox_id", sid}, {"wait", true}});
  auto stopped = eng->WaitResult("stop-1");
  ASSERT_TRUE(stopped && stopped->contains("result")) << (stopped ? stopped->dump() : d.Log());

  // No invocationresult was ever sent for the null invocation_id.
  for (auto& r : eng->received()) {
    if (IsType(r, "invocationresult")) {
      EXPECT_FALSE(r.msg["invocation_id"].is_null()) << r.msg;
    }
  }
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

// A workerregistered whose worker_id / reattach_token are not strings (a
// hostile or broken engine) threw out of the event loop and took skiffd
// down; now the fields read as "" and the worker re-registers and serves.
TEST(WorkerModeTest, NonStringWorkerRegisteredFieldsDoNotStopTheDaemon) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  EngineDouble eng;
  Daemon d(kConfig, {"--engine", eng.url()});
  ASSERT_TRUE(d.ready()) << d.Log();
  ASSERT_FALSE(Registration(eng, 0).empty()) << "no registration within 30 s\n" << d.Log();
  eng.Send({{"type", "workerregistered"}, {"worker_id", 5}, {"reattach_token", json::array({1})}});
  eng.Invoke("list-1", "sandbox::list", json::object());
  auto listed = eng.WaitResult("list-1");
  ASSERT_TRUE(listed) << d.Log();
  EXPECT_TRUE(listed->contains("result")) << listed->dump();
  EXPECT_FALSE(d.exited()) << d.Log();
  auto health = d.Get("/healthz");
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

// With tenancy on (docs/configuration.md#tenants) the engine's invocations
// are the fixed tenant "engine": they see what the engine created, and a
// key's sandbox is an unknown id to them, as theirs is to the key.
TEST(WorkerModeTest, EngineCallsAreTheirOwnTenant) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  EngineDouble eng;
  Daemon d(std::string(kConfig) + "api_keys: [{name: alice, token: ta-1}, {name: bob, token: tb-2}]\n",
           {"--engine", eng.url()});
  ASSERT_TRUE(d.ready()) << d.Log();
  ASSERT_FALSE(Registration(eng, 0).empty()) << "no registration within 30 s\n" << d.Log();
  const std::string alice = "Authorization: Bearer ta-1";
  auto cr = d.Post("/v1/functions/sandbox::create", json{{"image", "host"}}.dump(), {alice});
  ASSERT_EQ(cr.status, 200) << cr.body;
  std::string hers = cr.Json()["sandbox_id"];
  const std::string unknown = "00000000-0000-4000-8000-000000000000";

  auto answer = [&](const std::string& inv, const std::string& fn, const json& data) {
    json r = Answer(eng, d, inv, fn, data);
    if (r.is_object()) r.erase("invocation_id");
    return r;
  };
  json listed = answer("l-1", "sandbox::list", json::object());
  EXPECT_EQ(listed["result"]["sandboxes"], json::array()) << listed.dump();
  for (const std::string fn : {"sandbox::exec", "sandbox::fs::stat", "sandbox::stop"}) {
    auto payload = [&](const std::string& id) {
      json p = {{"sandbox_id", id}};
      if (fn == "sandbox::exec") p["cmd"] = "true";
      if (fn == "sandbox::fs::stat") p["path"] = "/";
      return p;
    };
    std::string theirs = answer("t-" + fn, fn, payload(hers)).dump();
    std::string none = answer("u-" + fn, fn, payload(unknown)).dump();
    EXPECT_THAT(none, HasSubstr("S002")) << fn;
    for (size_t at = theirs.find(hers); at != std::string::npos; at = theirs.find(hers))
      theirs.replace(at, hers.size(), unknown);
    EXPECT_EQ(theirs, none) << fn;
  }

  json created = answer("c-1", "sandbox::create", {{"image", "host"}});
  ASSERT_TRUE(created.contains("result")) << created.dump();
  std::string engines = created["result"]["sandbox_id"];
  json again = answer("l-2", "sandbox::list", json::object());
  ASSERT_EQ(again["result"]["sandboxes"].size(), 1u) << again.dump();
  EXPECT_EQ(again["result"]["sandboxes"][0]["sandbox_id"], engines);
  auto theirs_to_alice =
      d.Post("/v1/functions/sandbox::exec", json{{"sandbox_id", engines}, {"cmd", "true"}}.dump(), {alice});
  EXPECT_EQ(theirs_to_alice.status, 404) << theirs_to_alice.body;
  auto alices = d.Post("/v1/functions/sandbox::list", "{}", {alice}).Json();
  ASSERT_EQ(alices["sandboxes"].size(), 1u) << alices.dump();
  EXPECT_EQ(alices["sandboxes"][0]["sandbox_id"], hers);
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

TEST(WorkerModeTest, RejectedRegistrationExitsWith3) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  EngineDouble::Options o;
  o.reject_function_id = "sandbox::exec";
  EngineDouble eng(o);
  Daemon d(kConfig, {"--engine", eng.url()});
  int status = d.exited() ? d.exit_status() : d.WaitExit(30s);
  EXPECT_EQ(status, 3) << d.Log();
  std::string log = d.Log();
  EXPECT_THAT(log, HasSubstr("registration rejected"));
  EXPECT_THAT(log, HasSubstr("FUNCTION_NAMESPACE_CONFLICT"));
  EXPECT_THAT(log, HasSubstr("sandbox::exec"));
  EXPECT_THAT(log, HasSubstr("another-iii-sandbox"));
}

// One host of a fleet (docs/multihost.md): the namespace rides on the
// register invocation; skiff::host::status and ::has answer the router; a
// sandbox id chosen by the caller makes a retried create safe.
TEST(WorkerModeTest, AFleetHostRegistersInItsNamespaceAndAnswersTheRouter) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  EngineDouble eng;
  Daemon d(kConfig, {"--engine", eng.url(), "--iii-namespace", "skiff.node-1"});
  ASSERT_TRUE(d.ready()) << d.Log();
  auto sent = Registration(eng, 0);
  ASSERT_FALSE(sent.empty()) << d.Log();
  EXPECT_EQ(sent.front()["function_id"], "engine::workers::register");
  EXPECT_EQ(sent.front()["data"]["namespace"], "skiff.node-1") << sent.front().dump();
  EXPECT_EQ(sent.front()["data"]["name"], "iii-sandbox");

  auto answer = [&](const std::string& inv, const std::string& fn, const json& data) {
    return Answer(eng, d, inv, fn, data);
  };
  json status = answer("s-1", "skiff::host::status", json::object());
  ASSERT_TRUE(status.contains("result")) << status.dump();
  const json& st = status["result"];
  EXPECT_EQ(st["boot_id"].get<std::string>().size(), 36u) << st.dump();
  EXPECT_EQ(st["isolation_available"], json::array({"jail"})) << st.dump();
  EXPECT_EQ(st["max_sandboxes"], 32);
  EXPECT_EQ(st["sandboxes"], 0);

  const std::string id = "0d9c7e4b-5a61-4f3e-9a2d-1c8b7e6f5a43";
  json c1 = answer("c-1", "sandbox::create", {{"image", "host"}, {"sandbox_id", id}});
  ASSERT_TRUE(c1.contains("result")) << c1.dump() << d.Log();
  EXPECT_EQ(c1["result"]["sandbox_id"], id);
  // The retry of that create (its answer lost, say) finds the same sandbox.
  json c2 = answer("c-2", "sandbox::create", {{"image", "host"}, {"sandbox_id", "{" + id + "}"}});
  ASSERT_TRUE(c2.contains("result")) << c2.dump();
  EXPECT_EQ(c2["result"]["sandbox_id"], id);
  json listed = answer("l-1", "sandbox::list", json::object());
  ASSERT_EQ(listed["result"]["sandboxes"].size(), 1u) << listed.dump();
  // The same id for something else is refused, and nothing changes.
  json other = answer("c-3", "sandbox::create", {{"image", "python"}, {"sandbox_id", id}});
  ASSERT_TRUE(other.contains("error")) << other.dump();
  EXPECT_EQ(InnerError(other["error"])["code"], "S001") << other.dump();
  EXPECT_THAT(InnerError(other["error"])["message"].get<std::string>(), HasSubstr("already in use"));
  json bad = answer("c-4", "sandbox::create", {{"image", "host"}, {"sandbox_id", "not-a-uuid"}});
  EXPECT_EQ(InnerError(bad["error"])["code"], "S001") << bad.dump();

  json has = answer("h-1", "skiff::host::has", {{"sandbox_id", id}});
  EXPECT_EQ(has["result"], json({{"sandbox_id", id}, {"has", true}, {"state", "running"}})) << has.dump();
  json hasnt = answer("h-2", "skiff::host::has", {{"sandbox_id", "11111111-2222-4333-8444-555555555555"}});
  EXPECT_EQ(hasnt["result"]["has"], false) << hasnt.dump();
  json st2 = answer("s-2", "skiff::host::status", json::object());
  EXPECT_EQ(st2["result"]["sandboxes"], 1);
  EXPECT_EQ(st2["result"]["boot_id"], st["boot_id"]);
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

// In worker mode data channels live on the engine (docs/api.md, differences
// 1 and 2): a 3 MiB binary file goes in through a channel a caller made on
// the engine and comes back out through one skiffd made there, byte for
// byte; a small file's `content` carries its body; a reference with a wrong
// key is S001 and writes nothing.
TEST(WorkerModeTest, FileBytesStreamThroughTheEnginesChannels) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  EngineDouble eng;
  Daemon d(kConfig, {"--engine", eng.url()});
  ASSERT_TRUE(d.ready()) << d.Log();
  ASSERT_FALSE(Registration(eng, 0).empty()) << d.Log();
  auto answer = [&](const std::string& inv, const std::string& fn, const json& data) {
    return Answer(eng, d, inv, fn, data);
  };
  json c = answer("c-1", "sandbox::create", {{"image", "host"}});
  ASSERT_TRUE(c.contains("result")) << c.dump();
  const std::string sid = c["result"]["sandbox_id"];

  std::string bytes(size_t{3} << 20, '\0');
  std::mt19937 rng(42);
  for (auto& b : bytes) b = static_cast<char>(rng());
  auto create_channel = [&](const json& data) {
    json r = eng.CreateChannel(data);  // as a caller of the engine's own would
    EXPECT_TRUE(r.contains("writer")) << r.dump();
    return ChannelRefs{r["writer"], r["reader"]};
  };
  ChannelRefs up = create_channel({{"buffer_size", 8}});
  eng.Invoke("w-1", "sandbox::fs::write",
             {{"sandbox_id", sid}, {"path", "/tmp/big.bin"}, {"content", up.reader}});
  ChannelClient writer(eng.port(), up.writer_target());
  ASSERT_EQ(writer.status(), 101);
  for (size_t off = 0; off < bytes.size(); off += 65536)
    ASSERT_TRUE(writer.Binary(std::string_view(bytes).substr(off, 65536)));
  ASSERT_TRUE(writer.Close());
  auto wrote = eng.WaitResult("w-1");
  ASSERT_TRUE(wrote && wrote->contains("result")) << (wrote ? wrote->dump() : d.Log());
  EXPECT_EQ((*wrote)["result"]["bytes_written"], bytes.size());

  json rd = answer("r-1", "sandbox::fs::read", {{"sandbox_id", sid}, {"path", "/tmp/big.bin"}});
  ASSERT_TRUE(rd.contains("result")) << rd.dump();
  EXPECT_FALSE(rd["result"].contains("body"));
  EXPECT_EQ(rd["result"]["size"], bytes.size());
  const json& ref = rd["result"]["content"];
  ASSERT_TRUE(ref.is_object()) << rd.dump();
  EXPECT_EQ(ref["direction"], "read");
  auto read_all = [&](const json& r, std::string* out) {
    ChannelClient reader(eng.port(), ChannelRefs::Target(r));
    ASSERT_EQ(reader.status(), 101);
    while (auto f = reader.Next()) {
      if (f->opcode == 8) return;
      ASSERT_EQ(f->opcode, 2) << f->data;
      out->append(f->data);
    }
    ADD_FAILURE() << "the channel did not end with a close";
  };
  std::string back;
  read_all(ref, &back);
  EXPECT_EQ(back.size(), bytes.size());
  EXPECT_TRUE(back == bytes) << "the bytes read back differ";

  json ws = answer("w-2", "sandbox::fs::write",
                   {{"sandbox_id", sid}, {"path", "/tmp/s.txt"}, {"content", "hello engine"}});
  ASSERT_TRUE(ws.contains("result")) << ws.dump();
  json small = answer("r-2", "sandbox::fs::read", {{"sandbox_id", sid}, {"path", "/tmp/s.txt"}});
  EXPECT_EQ(small["result"]["body"], "hello engine") << small.dump();
  std::string small_back;
  read_all(small["result"]["content"], &small_back);
  EXPECT_EQ(small_back, "hello engine");

  ChannelRefs other = create_channel(json::object());
  json forged = other.reader;
  forged["access_key"] = "not-the-key";
  json bad = answer("w-3", "sandbox::fs::write",
                    {{"sandbox_id", sid}, {"path", "/tmp/forged"}, {"content", forged}});
  ASSERT_TRUE(bad.contains("error")) << bad.dump();
  EXPECT_EQ(InnerError(bad["error"])["code"], "S001") << bad.dump();
  EXPECT_THAT(InnerError(bad["error"])["message"].get<std::string>(),
              HasSubstr("unknown channel or wrong access key"));
  json gone = answer("s-1", "sandbox::fs::stat", {{"sandbox_id", sid}, {"path", "/tmp/forged"}});
  EXPECT_EQ(InnerError(gone["error"])["code"], "S211") << gone.dump();

  json stopped = answer("x-1", "sandbox::stop", {{"sandbox_id", sid}, {"wait", true}});
  EXPECT_TRUE(stopped.contains("result")) << stopped.dump();
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

// A followed process that says nothing still lets go of its channel once
// nobody reads it: the engine sweeps a channel whose reader never came, and
// notices a reader that left only when it passes a frame on, so skiffd's
// quiet writer sends empty frames now and then and stops when the engine
// drops it. Each follow holds one of the process's attaches until then.
TEST(WorkerModeTest, AQuietFollowedProcessLetsGoOfItsChannelWhenNobodyReads) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  EngineDouble::Options o;
  o.channel_ttl = 1000ms;
  o.channel_sweep_interval = 200ms;
  EngineDouble eng(o);
  Daemon d(kConfig, {"--engine", eng.url()});
  ASSERT_TRUE(d.ready()) << d.Log();
  ASSERT_FALSE(Registration(eng, 0).empty()) << d.Log();
  json c = Answer(eng, d, "c-1", "sandbox::create", {{"image", "host"}});
  ASSERT_TRUE(c.contains("result")) << c.dump();
  const std::string sid = c["result"]["sandbox_id"];
  json started =
      Answer(eng, d, "p-1", "sandbox::process::start", {{"sandbox_id", sid}, {"cmd", "sleep 600"}});
  ASSERT_TRUE(started.contains("result")) << started.dump();
  const int64_t pid = started["result"]["pid"];
  auto attached = [&](const std::string& inv) -> int64_t {
    json l = Answer(eng, d, inv, "sandbox::process::list", {{"sandbox_id", sid}});
    for (const json& p : l["result"]["processes"])
      if (p.value("pid", int64_t{0}) == pid) return p.value("attached", int64_t{-1});
    ADD_FAILURE() << "process " << pid << " not listed: " << l.dump();
    return -1;
  };
  auto follow = [&](const std::string& inv) {
    json r = Answer(eng, d, inv, "sandbox::process::output",
                    {{"sandbox_id", sid}, {"pid", pid}, {"follow", true}});
    EXPECT_TRUE(r.contains("result")) << r.dump();
    return r.value("result", json::object()).value("stream", json::object());
  };

  // Two follows nobody ever reads, one whose reader reads the first line and leaves.
  follow("f-1");
  follow("f-2");
  json read_once = follow("f-3");
  {
    ChannelClient reader(eng.port(), ChannelRefs::Target(read_once));
    ASSERT_EQ(reader.status(), 101);
    auto first = reader.Next();
    ASSERT_TRUE(first);
    EXPECT_THAT(first->data, HasSubstr("\"type\":\"start\"")) << first->data;
  }  // the reader leaves without a word
  // All three are attached to the process: the first probe is 5 s away.
  int64_t n = -1;
  for (int i = 0; i < 60 && (n = attached("l-" + std::to_string(i))) != 3; ++i)
    std::this_thread::sleep_for(50ms);
  ASSERT_EQ(n, 3) << d.Log();

  auto end = std::chrono::steady_clock::now() + 60s;
  int i = 0;
  while ((n = attached("m-" + std::to_string(i++))) != 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(250ms);
  EXPECT_EQ(n, 0) << "quiet followed-process writers still attached\n" << d.Log();

  json stopped = Answer(eng, d, "x-1", "sandbox::stop", {{"sandbox_id", sid}, {"wait", true}});
  EXPECT_TRUE(stopped.contains("result")) << stopped.dump();
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

// A namespace is checked like any setting, and needs worker mode.
TEST(WorkerModeTest, BadOrUselessNamespacesAreConfigErrors) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  Daemon lone(kConfig, {"--iii-namespace", "skiff.node-1"});
  EXPECT_EQ(lone.exited() ? lone.exit_status() : lone.WaitExit(10s), 2) << lone.Log();
  EXPECT_THAT(lone.Log(), HasSubstr("needs worker mode"));
  for (const char* ns : {"default", "skiff/x"}) {
    Daemon bad(kConfig, {"--engine", "ws://127.0.0.1:1", "--iii-namespace", ns});
    EXPECT_EQ(bad.exited() ? bad.exit_status() : bad.WaitExit(10s), 2) << ns << "\n" << bad.Log();
  }
  Daemon file(std::string(kConfig) + "engine_url: ws://127.0.0.1:1\niii_namespace: 'a b'\n");
  EXPECT_EQ(file.exited() ? file.exit_status() : file.WaitExit(10s), 2) << file.Log();
  EXPECT_THAT(file.Log(), HasSubstr("iii_namespace"));
}

// Waits for `text` in the daemon's log (an event, not a timing claim).
bool LogShows(Daemon& d, const std::string& text, std::chrono::seconds within = 30s) {
  auto end = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < end) {
    if (d.Log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

// docs/multihost.md#tls: across a network the link is wss://, and the
// engine's certificate must chain to the configured CA and name the host.
TEST(WorkerModeTest, JoinsAWssEngineItsCaVouchesFor) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  testing_support::TempDir dir("wss");
  TestCa ca = MakeTestCa(dir.path());
  EngineDouble::Options o;
  o.tls_cert_file = ca.server_cert_file;
  o.tls_key_file = ca.server_key_file;
  EngineDouble eng(o);
  ASSERT_THAT(eng.url(), StartsWith("wss://127.0.0.1:"));
  Daemon d(kConfig, {"--engine", eng.url(), "--engine-ca", ca.ca_cert_file});
  ASSERT_TRUE(d.ready()) << d.Log();
  auto sent = Registration(eng, 0);
  ASSERT_FALSE(sent.empty()) << "no registration over wss:// within 30 s\n" << d.Log();
  EXPECT_EQ(sent.front()["function_id"], "engine::workers::register");
  eng.Invoke("l-1", "sandbox::list", json::object());
  auto r = eng.WaitResult("l-1");
  ASSERT_TRUE(r) << d.Log();
  EXPECT_TRUE((*r)["result"]["sandboxes"].is_array()) << r->dump();
  EXPECT_EQ(d.Terminate(), 0) << d.Log();
}

TEST(WorkerModeTest, AWssEngineNotVouchedForIsNeverJoined) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  testing_support::TempDir dir("wss"), other_dir("wss");
  TestCa ca = MakeTestCa(dir.path());
  TestCa other = MakeTestCa(other_dir.path());
  EngineDouble::Options o;
  o.tls_cert_file = ca.server_cert_file;
  o.tls_key_file = ca.server_key_file;
  o.address = "0.0.0.0";  // so 127.0.0.2, a name its certificate lacks, reaches it too
  EngineDouble eng(o);
  const std::string port = std::to_string(eng.port());
  struct Case {
    std::vector<std::string> args;
    std::string why;
  };
  std::vector<Case> cases = {
      // The system's trust store does not know the test CA.
      {{"--engine", "wss://127.0.0.1:" + port}, "certificate verify failed"},
      // Another CA.
      {{"--engine", "wss://127.0.0.1:" + port, "--engine-ca", other.ca_cert_file},
       "certificate verify failed"},
      // The right CA, but the certificate does not name this address.
      {{"--engine", "wss://127.0.0.2:" + port, "--engine-ca", ca.ca_cert_file}, "IP address mismatch"},
  };
  for (const auto& c : cases) {
    Daemon d(kConfig, c.args);
    ASSERT_TRUE(d.ready()) << d.Log();
    EXPECT_TRUE(LogShows(d, c.why)) << c.args[1] << "\n" << d.Log();
    EXPECT_EQ(d.Get("/healthz").Json()["status"], "engine_disconnected");
    EXPECT_EQ(d.Terminate(), 0) << d.Log();
  }
  // Not one frame reached the engine from any of them.
  EXPECT_TRUE(eng.received().empty()) << eng.received().front().msg.dump();
}

// Every mistake in the engine link's settings is a config error (exit 2)
// at start, not a worker that silently never connects.
TEST(WorkerModeTest, EngineLinkMistakesAreConfigErrors) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  testing_support::TempDir dir("wss");
  auto write = [&](const std::string& name, const std::string& text, mode_t mode) {
    std::string path = dir / name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  };
  std::string open_token = write("open.token", "t0ken\n", 0644);
  std::string junk_ca = write("junk.pem", "junk\n", 0644);
  struct Case {
    std::string config;
    std::vector<std::string> args;
    std::string says;
  };
  std::vector<Case> cases = {
      {"", {"--engine", "ws://10.0.0.1:49134"}, "use wss://"},
      {"engine_url: ws://192.0.2.1:49134\n", {}, "use wss://"},
      {"", {"--engine", "wss://127.0.0.1:1", "--engine-token-file", open_token}, "chmod 600"},
      {"", {"--engine", "wss://127.0.0.1:1", "--engine-ca", junk_ca}, "engine_ca_file"},
      {"", {"--engine", "ws://127.0.0.1:1", "--engine-ca", junk_ca}, "engine_ca_file is for a wss:// engine"},
      {"", {"--engine-token-file", open_token}, "needs worker mode"},
  };
  for (const auto& c : cases) {
    Daemon d(std::string(kConfig) + c.config, c.args);
    EXPECT_EQ(d.exited() ? d.exit_status() : d.WaitExit(10s), 2) << c.says << "\n" << d.Log();
    EXPECT_THAT(d.Log(), HasSubstr(c.says));
  }
}

}  // namespace
}  // namespace skiff::e2e
