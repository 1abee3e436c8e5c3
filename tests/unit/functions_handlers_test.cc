// The function handlers against a SandboxService double: check order (S001
// → S210/S217 → lookup), the agent ops they build, write/read bodies and
// channels, response encoding, and the engine::* functions.
#include <gtest/gtest.h>

#include "functions/decode.h"
#include "functions/errors.h"
#include "functions/registry.h"
#include "functions_fake_manager.h"

namespace skiff {
namespace {

using nlohmann::json;
using testing::Fake;
using testing::FakeBroker;
using testing::kLiveId;
using testing::kUnknownId;

class Handlers : public ::testing::Test {
 protected:
  void SetUp() override {
    Fake().Reset();
    Fake().live.insert(kLiveId);
    manager_ = std::make_unique<testing::FakeSandboxService>();
  }
  Result<json> Call(std::string_view id, const json& payload, bool with_broker = true) {
    const FunctionDef* d = FindFunction(id);
    EXPECT_NE(d, nullptr) << id;
    CallContext ctx{*manager_, with_broker ? &broker_ : nullptr};
    return d->handler(payload, ctx);
  }
  Error Fail(std::string_view id, const json& payload, bool with_broker = true) {
    Result<json> r = Call(id, payload, with_broker);
    EXPECT_FALSE(r.ok()) << id << " " << payload.dump() << " -> " << (r.ok() ? r->dump() : "");
    if (r.ok()) return Error(Code::kS300, "unexpected success");
    return std::move(r).error();
  }
  std::unique_ptr<testing::FakeSandboxService> manager_;
  FakeBroker broker_;
};

// ---- check order ----

TEST_F(Handlers, MalformedRequestNeverReachesLookup) {
  struct Case {
    const char* fn;
    json payload;
    Code code;
  };
  std::vector<Case> cases = {
      {"sandbox::exec", {{"sandbox_id", kUnknownId}, {"cmd", "ls -l"}, {"args", {"/"}}}, Code::kS001},
      {"sandbox::exec", {{"sandbox_id", kUnknownId}, {"cmd", "echo 'x"}}, Code::kS001},
      {"sandbox::exec", {{"sandbox_id", kUnknownId}, {"cmd", "ls"}, {"env", {{"1x", "y"}}}}, Code::kS001},
      {"sandbox::exec", {{"sandbox_id", "nope"}, {"cmd", "ls"}}, Code::kS001},
      {"sandbox::fs::mkdir", {{"sandbox_id", kUnknownId}, {"path", "/a"}, {"mode", "0o755"}}, Code::kS210},
      {"sandbox::fs::mkdir", {{"sandbox_id", kUnknownId}, {"path", "/a"}, {"mode", ""}}, Code::kS210},
      {"sandbox::fs::chmod", {{"sandbox_id", kUnknownId}, {"path", "/a"}, {"mode", "rwx"}}, Code::kS210},
      {"sandbox::fs::write",
       {{"sandbox_id", kUnknownId}, {"path", "/a"}, {"content", "x"}, {"mode", "9"}},
       Code::kS210},
      {"sandbox::fs::grep", {{"sandbox_id", kUnknownId}, {"path", "/"}, {"pattern", "a("}}, Code::kS217},
      {"sandbox::fs::sed",
       {{"sandbox_id", kUnknownId}, {"pattern", "(?P<"}, {"replacement", ""}, {"files", {"/a"}}},
       Code::kS217},
      {"sandbox::fs::sed", {{"sandbox_id", kUnknownId}, {"pattern", "a"}, {"replacement", ""}}, Code::kS210},
      {"sandbox::fs::sed",
       {{"sandbox_id", kUnknownId}, {"pattern", "a"}, {"replacement", ""}, {"files", {"/a"}}, {"path", "/"}},
       Code::kS210},
      {"sandbox::fs::sed",
       {{"sandbox_id", kUnknownId}, {"pattern", ""}, {"replacement", ""}, {"path", "/"}, {"regex", false}},
       Code::kS210},
      {"sandbox::fs::ls", {{"sandbox_id", kUnknownId}, {"path", ""}}, Code::kS001},
      {"sandbox::fs::read", {{"sandbox_id", kUnknownId}, {"path", std::string("/a\0", 3)}}, Code::kS001},
      {"sandbox::fs::mv", {{"sandbox_id", kUnknownId}, {"src", "/a"}}, Code::kS001},
      {"sandbox::fs::chmod",
       {{"sandbox_id", kUnknownId}, {"path", "/a"}, {"mode", "0755"}, {"uid", -1}},
       Code::kS001},
      {"sandbox::fs::chmod",
       {{"sandbox_id", kUnknownId}, {"path", "/a"}, {"mode", "0755"}, {"gid", 4294967296ULL}},
       Code::kS001},
      {"sandbox::fs::grep",
       {{"sandbox_id", kUnknownId}, {"path", "/"}, {"pattern", "a("}, {"max_matches", 1.5}},
       Code::kS001},
      {"sandbox::stop", {{"sandbox_id", kUnknownId}, {"wait", "yes"}}, Code::kS001},
      {"sandbox::fs::stat", json::array(), Code::kS001},
  };
  for (const auto& c : cases) {
    Error e = Fail(c.fn, c.payload);
    EXPECT_EQ(e.code(), c.code) << c.fn << " " << c.payload.dump() << ": " << e.message();
  }
  EXPECT_EQ(Fake().calls, 0);
}

TEST_F(Handlers, ValidRequestForUnknownSandboxIsS002) {
  for (const auto& [fn, payload] : std::vector<std::pair<std::string, json>>{
           {"sandbox::exec", {{"sandbox_id", kUnknownId}, {"cmd", "ls"}}},
           {"sandbox::stop", {{"sandbox_id", kUnknownId}}},
           {"sandbox::fs::ls", {{"sandbox_id", kUnknownId}, {"path", "/"}}},
           {"sandbox::fs::grep", {{"sandbox_id", kUnknownId}, {"path", "/"}, {"pattern", "a"}}},
           {"sandbox::fs::write", {{"sandbox_id", kUnknownId}, {"path", "/a"}, {"content", "x"}}},
           {"sandbox::fs::read", {{"sandbox_id", kUnknownId}, {"path", "/a"}}}}) {
    Error e = Fail(fn, payload);
    EXPECT_EQ(e.code(), Code::kS002) << fn;
    EXPECT_EQ(e.message(), std::string("sandbox not found: ") + kUnknownId);
  }
}

TEST_F(Handlers, PauseAndResume) {
  auto p = Call("sandbox::pause", {{"sandbox_id", kLiveId}});
  ASSERT_TRUE(p.ok()) << p.error().ToString();
  EXPECT_EQ(*p, json({{"sandbox_id", kLiveId}, {"state", "paused"}, {"hibernated", false}}));
  EXPECT_EQ(Fail("sandbox::pause", {{"sandbox_id", kLiveId}}).code(), Code::kS006);
  auto r = Call("sandbox::resume", {{"sandbox_id", kLiveId}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(*r, json({{"sandbox_id", kLiveId}, {"state", "running"}}));
  EXPECT_EQ(Fail("sandbox::resume", {{"sandbox_id", kLiveId}}).code(), Code::kS006);
  EXPECT_EQ(Fail("sandbox::pause", {{"sandbox_id", kUnknownId}}).code(), Code::kS002);
  EXPECT_EQ(Fail("sandbox::pause", {{"sandbox_id", "not-a-uuid"}}).code(), Code::kS001);
  EXPECT_EQ(Fail("sandbox::resume", json::object()).code(), Code::kS001);
  EXPECT_EQ(Fail("sandbox::create", {{"image", "python"}, {"on_idle", "sleep"}}).code(), Code::kS001);
  auto h = Call("sandbox::pause", {{"sandbox_id", kLiveId}, {"mode", "disk"}});
  ASSERT_TRUE(h.ok()) << h.error().ToString();
  EXPECT_EQ(*h, json({{"sandbox_id", kLiveId}, {"state", "paused"}, {"hibernated", true}}));
  EXPECT_EQ(Fake().hibernated.count(kLiveId), 1u);
  EXPECT_EQ(Fail("sandbox::pause", {{"sandbox_id", kLiveId}, {"mode", "disk"}}).code(), Code::kS006);
  ASSERT_TRUE(Call("sandbox::resume", {{"sandbox_id", kLiveId}}).ok());
  EXPECT_EQ(Fake().hibernated.count(kLiveId), 0u);
  EXPECT_EQ(Fail("sandbox::pause", {{"sandbox_id", kLiveId}, {"mode", "swap"}}).code(), Code::kS001);
  ASSERT_TRUE(Call("sandbox::create", {{"image", "python"}, {"on_idle", "hibernate"}}).ok());
  EXPECT_TRUE(Fake().last_create.pause_on_idle);
  EXPECT_TRUE(Fake().last_create.hibernate_on_idle);
  EXPECT_EQ(Fail("sandbox::create", {{"image", "python"}, {"auto_resume", "yes"}}).code(), Code::kS001);
}

TEST_F(Handlers, MetricsEncodesTheSampleAndChecksTheId) {
  Fake().metrics.usage = {2, 37.5, 1000, 2000, 300, 4000};
  Fake().metrics.timestamp_unix_ms = 1764892800123;
  auto m = Call("sandbox::metrics", {{"sandbox_id", kLiveId}});
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  EXPECT_EQ(*m, (json{{"sandbox_id", kLiveId},
                      {"cpu_count", 2},
                      {"cpu_used_pct", 37.5},
                      {"mem_used_bytes", 1000},
                      {"mem_total_bytes", 2000},
                      {"disk_used_bytes", 300},
                      {"disk_total_bytes", 4000},
                      {"timestamp_ms", 1764892800123}}));
  EXPECT_EQ(Fail("sandbox::metrics", {{"sandbox_id", kUnknownId}}).code(), Code::kS002);
  EXPECT_EQ(Fail("sandbox::metrics", {{"sandbox_id", "nope"}}).code(), Code::kS001);
  EXPECT_EQ(Fail("sandbox::metrics", json::object()).code(), Code::kS001);
}

TEST_F(Handlers, SnapshotListDeleteForkAndCreateFromASnapshot) {
  auto s = Call("sandbox::snapshot", {{"sandbox_id", kLiveId}, {"name", "after-install"}});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_EQ((*s)["name"], "after-install");
  EXPECT_EQ((*s)["source_sandbox_id"], kLiveId);
  EXPECT_EQ((*s)["contents"], "disk");
  EXPECT_FALSE(s->contains("tenant")) << "the record's tenant stays inside";
  auto l = Call("sandbox::snapshot::list", json::object());
  ASSERT_TRUE(l.ok());
  ASSERT_EQ((*l)["snapshots"].size(), 1u);
  EXPECT_EQ((*l)["snapshots"][0]["snapshot_id"], (*s)["snapshot_id"]);
  // Names: not a UUID, a safe charset, 64 at most.
  for (const json& bad : {json("3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11"), json("a/b"), json(""),
                          json(std::string(65, 'a')), json(7)})
    EXPECT_EQ(Fail("sandbox::snapshot", {{"sandbox_id", kLiveId}, {"name", bad}}).code(), Code::kS001) << bad;
  EXPECT_EQ(Fail("sandbox::snapshot", {{"sandbox_id", kUnknownId}}).code(), Code::kS002);
  // Create from it: image may be left out.
  auto c = Call("sandbox::create", {{"snapshot", "after-install"}});
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(Fake().last_create.snapshot, "after-install");
  EXPECT_EQ(Fail("sandbox::create", {{"snapshot", "../x"}}).code(), Code::kS001);
  EXPECT_EQ(Fail("sandbox::create", json::object()).code(), Code::kS001) << "image or snapshot";
  // Fork.
  auto f = Call("sandbox::fork", {{"sandbox_id", kLiveId}, {"count", 3}});
  ASSERT_TRUE(f.ok()) << f.error().ToString();
  EXPECT_EQ((*f)["sandboxes"].size(), 3u);
  EXPECT_EQ(Fake().last_fork_count, 3u);
  auto one = Call("sandbox::fork", {{"sandbox_id", kLiveId}});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(Fake().last_fork_count, 1u) << "count defaults to 1";
  for (const json& bad : {json(0), json(17), json(-1), json("2")})
    EXPECT_EQ(Fail("sandbox::fork", {{"sandbox_id", kLiveId}, {"count", bad}}).code(), Code::kS001) << bad;
  // Delete.
  auto d = Call("sandbox::snapshot::delete", {{"snapshot", "after-install"}});
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  EXPECT_EQ(*d, json({{"snapshot", "after-install"}, {"deleted", true}}));
  EXPECT_EQ(Fail("sandbox::snapshot::delete", {{"snapshot", "after-install"}}).code(), Code::kS007);
  EXPECT_EQ(Fail("sandbox::snapshot::delete", json::object()).code(), Code::kS001);
}

TEST_F(Handlers, MessagesOfRequestOnlyRules) {
  EXPECT_EQ(
      Fail("sandbox::fs::sed", {{"sandbox_id", kLiveId}, {"pattern", "a"}, {"replacement", ""}}).message(),
      "sed: one of files or path is required");
  EXPECT_EQ(
      Fail("sandbox::fs::sed",
           {{"sandbox_id", kLiveId}, {"pattern", "a"}, {"replacement", ""}, {"files", {"/a"}}, {"path", "/"}})
          .message(),
      "sed: give files or path, not both");
  EXPECT_EQ(Fail("sandbox::fs::sed",
                 {{"sandbox_id", kLiveId}, {"pattern", ""}, {"replacement", ""}, {"files", {"/a"}}})
                .message(),
            "sed: pattern must not be empty");
  // An empty files list with a path is the path form.
  EXPECT_TRUE(Call("sandbox::fs::sed", {{"sandbox_id", kLiveId},
                                        {"pattern", "a"},
                                        {"replacement", ""},
                                        {"files", json::array()},
                                        {"path", "/"}})
                  .ok());
  Error re = Fail("sandbox::fs::grep", {{"sandbox_id", kLiveId}, {"path", "/"}, {"pattern", "a("}});
  EXPECT_EQ(re.message().rfind("invalid regex pattern: ", 0), 0u) << re.message();
  EXPECT_GT(re.message().size(), std::string("invalid regex pattern: ").size());
  EXPECT_EQ(
      Fail("sandbox::fs::mkdir", {{"sandbox_id", kLiveId}, {"path", "/a"}, {"mode", "17777"}}).message(),
      "invalid octal mode: 17777");
  // literal sed does not compile the pattern
  EXPECT_TRUE(Call("sandbox::fs::sed", {{"sandbox_id", kLiveId},
                                        {"pattern", "a("},
                                        {"replacement", ""},
                                        {"files", {"/a"}},
                                        {"regex", false}})
                  .ok());
}

// ---- fs ops ----

TEST_F(Handlers, FsOpsAreBuiltExactly) {
  Fake().fs_result = {{"created", true}};
  auto r = Call("sandbox::fs::mkdir",
                {{"sandbox_id", "{3F0C1A52-6A7E-4C1E-9D2B-0B6F2A9E4D11}"}, {"path", "/a/b"}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, (json{{"created", true}}));
  ASSERT_EQ(Fake().fs_calls.size(), 1u);
  EXPECT_EQ(Fake().fs_calls[0].first, kLiveId);
  EXPECT_EQ(Fake().fs_calls[0].second,
            (json{{"op", "fs.mkdir"}, {"path", "/a/b"}, {"mode", 0755}, {"parents", false}}));

  ASSERT_TRUE(
      Call("sandbox::fs::chmod",
           {{"sandbox_id", kLiveId}, {"path", "/x"}, {"mode", "4755"}, {"uid", 1000}, {"recursive", true}})
          .ok());
  EXPECT_EQ(Fake().fs_calls.back().second,
            (json{{"op", "fs.chmod"}, {"path", "/x"}, {"mode", 04755}, {"uid", 1000}, {"recursive", true}}));

  ASSERT_TRUE(Call("sandbox::fs::grep", {{"sandbox_id", kLiveId}, {"path", "/p"}, {"pattern", "TODO"}}).ok());
  EXPECT_EQ(Fake().fs_calls.back().second, (json{{"op", "fs.grep"},
                                                 {"path", "/p"},
                                                 {"pattern", "TODO"},
                                                 {"recursive", true},
                                                 {"ignore_case", false},
                                                 {"include_glob", json::array()},
                                                 {"exclude_glob", json::array()},
                                                 {"max_matches", fn::kGrepDefaultMaxMatches},
                                                 {"max_line_bytes", fn::kGrepDefaultMaxLineBytes}}));

  ASSERT_TRUE(Call("sandbox::fs::sed", {{"sandbox_id", kLiveId},
                                        {"files", {"/a", "/b"}},
                                        {"pattern", "x"},
                                        {"replacement", "$1"},
                                        {"first_only", true}})
                  .ok());
  EXPECT_EQ(Fake().fs_calls.back().second, (json{{"op", "fs.sed"},
                                                 {"files", {"/a", "/b"}},
                                                 {"pattern", "x"},
                                                 {"replacement", "$1"},
                                                 {"regex", true},
                                                 {"first_only", true},
                                                 {"ignore_case", false}}));

  ASSERT_TRUE(
      Call("sandbox::fs::mv", {{"sandbox_id", kLiveId}, {"src", "/a"}, {"dst", "/b"}, {"overwrite", true}})
          .ok());
  EXPECT_EQ(Fake().fs_calls.back().second,
            (json{{"op", "fs.mv"}, {"src", "/a"}, {"dst", "/b"}, {"overwrite", true}}));

  ASSERT_TRUE(
      Call("sandbox::fs::rm", {{"sandbox_id", kLiveId}, {"path", "/a"}, {"recursive", nullptr}}).ok());
  EXPECT_EQ(Fake().fs_calls.back().second, (json{{"op", "fs.rm"}, {"path", "/a"}, {"recursive", false}}));

  ASSERT_TRUE(
      Call("sandbox::fs::ls", {{"sandbox_id", kLiveId}, {"path", "/"}, {"_caller_worker_id", "w"}}).ok());
  EXPECT_EQ(Fake().fs_calls.back().second, (json{{"op", "fs.ls"}, {"path", "/"}}));
  ASSERT_TRUE(Call("sandbox::fs::stat", {{"sandbox_id", kLiveId}, {"path", "/"}}).ok());
  EXPECT_EQ(Fake().fs_calls.back().second, (json{{"op", "fs.stat"}, {"path", "/"}}));
}

// ---- fs::write ----

TEST_F(Handlers, WriteBodyRulesBeforeSandboxId) {
  EXPECT_EQ(Fail("sandbox::fs::write", json::object()).message(),
            "invalid request: fs::write needs a body: content (string or channel reference) or content_b64");
  EXPECT_EQ(Fail("sandbox::fs::write", {{"content", nullptr}, {"path", "/a"}}).message(),
            "invalid request: fs::write needs a body: content (string or channel reference) or content_b64");
  EXPECT_EQ(Fail("sandbox::fs::write", {{"content", "a"}, {"content_b64", "YQ=="}}).message(),
            "invalid request: fs::write takes content or content_b64, not both");
  EXPECT_EQ(Fail("sandbox::fs::write", {{"content_b64", "Y"}})
                .message()
                .rfind("invalid request: content_b64: invalid base64: ", 0),
            0u);
  EXPECT_EQ(Fail("sandbox::fs::write", {{"content", 5}}).message(),
            "invalid request: field 'content': expected channel reference or string, got number");
  EXPECT_EQ(Fail("sandbox::fs::write", {{"content", {{"channel_id", "c"}, {"access_key", "k"}}}}).message(),
            "invalid request: missing required field 'content.direction' (expected string)");
  EXPECT_EQ(Fail("sandbox::fs::write", {{"content", "x"}}).message(),
            "invalid request: missing required field 'sandbox_id' (expected string)");
  EXPECT_EQ(Fake().calls, 0);
}

TEST_F(Handlers, WriteStringAndBase64) {
  auto r =
      Call("sandbox::fs::write", {{"sandbox_id", kLiveId}, {"path", "/p/h.txt"}, {"content", "hello world"}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, (json{{"bytes_written", 11}, {"path", "/p/h.txt"}}));
  EXPECT_EQ(Fake().write_data, "hello world");
  EXPECT_EQ(Fake().write_mode, 0644u);
  EXPECT_FALSE(Fake().write_parents);

  r = Call("sandbox::fs::write", {{"sandbox_id", kLiveId},
                                  {"path", "/b"},
                                  {"content_b64", "AAEC"},
                                  {"mode", "0755"},
                                  {"parents", true}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Fake().write_data, std::string("\0\1\2", 3));
  EXPECT_EQ(Fake().write_mode, 0755u);
  EXPECT_TRUE(Fake().write_parents);
  EXPECT_EQ((*r)["bytes_written"], 3);

  r = Call("sandbox::fs::write", {{"sandbox_id", kLiveId}, {"path", "/e"}, {"content", ""}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["bytes_written"], 0);
}

TEST_F(Handlers, WriteFromChannelAttachesLazily) {
  broker_.stream_chunks = {"ab", "cd"};
  json ref = {{"channel_id", "c1"}, {"access_key", "k"}, {"direction", "write"}};
  // Unknown sandbox: the channel is never attached.
  EXPECT_EQ(Fail("sandbox::fs::write", {{"sandbox_id", kUnknownId}, {"path", "/a"}, {"content", ref}}).code(),
            Code::kS002);
  EXPECT_TRUE(broker_.attached.empty());
  auto r = Call("sandbox::fs::write", {{"sandbox_id", kLiveId}, {"path", "/a"}, {"content", ref}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(Fake().write_data, "abcd");
  ASSERT_EQ(broker_.attached.size(), 1u);
  EXPECT_EQ(broker_.attached[0], ref);
  // Without a channel transport a reference is S001.
  EXPECT_EQ(
      Fail("sandbox::fs::write", {{"sandbox_id", kLiveId}, {"path", "/a"}, {"content", ref}}, false).code(),
      Code::kS001);
}

// ---- fs::read ----

TEST_F(Handlers, ReadSmallUtf8) {
  Fake().file = "hello world";
  auto r = Call("sandbox::fs::read", {{"sandbox_id", kLiveId}, {"path", "/h"}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ((*r)["body"], "hello world");
  EXPECT_EQ((*r)["size"], 11);
  EXPECT_EQ((*r)["mode"], "0644");
  EXPECT_EQ((*r)["mtime"], 1788264000);
  EXPECT_EQ((*r)["content"]["direction"], "read");
  ASSERT_EQ(broker_.producers.size(), 1u);
  EXPECT_EQ(broker_.Drain(0), "hello world");
  EXPECT_EQ(Fake().reads, 1);  // served from the bytes read at call time
}

TEST_F(Handlers, ReadEmptyAndBinary) {
  Fake().file = "";
  auto r = Call("sandbox::fs::read", {{"sandbox_id", kLiveId}, {"path", "/e"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["body"], "");
  Fake().file = std::string("\xff\xfe\0", 3);
  r = Call("sandbox::fs::read", {{"sandbox_id", kLiveId}, {"path", "/b"}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->contains("body"));
  EXPECT_EQ(broker_.Drain(1), Fake().file);
}

TEST_F(Handlers, ReadLargeIsLazyAndChunked) {
  Fake().file = std::string(fn::kReadInlineLimit, 'a');  // exactly 1 MiB: no body
  auto r = Call("sandbox::fs::read", {{"sandbox_id", kLiveId}, {"path", "/big"}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_FALSE(r->contains("body"));
  EXPECT_EQ((*r)["size"], fn::kReadInlineLimit);
  EXPECT_EQ(Fake().reads, 1);
  std::string got = broker_.Drain(0);
  EXPECT_EQ(Fake().reads, 2);  // re-read when the reader attached
  EXPECT_EQ(got, Fake().file);
  for (size_t n : broker_.chunk_sizes) EXPECT_LE(n, fn::kChannelChunk);

  Fake().file = std::string(fn::kReadInlineLimit - 1, 'b');  // just under: body present
  r = Call("sandbox::fs::read", {{"sandbox_id", kLiveId}, {"path", "/edge"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["body"].get<std::string>().size(), fn::kReadInlineLimit - 1);
}

TEST_F(Handlers, ReadWithoutBrokerOmitsContent) {
  Fake().file = "x";
  auto r = Call("sandbox::fs::read", {{"sandbox_id", kLiveId}, {"path", "/h"}}, false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["body"], "x");
  EXPECT_FALSE(r->contains("content"));
}

// ---- lifecycle ----

TEST_F(Handlers, ExecAndRunEncoding) {
  Fake().exec_result.stdout_text = "v1\n";
  Fake().exec_result.exit_code = 3;
  Fake().exec_result.duration_ms = 9;
  Fake().exec_result.stderr_truncated = true;
  auto r = Call("sandbox::exec",
                {{"sandbox_id", kLiveId}, {"cmd", "node -v"}, {"env", {"A=1"}}, {"timeout_ms", 0}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, (json{{"stdout", "v1\n"},
                      {"stderr", ""},
                      {"exit_code", 3},
                      {"timed_out", false},
                      {"duration_ms", 9},
                      {"success", false},
                      {"stdout_truncated", false},
                      {"stderr_truncated", true}}));
  EXPECT_EQ(Fake().last_exec.argv, (std::vector<std::string>{"node", "-v"}));
  EXPECT_EQ(Fake().last_exec.timeout_ms, 0u);

  auto run = Call("sandbox::run", {{"image", "python"}, {"code", "print(1)"}, {"lang", "python"}});
  ASSERT_TRUE(run.ok());
  EXPECT_FALSE(run->contains("sandbox_id"));
  run = Call("sandbox::run",
             {{"image", "python"}, {"code", "print(1)"}, {"lang", "python"}, {"keep_sandbox", true}});
  ASSERT_TRUE(run.ok());
  EXPECT_EQ((*run)["sandbox_id"], kLiveId);
  // argv: the command reaches the manager as given, with no code or lang.
  run =
      Call("sandbox::run", {{"image", "python"}, {"argv", {"python3", "-c", "print(1)"}}, {"timeout_ms", 5}});
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(Fake().last_run.argv, (std::vector<std::string>{"python3", "-c", "print(1)"}));
  EXPECT_EQ(Fake().last_run.code, "");
  EXPECT_EQ(Fake().last_run.lang, "");
  // run validation happens before any step
  int before = Fake().calls;
  EXPECT_EQ(Fail("sandbox::run", {{"image", "python"}, {"argv", {"x"}}, {"lang", "sh"}}).code(), Code::kS001);
  EXPECT_EQ(Fail("sandbox::run", {{"image", "python"}, {"argv", json::array()}}).code(), Code::kS001);
  EXPECT_EQ(Fail("sandbox::run", {{"image", "python"}, {"code", "x"}, {"lang", "a b"}}).code(), Code::kS001);
  EXPECT_EQ(Fake().calls, before);
}

TEST_F(Handlers, CreateStopListCatalog) {
  auto c = Call("sandbox::create", {{"image", "node"}, {"isolation", "microvm"}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, (json{{"sandbox_id", kLiveId}, {"image", "node"}, {"isolation", "microvm"}}));
  EXPECT_EQ(Fail("sandbox::create", {{"image", "node"}, {"cpus", 0}}).code(), Code::kS001);

  auto s = Call("sandbox::stop", {{"sandbox_id", "3F0C1A526A7E4C1E9D2B0B6F2A9E4D11"}, {"wait", true}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (json{{"sandbox_id", kLiveId}, {"stopped", true}}));
  EXPECT_TRUE(Fake().last_stop_wait);

  ListEntry e;
  e.sandbox_id = kLiveId;
  e.image = "python";
  e.exec_in_flight = 1;
  e.exec_slots_free = 3;
  Fake().list = {e};
  for (const json& payload : {json(nullptr), json::object(), json{{"x", 1}}}) {
    auto l = Call("sandbox::list", payload);
    ASSERT_TRUE(l.ok());
    ASSERT_EQ((*l)["sandboxes"].size(), 1u);
    EXPECT_TRUE((*l)["sandboxes"][0]["name"].is_null());
    EXPECT_EQ((*l)["sandboxes"][0]["exec_in_progress"], true);
  }
  EXPECT_EQ(Fail("sandbox::list", json::array()).message(),
            "invalid request: payload must be a JSON object, got array");
  Fake().catalog = {CatalogEntry{"python", "skiff.local/preset/python:debian-12", "preset", true, false}};
  auto cat = Call("sandbox::catalog::list", nullptr);
  ASSERT_TRUE(cat.ok());
  EXPECT_EQ(*cat, json::parse(R"j({"images":[{"name":"python","oci_ref":"skiff.local/preset/python:debian-12",
                                 "kind":"preset","allowed":true,"installed":false}]})j"));
}

// ---- engine::* ----

std::vector<std::string> Ids(const json& list) {
  std::vector<std::string> out;
  for (const auto& f : list["functions"]) out.push_back(f["function_id"]);
  return out;
}

TEST_F(Handlers, FunctionsList) {
  auto all = Call("engine::functions::list", nullptr);
  ASSERT_TRUE(all.ok());
  std::vector<std::string> ids = Ids(*all);
  EXPECT_EQ(ids.size(), 33u);  // 31 sandbox::*, 2 skiff::host::*
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  for (const auto& f : (*all)["functions"]) {
    EXPECT_EQ(f["worker_name"], "iii-sandbox");
    EXPECT_EQ(f["namespace"], "default");
    EXPECT_FALSE(f.contains("metadata"));
  }
  auto internal = Call("engine::functions::list", {{"include_internal", true}});
  EXPECT_EQ(Ids(*internal).size(), 36u);
  auto fs = Call("engine::functions::list", {{"prefix", "sandbox::fs::"}});
  EXPECT_EQ(Ids(*fs).size(), 10u);
  auto w = Call("engine::functions::list", {{"include_internal", true}, {"worker", "iii-engine-functions"}});
  EXPECT_EQ(Ids(*w), (std::vector<std::string>{"engine::channels::create", "engine::functions::info",
                                               "engine::functions::list"}));
  auto ws = Call("engine::functions::list", {{"workers", {"nobody"}}});
  EXPECT_TRUE(Ids(*ws).empty());
  // search is case-insensitive
  EXPECT_EQ(Ids(*Call("engine::functions::list", {{"search", "LIST"}})),
            Ids(*Call("engine::functions::list", {{"search", "list"}})));
  EXPECT_EQ(Fail("engine::functions::list", {{"prefix", 5}}).code(), Code::kS001);
}

TEST_F(Handlers, FunctionsListSearchOrder) {
  auto s = Call("engine::functions::list", {{"search", "list"}});
  std::vector<std::string> sids = Ids(*s);
  // ids containing "list" come first (sorted), then description-only matches
  ASSERT_GE(sids.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(sids.begin(), sids.begin() + 4),
            (std::vector<std::string>{"sandbox::catalog::list", "sandbox::list", "sandbox::process::list",
                                      "sandbox::snapshot::list"}));
  for (size_t i = 4; i < sids.size(); ++i) EXPECT_EQ(sids[i].find("list"), std::string::npos);
}

TEST_F(Handlers, FunctionsInfo) {
  auto one = Call("engine::functions::info", {{"function_id", "sandbox::exec"}});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*one)["function_id"], "sandbox::exec");
  EXPECT_EQ((*one)["worker_name"], "iii-sandbox");
  EXPECT_EQ((*one)["request_schema"], FindFunction("sandbox::exec")->request_schema);
  EXPECT_EQ((*one)["registered_triggers"], json::array());

  auto batch =
      Call("engine::functions::info", {{"function_ids", {"sandbox::fs::ls", "nope", "sandbox::fs::ls"}}});
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ((*batch)["functions"].size(), 2u);
  EXPECT_EQ((*batch)["functions"][0]["function_id"], "sandbox::fs::ls");
  EXPECT_EQ((*batch)["functions"][1], (json{{"function_id", "nope"}, {"error", "not_found"}}));

  CallContext ctx{*manager_, &broker_};
  auto engine_code = [&](const json& payload) {
    Invocation inv = Invoke("engine::functions::info", payload, ctx);
    EXPECT_TRUE(inv.engine_error.has_value()) << payload.dump();
    return inv.engine_error ? inv.engine_error->ToJson()["code"].get<std::string>() : "";
  };
  EXPECT_EQ(engine_code({{"function_id", "nope"}}), "NOT_FOUND");
  EXPECT_EQ(engine_code(json::object()), "INVALID_ARGUMENTS");
  EXPECT_EQ(engine_code({{"function_id", "a"}, {"function_ids", {"a"}}}), "INVALID_ARGUMENTS");
  EXPECT_EQ(engine_code({{"function_ids", json::array()}}), "INVALID_ARGUMENTS");
  json many = json::array();
  for (int i = 0; i < 33; ++i) many.push_back("f" + std::to_string(i));
  EXPECT_EQ(engine_code({{"function_ids", many}}), "INVALID_ARGUMENTS");
  many.erase(many.size() - 1);
  EXPECT_FALSE(Invoke("engine::functions::info", {{"function_ids", many}}, ctx).engine_error);
  EXPECT_EQ(engine_code({{"function_id", "sandbox::exec"}, {"namespace", "other"}}), "INVALID_ARGUMENTS");
  EXPECT_EQ(Invoke("engine::functions::info", {{"function_id", "nope"}}, ctx).http_status(), 404);
  EXPECT_EQ(Invoke("engine::functions::info", json::object(), ctx).http_status(), 400);
  // Called directly, the handler records the fault in the context and
  // returns S001 for callers that read only its Result.
  CallContext direct{*manager_, &broker_};
  Result<json> r = FindFunction("engine::functions::info")->handler({{"function_id", 5}}, direct);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS001);
  ASSERT_TRUE(direct.engine_fault);
  EXPECT_EQ(direct.engine_fault->ToJson(),
            (json{{"code", "INVALID_ARGUMENTS"}, {"message", "function_id must be a string"}}));
  // A fault does not outlive its call: the next Invoke on the same context succeeds.
  EXPECT_TRUE(Invoke("engine::functions::info", {{"function_id", "sandbox::exec"}}, direct).result);
}

TEST_F(Handlers, ChannelsCreateClamps) {
  ASSERT_TRUE(Call("engine::channels::create", nullptr).ok());
  ASSERT_TRUE(Call("engine::channels::create", {{"buffer_size", 0}}).ok());
  ASSERT_TRUE(Call("engine::channels::create", {{"buffer_size", 5000}}).ok());
  ASSERT_TRUE(Call("engine::channels::create", {{"buffer_size", -3}}).ok());
  ASSERT_TRUE(Call("engine::channels::create", {{"buffer_size", 100}}).ok());
  EXPECT_EQ(broker_.sizes, (std::vector<uint32_t>{64, 1, 1024, 1, 100}));
  EXPECT_EQ(Fail("engine::channels::create", {{"buffer_size", 1.5}}).code(), Code::kS001);
  EXPECT_EQ(Fail("engine::channels::create", json::object(), false).code(), Code::kS001);
}

TEST_F(Handlers, InvokeWrapsLookupAndErrors) {
  CallContext ctx{*manager_, &broker_};
  Invocation nf = Invoke("sandbox::nope", json::object(), ctx);
  ASSERT_TRUE(nf.engine_error);
  EXPECT_EQ(nf.engine_error->ToJson(),
            (json{{"code", "function_not_found"},
                  {"message", "function 'sandbox::nope' is not provided by skiff"}}));
  EXPECT_EQ(nf.http_status(), 404);
  Invocation bad = Invoke("sandbox::exec", "x", ctx);
  ASSERT_TRUE(bad.error);
  EXPECT_EQ(bad.error->message(), "invalid request: payload must be a JSON object, got string");
  EXPECT_EQ(bad.http_status(), 400);
  Invocation gone = Invoke("sandbox::stop", {{"sandbox_id", kUnknownId}}, ctx);
  ASSERT_TRUE(gone.error);
  EXPECT_EQ(gone.http_status(), 404);
  Invocation ok = Invoke("sandbox::list", nullptr, ctx);
  ASSERT_TRUE(ok.result);
  EXPECT_EQ(ok.http_status(), 200);
}

}  // namespace
}  // namespace skiff
