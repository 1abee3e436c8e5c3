// The agent protocol's messages (protocol/messages.h): every type round
// trips, encodes to exactly today's wire JSON (so the wire cannot drift),
// and refuses hostile JSON with its S-code.
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "protocol/fs_call.h"
#include "protocol/hello.h"
#include "protocol/message_fields.h"
#include "protocol/messages.h"

namespace skiff::proto {
namespace {

using nlohmann::json;

// `v` encodes to exactly `wire` (keys sorted, as nlohmann dumps them), and
// `wire` decodes back to `v`.
template <typename T>
void ExpectWire(const T& v, const std::string& wire) {
  EXPECT_EQ(v.ToJson().dump(), wire);
  auto back = T::FromJson(json::parse(wire));
  ASSERT_TRUE(back.ok()) << wire << ": " << back.error().ToString();
  EXPECT_TRUE(*back == v) << wire << " came back as " << back->ToJson().dump();
}

// `j` is refused by T::FromJson with `code`.
template <typename T>
void ExpectRefused(const json& j, Code code) {
  auto r = T::FromJson(j);
  ASSERT_FALSE(r.ok()) << j.dump() << " was accepted";
  EXPECT_EQ(r.error().code(), code) << j.dump() << ": " << r.error().ToString();
}

// `base` with `key` set to `value` (or removed, when value is discarded).
json With(json base, const std::string& key, json value) {
  if (value.is_discarded())
    base.erase(key);
  else
    base[key] = std::move(value);
  return base;
}
const json kRemove = json::value_t::discarded;

// Values of the wrong type for every kind of field.
const json kNotAString[] = {json(1), json(true), json::array(), json::object(), json(1.5)};
const json kNotABool[] = {json(1), json("true"), json::array(), json::object(), json(0.0)};
const json kNotAnInt[] = {json("1"), json(true), json::array(), json::object(), json(1.5), json(1e300)};

template <typename T>
void ExpectFieldTypesChecked(const json& good, const std::string& key, const json (&bad)[5], Code code) {
  for (const auto& v : bad) ExpectRefused<T>(With(good, key, v), code);
}
template <typename T>
void ExpectIntChecked(const json& good, const std::string& key, Code code) {
  for (const auto& v : kNotAnInt) ExpectRefused<T>(With(good, key, v), code);
}

// ------------------------------------------------------------------ common

TEST(ProtocolMessages, RequestsCheckTheirEnvelope) {
  for (const json& j : {json(nullptr), json("fs.ls"), json::array({"op", "fs.ls"}), json(7)})
    ExpectRefused<FsLsRequest>(j, Code::kS001);
  ExpectRefused<FsLsRequest>(json{{"path", "/"}}, Code::kS001);
  ExpectRefused<FsLsRequest>(json{{"op", 1}, {"path", "/"}}, Code::kS001);
  ExpectRefused<FsLsRequest>(json{{"op", "fs.stat"}, {"path", "/"}}, Code::kS001);
  ExpectRefused<InfoRequest>(json{{"op", "shutdown"}}, Code::kS001);
  ExpectRefused<ExecRequest>(json::array(), Code::kS001);
}

TEST(ProtocolMessages, InfoAndShutdown) {
  ExpectWire(InfoRequest{}, R"({"op":"info"})");
  ExpectWire(ShutdownRequest{}, R"({"op":"shutdown"})");
  ExpectWire(QuiesceRequest{}, R"({"op":"quiesce"})");
  ExpectWire(EmptyResult{}, "{}");
  ExpectRefused<EmptyResult>(json::array(), Code::kS300);
  InfoResult info{1, "skiff-agent/0.1.0", "6.1.0", 42, 1, false};
  ExpectWire(
      info,
      R"({"agent":"skiff-agent/0.1.0","kernel":"6.1.0","pid":1,"proto":1,"ready_ms":42,"restored":false})");
  json good = info.ToJson();
  ExpectFieldTypesChecked<InfoResult>(good, "agent", kNotAString, Code::kS300);
  ExpectIntChecked<InfoResult>(good, "pid", Code::kS300);
  ExpectRefused<InfoResult>(With(good, "pid", 0), Code::kS300);
  ExpectRefused<InfoResult>(With(good, "proto", -1), Code::kS300);
  ExpectRefused<InfoResult>(With(good, "kernel", kRemove), Code::kS300);
}

TEST(ProtocolMessages, ClockRequest) {
  ExpectWire(ClockRequest{1764892800123456789}, R"({"op":"clock","realtime_ns":1764892800123456789})");
  json good = ClockRequest{1764892800123456789}.ToJson();
  ExpectIntChecked<ClockRequest>(good, "realtime_ns", Code::kS001);
  ExpectRefused<ClockRequest>(With(good, "realtime_ns", kRemove), Code::kS001);
  ExpectRefused<ClockRequest>(With(good, "realtime_ns", 0), Code::kS001);
  ExpectRefused<ClockRequest>(With(good, "realtime_ns", -1), Code::kS001);
  ExpectRefused<ClockRequest>(With(good, "realtime_ns", "1764892800123456789"), Code::kS001);
  ExpectRefused<ClockRequest>(With(good, "realtime_ns", int64_t{7258118400} * 1000000000 + 1), Code::kS001);
  ExpectRefused<ClockRequest>(With(good, "op", "quiesce"), Code::kS001);
}

// op "port.connect": a port 1..65535 only; the agent's META names a
// loopback address and its RESULT holds byte counts in range, else S300
// naming the op.
TEST(ProtocolMessages, PortConnect) {
  ExpectWire(PortConnectRequest{8000}, R"({"op":"port.connect","port":8000})");
  const json good = PortConnectRequest{8000}.ToJson();
  ExpectIntChecked<PortConnectRequest>(good, "port", Code::kS001);
  for (const json& bad : {json(0), json(65536), json(-1), json("8000"), json(nullptr), json(80.5)})
    ExpectRefused<PortConnectRequest>(With(good, "port", bad), Code::kS001);
  ExpectRefused<PortConnectRequest>(With(good, "port", kRemove), Code::kS001);
  ExpectRefused<PortConnectRequest>(With(good, "op", "exec"), Code::kS001);
  EXPECT_EQ(PortConnectRequest::FromJson(With(good, "port", 65535))->port, 65535);
  EXPECT_EQ(PortConnectRequest::FromJson(With(good, "port", 1))->port, 1);

  ExpectWire(PortConnectMeta{"::1"}, R"({"address":"::1"})");
  EXPECT_TRUE(PortConnectMeta::FromJson(json{{"address", "127.0.0.1"}}).ok());
  for (const json& bad : {json{{"address", "10.0.0.1"}}, json{{"address", 1}}, json::object(), json::array()})
    ExpectRefused<PortConnectMeta>(bad, Code::kS300);

  PortConnectResult r{120, 4096};
  ExpectWire(r, R"({"bytes_in":120,"bytes_out":4096})");
  const json result = r.ToJson();
  for (const char* key : {"bytes_in", "bytes_out"}) {
    SCOPED_TRACE(key);
    ExpectIntChecked<PortConnectResult>(result, key, Code::kS300);
    ExpectRefused<PortConnectResult>(With(result, key, kRemove), Code::kS300);
    ExpectRefused<PortConnectResult>(With(result, key, -1), Code::kS300);
    ExpectRefused<PortConnectResult>(With(result, key, kMaxPortBytes + 1), Code::kS300);
  }
  auto bad = PortConnectResult::FromJson(With(result, "bytes_out", "many"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("port.connect RESULT"), std::string::npos) << bad.error().message();
}

// op "usage": the guest's counters are hostile input for the host. Every
// field an integer in range, busy <= total and used <= total, else S300
// naming the op.
TEST(ProtocolMessages, Usage) {
  ExpectWire(UsageRequest{}, R"({"op":"usage"})");
  ExpectRefused<UsageRequest>(json{{"op", "info"}}, Code::kS001);
  UsageResult u{2, 150, 1000, 100 << 20, 480 << 20, 1 << 20, 512 << 20};
  ExpectWire(u, R"({"cpu_busy_ticks":150,"cpu_count":2,"cpu_total_ticks":1000,"disk_total_bytes":536870912,)"
                R"("disk_used_bytes":1048576,"mem_total_bytes":503316480,"mem_used_bytes":104857600})");
  const json good = u.ToJson();
  for (const char* key : {"cpu_count", "cpu_busy_ticks", "cpu_total_ticks", "mem_used_bytes",
                          "mem_total_bytes", "disk_used_bytes", "disk_total_bytes"}) {
    SCOPED_TRACE(key);
    ExpectIntChecked<UsageResult>(good, key, Code::kS300);
    ExpectRefused<UsageResult>(With(good, key, kRemove), Code::kS300);
    ExpectRefused<UsageResult>(With(good, key, nullptr), Code::kS300);
    ExpectRefused<UsageResult>(With(good, key, -1), Code::kS300);
    // Beyond any bound, and what would saturate to INT64_MAX.
    ExpectRefused<UsageResult>(With(good, key, INT64_MAX), Code::kS300);
    ExpectRefused<UsageResult>(With(good, key, UINT64_MAX), Code::kS300);
  }
  ExpectRefused<UsageResult>(With(good, "cpu_count", 0), Code::kS300);
  ExpectRefused<UsageResult>(With(good, "cpu_count", kMaxUsageCpus + 1), Code::kS300);
  ExpectRefused<UsageResult>(With(good, "cpu_busy_ticks", 1001), Code::kS300);
  ExpectRefused<UsageResult>(With(good, "mem_used_bytes", (480 << 20) + 1), Code::kS300);
  ExpectRefused<UsageResult>(With(good, "disk_used_bytes", (512 << 20) + 1), Code::kS300);
  ExpectRefused<UsageResult>(json::array(), Code::kS300);
  ExpectRefused<UsageResult>(json("usage"), Code::kS300);
  // At the bounds: accepted.
  UsageResult max{kMaxUsageCpus,  kMaxUsageTicks, kMaxUsageTicks, kMaxUsageBytes,
                  kMaxUsageBytes, kMaxUsageBytes, kMaxUsageBytes};
  EXPECT_TRUE(UsageResult::FromJson(max.ToJson()).ok());
  // The error names the op.
  auto bad = UsageResult::FromJson(With(good, "mem_used_bytes", "lots"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("usage RESULT"), std::string::npos) << bad.error().message();
  EXPECT_NE(bad.error().message().find("mem_used_bytes"), std::string::npos) << bad.error().message();
}

TEST(ProtocolMessages, AgentError) {
  AgentError e{Code::kS211, "file not found: /a", nullptr, std::nullopt};
  ExpectWire(e, R"({"code":"S211","message":"file not found: /a"})");
  AgentError full{Code::kS211, "parent directory not found: /a", json{{"parents", true}}, json{{"n", 1}}};
  ExpectWire(
      full,
      R"({"code":"S211","details":{"n":1},"fix":{"parents":true},"message":"parent directory not found: /a"})");
  // Through skiff::Error and back.
  Error err = full.ToError();
  EXPECT_EQ(err.code(), Code::kS211);
  EXPECT_EQ(err.fix(), (json{{"parents", true}}));
  EXPECT_TRUE(AgentError::FromError(err) == full);
  json good = full.ToJson();
  ExpectFieldTypesChecked<AgentError>(good, "code", kNotAString, Code::kS300);
  ExpectFieldTypesChecked<AgentError>(good, "message", kNotAString, Code::kS300);
  ExpectRefused<AgentError>(With(good, "code", "S999"), Code::kS300);
  ExpectRefused<AgentError>(With(good, "code", "s211"), Code::kS300);
  ExpectRefused<AgentError>(With(good, "fix", "parents"), Code::kS300);
  ExpectRefused<AgentError>(With(good, "fix", json::array()), Code::kS300);
  ExpectRefused<AgentError>(With(good, "message", kRemove), Code::kS300);
  ExpectRefused<AgentError>(json("S211"), Code::kS300);
}

// ------------------------------------------------------------------ exec

json GoodExec() {
  return json{{"op", "exec"},
              {"argv", {"/bin/sh", "-c", "echo hi"}},
              {"env", {"PATH=/bin", "A=b"}},
              {"cwd", "/work"},
              {"timeout_ms", 30000},
              {"stdin", true},
              {"output_limit", 1048576},
              {"user", "1000:1000"}};
}

TEST(ProtocolMessages, ExecRequestWire) {
  ExecRequest r;
  r.argv = {"/bin/sh", "-c", "echo hi"};
  r.env = {"PATH=/bin", "A=b"};
  r.cwd = "/work";
  r.timeout_ms = 30000;
  r.has_stdin = true;
  r.output_limit = 1048576;
  r.user = "1000:1000";
  ExpectWire(r, R"({"argv":["/bin/sh","-c","echo hi"],"cwd":"/work","env":["PATH=/bin","A=b"],"op":"exec",)"
                R"("output_limit":1048576,"stdin":true,"timeout_ms":30000,"user":"1000:1000"})");
  EXPECT_EQ(r.ToJson(), GoodExec());
  // The optional fields are absent, not null, when unset.
  ExecRequest min;
  min.argv = {"true"};
  ExpectWire(min, R"({"argv":["true"],"env":[],"op":"exec","output_limit":1048576,"stdin":false})");
  // Absent and null fields take their defaults.
  auto d =
      ExecRequest::FromJson(json{{"op", "exec"}, {"argv", {"true"}}, {"env", nullptr}, {"cwd", nullptr}});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(*d == min);
  // Entries the agent ignores, and an empty cwd, are kept as sent.
  auto kept = ExecRequest::FromJson(With(With(GoodExec(), "env", {"NOEQ", "=x"}), "cwd", ""));
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->env, (std::vector<std::string>{"NOEQ", "=x"}));
  EXPECT_EQ(kept->cwd, "");
  // Unsigned values above INT64_MAX saturate, as the agent always did.
  auto big = ExecRequest::FromJson(With(GoodExec(), "timeout_ms", UINT64_MAX));
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->timeout_ms, INT64_MAX);
}

TEST(ProtocolMessages, ExecRequestRefusesHostileInput) {
  json good = GoodExec();
  ASSERT_TRUE(ExecRequest::FromJson(good).ok());
  for (const json& argv : {json(nullptr), json("sh"), json::array(), json::array({1}), json::array({"sh", 2}),
                           json::array({json::array({"sh"})}), json::array({""}),
                           json::array({std::string("a\0b", 3)}), json::object()})
    ExpectRefused<ExecRequest>(With(good, "argv", argv), Code::kS001);
  ExpectRefused<ExecRequest>(With(good, "argv", kRemove), Code::kS001);
  for (const json& env : {json("A=b"), json::array({1}), json::array({"A=b", nullptr}),
                          json::array({std::string("A=\0", 3)}), json::object()})
    ExpectRefused<ExecRequest>(With(good, "env", env), Code::kS001);
  ExpectFieldTypesChecked<ExecRequest>(good, "cwd", kNotAString, Code::kS001);
  ExpectRefused<ExecRequest>(With(good, "cwd", std::string("/a\0", 3)), Code::kS001);
  ExpectFieldTypesChecked<ExecRequest>(good, "user", kNotAString, Code::kS001);
  ExpectIntChecked<ExecRequest>(good, "timeout_ms", Code::kS001);
  ExpectIntChecked<ExecRequest>(good, "output_limit", Code::kS001);
  ExpectFieldTypesChecked<ExecRequest>(good, "stdin", kNotABool, Code::kS001);
  ExpectRefused<ExecRequest>(With(good, "timeout_ms", -1), Code::kS001);
  ExpectRefused<ExecRequest>(With(good, "output_limit", -1), Code::kS001);
  ExpectRefused<ExecRequest>(With(good, "output_limit", INT64_MIN), Code::kS001);
  // The agent's messages, in its order.
  EXPECT_EQ(ExecRequest::FromJson(With(good, "argv", json::array())).error().message(),
            "invalid request: argv: expected a non-empty array of strings");
  EXPECT_EQ(ExecRequest::FromJson(With(good, "argv", {""})).error().message(),
            "invalid request: no program given");
  EXPECT_EQ(ExecRequest::FromJson(With(With(good, "output_limit", -1), "timeout_ms", "x")).error().message(),
            "invalid request: timeout_ms: expected an integer");
}

TEST(ProtocolMessages, ExecAnswers) {
  ExpectWire(ExecStarted{4242}, R"({"pid":4242})");
  ExpectIntChecked<ExecStarted>(json{{"pid", 1}}, "pid", Code::kS300);
  ExpectRefused<ExecStarted>(json{{"pid", 0}}, Code::kS300);
  ExpectRefused<ExecStarted>(json{{"pid", -5}}, Code::kS300);
  ExpectRefused<ExecStarted>(json{{"pid", uint64_t{1} << 40}}, Code::kS300);
  ExpectRefused<ExecStarted>(json::array(), Code::kS300);

  ExecResult r{137, 9, true, false, true, false, 1234};
  ExpectWire(r,
             R"({"cancelled":false,"duration_ms":1234,"exit_code":137,"signal":9,"stderr_truncated":false,)"
             R"("stdout_truncated":true,"timed_out":true})");
  ExpectWire(ExecResult{},
             R"({"cancelled":false,"duration_ms":0,"exit_code":0,"signal":0,"stderr_truncated":false,)"
             R"("stdout_truncated":false,"timed_out":false})");
  json good = r.ToJson();
  for (const char* key : {"exit_code", "signal", "duration_ms"})
    ExpectIntChecked<ExecResult>(good, key, Code::kS300);
  for (const char* key : {"stdout_truncated", "stderr_truncated", "timed_out", "cancelled"}) {
    ExpectFieldTypesChecked<ExecResult>(good, key, kNotABool, Code::kS300);
    ExpectRefused<ExecResult>(With(good, key, kRemove), Code::kS300);
  }
  ExpectRefused<ExecResult>(With(good, "exit_code", -1), Code::kS300);
  ExpectRefused<ExecResult>(With(good, "exit_code", int64_t{1} << 33), Code::kS300);
  ExpectRefused<ExecResult>(With(good, "signal", 300), Code::kS300);
  ExpectRefused<ExecResult>(With(good, "duration_ms", -1), Code::kS300);
  ExpectRefused<ExecResult>(json("done"), Code::kS300);
}

// ------------------------------------------------------------------ fs

FsEntry SampleEntry() {
  return FsEntry{"b", false, 5, "0640", 1788264000, false, 1000, 100, "user", "users", std::nullopt};
}

TEST(ProtocolMessages, FsEntryAndLsStat) {
  ExpectWire(
      SampleEntry(),
      R"({"gid":100,"group":"users","is_dir":false,"is_symlink":false,"mode":"0640","mtime":1788264000,)"
      R"("name":"b","owner":"user","size":5,"uid":1000})");
  ExpectWire(FsLsRequest{"/d"}, R"({"op":"fs.ls","path":"/d"})");
  ExpectWire(FsStatRequest{"/d/b"}, R"({"op":"fs.stat","path":"/d/b"})");
  FsLsResult ls{
      {SampleEntry(), FsEntry{"sub", true, 4096, "0755", -1, false, 0, 0, "root", "root", std::nullopt}}};
  ExpectWire(
      ls,
      R"({"entries":[{"gid":100,"group":"users","is_dir":false,"is_symlink":false,"mode":"0640","mtime":1788264000,)"
      R"("name":"b","owner":"user","size":5,"uid":1000},{"gid":0,"group":"root","is_dir":true,"is_symlink":false,)"
      R"("mode":"0755","mtime":-1,"name":"sub","owner":"root","size":4096,"uid":0}]})");
  ExpectWire(FsLsResult{}, R"({"entries":[]})");

  json good = SampleEntry().ToJson();
  ExpectFieldTypesChecked<FsEntry>(good, "name", kNotAString, Code::kS300);
  ExpectFieldTypesChecked<FsEntry>(good, "is_dir", kNotABool, Code::kS300);
  ExpectFieldTypesChecked<FsEntry>(good, "is_symlink", kNotABool, Code::kS300);
  ExpectIntChecked<FsEntry>(good, "size", Code::kS300);
  ExpectIntChecked<FsEntry>(good, "mtime", Code::kS300);
  ExpectRefused<FsEntry>(With(good, "size", -1), Code::kS300);
  for (const json& mode : {json(420), json("644"), json("0648"), json("00644"), json("rwxr")})
    ExpectRefused<FsEntry>(With(good, "mode", mode), Code::kS300);
  ExpectRefused<FsEntry>(With(good, "name", kRemove), Code::kS300);
  ExpectRefused<FsLsResult>(json{{"entries", {good, 7}}}, Code::kS300);
}

// uid, gid, owner, group and symlink_target: a link's target round-trips;
// every new field is typed, ids are 32-bit, names are bounded (a hostile
// agent's 257-byte owner is refused) and only a link may carry an absolute
// target.
TEST(ProtocolMessages, FsEntryOwnershipAndLinkTarget) {
  FsEntry link{"l", false, 7, "0777", 1, true, 4294967294u, 7, "nobody", "7", "/etc/hosts"};
  ExpectWire(link,
             R"({"gid":7,"group":"7","is_dir":false,"is_symlink":true,"mode":"0777","mtime":1,"name":"l",)"
             R"("owner":"nobody","size":7,"symlink_target":"/etc/hosts","uid":4294967294})");
  json good_link = link.ToJson();
  ExpectWire(FsEntry{"l", false, 7, "0777", 1, true, 0, 0, "root", "root", std::nullopt},
             R"({"gid":0,"group":"root","is_dir":false,"is_symlink":true,"mode":"0777","mtime":1,"name":"l",)"
             R"("owner":"root","size":7,"uid":0})");
  EXPECT_TRUE(FsEntry::FromJson(With(good_link, "symlink_target", nullptr)).ok());
  for (const json& t : {json(""), json("etc/hosts"), json(std::string("/a\0b", 4)), json(1), json::array()})
    ExpectRefused<FsEntry>(With(good_link, "symlink_target", t), Code::kS300);

  json good = SampleEntry().ToJson();
  ExpectRefused<FsEntry>(With(good, "symlink_target", "/etc/hosts"), Code::kS300);  // not a link
  for (const char* key : {"uid", "gid"}) {
    ExpectIntChecked<FsEntry>(good, key, Code::kS300);
    ExpectRefused<FsEntry>(With(good, key, kRemove), Code::kS300);
    ExpectRefused<FsEntry>(With(good, key, -1), Code::kS300);
    ExpectRefused<FsEntry>(With(good, key, 4294967296LL), Code::kS300);
    EXPECT_TRUE(FsEntry::FromJson(With(good, key, 4294967295LL)).ok());
  }
  for (const char* key : {"owner", "group"}) {
    ExpectFieldTypesChecked<FsEntry>(good, key, kNotAString, Code::kS300);
    ExpectRefused<FsEntry>(With(good, key, kRemove), Code::kS300);
    ExpectRefused<FsEntry>(With(good, key, ""), Code::kS300);
    ExpectRefused<FsEntry>(With(good, key, std::string(FsEntry::kMaxNameBytes + 1, 'a')), Code::kS300);
    auto longest = FsEntry::FromJson(With(good, key, std::string(FsEntry::kMaxNameBytes, 'a')));
    ASSERT_TRUE(longest.ok()) << longest.error().ToString();
  }
  auto r = FsEntry::FromJson(With(good, "owner", std::string(1 << 20, 'x')));
  ASSERT_FALSE(r.ok());
  EXPECT_LT(r.error().message().size(), 512u) << "the refusal must not echo the name";
  ExpectRefused<FsLsResult>(json{{"entries", good}}, Code::kS300);
  ExpectRefused<FsLsResult>(json::object(), Code::kS300);

  for (const json& path :
       {json(1), json(nullptr), json(""), json(std::string("/a\0b", 4)), json::array({"/"})})
    ExpectRefused<FsLsRequest>(json{{"op", "fs.ls"}, {"path", path}}, Code::kS001);
  ExpectRefused<FsStatRequest>(json{{"op", "fs.stat"}}, Code::kS001);
}

TEST(ProtocolMessages, FsMkdirAndWrite) {
  ExpectWire(FsMkdirRequest{"/a/b", 0700, true},
             R"({"mode":448,"op":"fs.mkdir","parents":true,"path":"/a/b"})");
  ExpectWire(FsMkdirResult{true}, R"({"created":true})");
  ExpectWire(FsMkdirResult{false}, R"({"created":false})");
  ExpectWire(FsWriteRequest{"/f", 0644, false},
             R"({"mode":420,"op":"fs.write","parents":false,"path":"/f"})");
  ExpectWire(FsWriteResult{11}, R"({"bytes_written":11})");
  // Absent or null modes take the op's default.
  EXPECT_EQ(FsMkdirRequest::FromJson(json{{"op", "fs.mkdir"}, {"path", "/a"}})->mode, 0755u);
  EXPECT_EQ(FsWriteRequest::FromJson(json{{"op", "fs.write"}, {"path", "/a"}, {"mode", nullptr}})->mode,
            0644u);

  json mk = FsMkdirRequest{"/a", 0755, false}.ToJson();
  json wr = FsWriteRequest{"/a", 0644, false}.ToJson();
  for (const json& mode : {json("0755"), json(-1), json(010000), json(1.5), json(UINT64_MAX), json(true)}) {
    ExpectRefused<FsMkdirRequest>(With(mk, "mode", mode), Code::kS210);
    ExpectRefused<FsWriteRequest>(With(wr, "mode", mode), Code::kS210);
  }
  ExpectFieldTypesChecked<FsMkdirRequest>(mk, "parents", kNotABool, Code::kS001);
  ExpectFieldTypesChecked<FsWriteRequest>(wr, "parents", kNotABool, Code::kS001);
  ExpectRefused<FsWriteRequest>(With(wr, "path", ""), Code::kS001);
  ExpectFieldTypesChecked<FsMkdirResult>(json{{"created", true}}, "created", kNotABool, Code::kS300);
  ExpectIntChecked<FsWriteResult>(json{{"bytes_written", 1}}, "bytes_written", Code::kS300);
  ExpectRefused<FsWriteResult>(json{{"bytes_written", -1}}, Code::kS300);
}

TEST(ProtocolMessages, FsRead) {
  ExpectWire(FsReadRequest{"/f"}, R"({"op":"fs.read","path":"/f"})");
  FsReadMeta meta{123, "0644", 1700000000};
  ExpectWire(meta, R"({"mode":"0644","mtime":1700000000,"size":123})");
  json good = meta.ToJson();
  ExpectIntChecked<FsReadMeta>(good, "size", Code::kS300);
  ExpectIntChecked<FsReadMeta>(good, "mtime", Code::kS300);
  ExpectRefused<FsReadMeta>(With(good, "size", -1), Code::kS300);
  ExpectRefused<FsReadMeta>(With(good, "mode", 420), Code::kS300);
  ExpectRefused<FsReadMeta>(With(good, "mode", kRemove), Code::kS300);
  ExpectRefused<FsReadRequest>(json{{"op", "fs.read"}, {"path", 3}}, Code::kS001);
}

TEST(ProtocolMessages, FsRmMvChmod) {
  ExpectWire(FsRmRequest{"/d", true}, R"({"op":"fs.rm","path":"/d","recursive":true})");
  ExpectWire(FsRmResult{}, R"({"removed":true})");
  ExpectWire(FsMvRequest{"/a", "/b", false}, R"({"dst":"/b","op":"fs.mv","overwrite":false,"src":"/a"})");
  ExpectWire(FsMvResult{}, R"({"moved":true})");
  FsChmodRequest ch{"/d", 0750, 1000, 0, true};
  ExpectWire(ch, R"({"gid":0,"mode":488,"op":"fs.chmod","path":"/d","recursive":true,"uid":1000})");
  ExpectWire(FsChmodRequest{"/d", 0644, std::nullopt, std::nullopt, false},
             R"({"mode":420,"op":"fs.chmod","path":"/d","recursive":false})");
  ExpectWire(FsChmodResult{4}, R"({"updated":4})");

  ExpectFieldTypesChecked<FsRmRequest>(FsRmRequest{"/d", false}.ToJson(), "recursive", kNotABool,
                                       Code::kS001);
  json mv = FsMvRequest{"/a", "/b", false}.ToJson();
  ExpectRefused<FsMvRequest>(With(mv, "src", kRemove), Code::kS001);
  ExpectRefused<FsMvRequest>(With(mv, "dst", ""), Code::kS001);
  ExpectFieldTypesChecked<FsMvRequest>(mv, "overwrite", kNotABool, Code::kS001);

  json good = ch.ToJson();
  ExpectRefused<FsChmodRequest>(With(good, "mode", kRemove), Code::kS001);  // required
  ExpectRefused<FsChmodRequest>(With(good, "mode", "0750"), Code::kS210);
  for (const char* id : {"uid", "gid"}) {
    ExpectIntChecked<FsChmodRequest>(good, id, Code::kS001);
    ExpectRefused<FsChmodRequest>(With(good, id, -1), Code::kS001);
    ExpectRefused<FsChmodRequest>(With(good, id, 0xFFFFFFFF), Code::kS001);
    ExpectRefused<FsChmodRequest>(With(good, id, UINT64_MAX), Code::kS001);
  }
  auto max = FsChmodRequest::FromJson(With(good, "uid", 0xFFFFFFFE));
  ASSERT_TRUE(max.ok());
  EXPECT_EQ(max->uid, 0xFFFFFFFEu);
  ExpectFieldTypesChecked<FsRmResult>(json{{"removed", true}}, "removed", kNotABool, Code::kS300);
  ExpectFieldTypesChecked<FsMvResult>(json{{"moved", true}}, "moved", kNotABool, Code::kS300);
  ExpectRefused<FsChmodResult>(json{{"updated", -2}}, Code::kS300);
}

TEST(ProtocolMessages, FsGrep) {
  FsGrepRequest g;
  g.path = "/src";
  g.pattern = "TODO";
  g.include_glob = {"*.cc"};
  ExpectWire(g, R"({"exclude_glob":[],"ignore_case":false,"include_glob":["*.cc"],"max_line_bytes":4096,)"
                R"("max_matches":10000,"op":"fs.grep","path":"/src","pattern":"TODO","recursive":true})");
  auto d = FsGrepRequest::FromJson(
      json{{"op", "fs.grep"}, {"path", "/src"}, {"pattern", "TODO"}, {"include_glob", {"*.cc"}}});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(*d == g);  // the defaults
  FsGrepResult r{{FsGrepMatch{"/src/a.cc", 3, "// TODO x", 40}}, true};
  ExpectWire(
      r,
      R"({"matches":[{"byte_offset":40,"content":"// TODO x","line":3,"path":"/src/a.cc"}],"truncated":true})");

  json good = g.ToJson();
  ExpectFieldTypesChecked<FsGrepRequest>(good, "pattern", kNotAString, Code::kS001);
  ExpectRefused<FsGrepRequest>(With(good, "pattern", kRemove), Code::kS001);
  ExpectFieldTypesChecked<FsGrepRequest>(good, "recursive", kNotABool, Code::kS001);
  ExpectFieldTypesChecked<FsGrepRequest>(good, "ignore_case", kNotABool, Code::kS001);
  for (const char* key : {"include_glob", "exclude_glob"})
    for (const json& v : {json("*.cc"), json::array({1}), json::array({"*.cc", nullptr}), json::object()})
      ExpectRefused<FsGrepRequest>(With(good, key, v), Code::kS001);
  for (const char* key : {"max_matches", "max_line_bytes"}) {
    ExpectIntChecked<FsGrepRequest>(good, key, Code::kS001);
    ExpectRefused<FsGrepRequest>(With(good, key, -1), Code::kS001);
  }
  json m = r.matches[0].ToJson();
  ExpectRefused<FsGrepMatch>(With(m, "line", 0), Code::kS300);
  ExpectRefused<FsGrepMatch>(With(m, "byte_offset", -1), Code::kS300);
  ExpectFieldTypesChecked<FsGrepMatch>(m, "content", kNotAString, Code::kS300);
  ExpectRefused<FsGrepResult>(json{{"matches", {m, "x"}}, {"truncated", false}}, Code::kS300);
  ExpectRefused<FsGrepResult>(json{{"matches", json::array()}}, Code::kS300);
}

TEST(ProtocolMessages, FsSed) {
  FsSedRequest tree;
  tree.path = "/src";
  tree.pattern = "a(b)";
  tree.replacement = "$1";
  tree.exclude_glob = {"*.o"};
  ExpectWire(tree, R"w({"exclude_glob":["*.o"],"first_only":false,"ignore_case":false,"include_glob":[],)w"
                   R"w("op":"fs.sed","path":"/src","pattern":"a(b)","recursive":true,"regex":true,)w"
                   R"w("replacement":"$1"})w");
  FsSedRequest files;
  files.files = {"/a", "/b"};
  files.pattern = "x";
  files.replacement = "y";
  files.regex = false;
  files.first_only = true;
  ExpectWire(files,
             R"({"files":["/a","/b"],"first_only":true,"ignore_case":false,"op":"fs.sed","pattern":"x",)"
             R"("regex":false,"replacement":"y"})");
  // A files entry the agent reports per file is kept.
  auto odd = FsSedRequest::FromJson(With(files.ToJson(), "files", {""}));
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->files, std::vector<std::string>{""});

  FsSedResult r{{FsSedFileResult{"/a", 2, true, std::nullopt},
                 FsSedFileResult{"/b", 0, false, std::string("file not found: /b")}},
                2};
  ExpectWire(r, R"({"results":[{"path":"/a","replacements":2,"success":true},{"error":"file not found: /b",)"
                R"("path":"/b","replacements":0,"success":false}],"total_replacements":2})");

  json good = tree.ToJson();
  ExpectRefused<FsSedRequest>(With(good, "files", {"/a"}), Code::kS210);  // both
  ExpectRefused<FsSedRequest>(With(good, "path", kRemove), Code::kS210);  // neither
  ExpectRefused<FsSedRequest>(With(good, "path", nullptr), Code::kS210);
  ExpectRefused<FsSedRequest>(With(good, "pattern", ""), Code::kS210);
  ExpectFieldTypesChecked<FsSedRequest>(good, "pattern", kNotAString, Code::kS001);
  ExpectFieldTypesChecked<FsSedRequest>(good, "replacement", kNotAString, Code::kS001);
  for (const char* key : {"regex", "first_only", "ignore_case", "recursive"})
    ExpectFieldTypesChecked<FsSedRequest>(good, key, kNotABool, Code::kS001);
  for (const json& path : {json(1), json(""), json::array({"/src"})})
    ExpectRefused<FsSedRequest>(With(good, "path", path), Code::kS001);
  ExpectRefused<FsSedRequest>(With(files.ToJson(), "files", "/a"), Code::kS001);
  ExpectRefused<FsSedRequest>(With(files.ToJson(), "files", {1}), Code::kS001);

  json f = r.results[1].ToJson();
  ExpectFieldTypesChecked<FsSedFileResult>(f, "error", kNotAString, Code::kS300);
  ExpectRefused<FsSedFileResult>(With(f, "replacements", -1), Code::kS300);
  ExpectRefused<FsSedResult>(json{{"results", {f}}, {"total_replacements", -1}}, Code::kS300);
  ExpectRefused<FsSedResult>(json{{"results", f}, {"total_replacements", 0}}, Code::kS300);
}

// ------------------------------------------------------------------ fields

TEST(ProtocolMessages, FsWatch) {
  ExpectWire(FsWatchRequest{"/home/user", true}, R"({"op":"fs.watch","path":"/home/user","recursive":true})");
  auto dflt = FsWatchRequest::FromJson(json{{"op", "fs.watch"}, {"path", "/w"}});
  ASSERT_TRUE(dflt.ok());
  EXPECT_FALSE(dflt->recursive);
  ExpectRefused<FsWatchRequest>(json{{"op", "fs.watch"}}, Code::kS001);
  ExpectRefused<FsWatchRequest>(json{{"op", "fs.watch"}, {"path", ""}}, Code::kS001);
  ExpectRefused<FsWatchRequest>(json{{"op", "fs.watch"}, {"path", "/w"}, {"recursive", "yes"}}, Code::kS001);
  ExpectRefused<FsWatchRequest>(json{{"op", "fs.ls"}, {"path", "/w"}}, Code::kS001);

  ExpectWire(FsWatchEvent{"sub/a.txt", FsWatchChange::kWrite}, R"({"name":"sub/a.txt","type":"write"})");
  for (const char* t : {"create", "write", "remove", "rename", "chmod"}) {
    auto e = FsWatchEvent::FromJson(json{{"name", "a"}, {"type", t}});
    ASSERT_TRUE(e.ok()) << t;
    EXPECT_EQ(FsWatchChangeName(e->change), t);
  }
  // A hostile agent's names: absolute, escaping, empty, too long, NUL.
  for (const std::string& bad :
       {std::string(), std::string("/etc/passwd"), std::string(".."), std::string("a/../../b"),
        std::string("a//b"), std::string("./a"), std::string("a/"), std::string(kMaxWatchName + 1, 'x'),
        std::string("a\0b", 3)}) {
    SCOPED_TRACE(bad);
    ExpectRefused<FsWatchEvent>(json{{"name", bad}, {"type", "create"}}, Code::kS300);
  }
  EXPECT_TRUE(
      FsWatchEvent::FromJson(json{{"name", std::string(kMaxWatchName, 'x')}, {"type", "create"}}).ok());
  EXPECT_TRUE(FsWatchEvent::FromJson(json{{"name", "..a/b..c/.d"}, {"type", "create"}}).ok());
  ExpectRefused<FsWatchEvent>(json{{"name", "a"}, {"type", "moved"}}, Code::kS300);
  ExpectRefused<FsWatchEvent>(json{{"name", "a"}, {"type", 1}}, Code::kS300);
  ExpectRefused<FsWatchEvent>(json{{"name", "a"}}, Code::kS300);
  ExpectRefused<FsWatchEvent>(json::array(), Code::kS300);
}

TEST(ProtocolMessageFields, ReadersMatchTheAgentsRules) {
  using namespace field;
  EXPECT_EQ(*Int(json{{"n", UINT64_MAX}}, "n", 0), INT64_MAX);
  EXPECT_EQ(*Int(json::object(), "n", 7), 7);
  EXPECT_EQ(*Int(json{{"n", nullptr}}, "n", 7), 7);
  EXPECT_FALSE(Int(json{{"n", "3"}}, "n", 0).ok());
  EXPECT_FALSE(Bool(json{{"b", 1}}, "b", false).ok());
  EXPECT_TRUE(*Bool(json::object(), "b", true));
  EXPECT_EQ(ModeFromJson(json(0755)), 0755u);
  EXPECT_EQ(ModeFromJson(json(07777)), 07777u);
  EXPECT_FALSE(ModeFromJson(json(010000)));
  EXPECT_FALSE(ModeFromJson(json(-1)));
  EXPECT_FALSE(ModeFromJson(json("0755")));
  EXPECT_EQ(Mode(json{{"mode", "rwx"}}, "mode", std::nullopt).error().code(), Code::kS210);
  EXPECT_EQ(Mode(json::object(), "mode", std::nullopt).error().code(), Code::kS001);
  EXPECT_EQ(*Mode(json::object(), "mode", 0755u), 0755u);
  EXPECT_EQ(Path(json::object(), "path").error().message(), "invalid request: path: expected a string");
  EXPECT_EQ(Path(json{{"path", ""}}, "path").error().message(), "invalid request: path: must not be empty");
}

TEST(FsCall, CarriesEachOneShotRequestAndChecksItsAnswer) {
  FsCall ls = FsLsRequest{"/tmp"};
  EXPECT_EQ(OpName(ls), "fs.ls");
  EXPECT_EQ(ToJson(ls), (json{{"op", "fs.ls"}, {"path", "/tmp"}}));
  json entry = {{"name", "a"},         {"is_dir", false},     {"size", 3}, {"mode", "0644"},
                {"mtime", 1700000000}, {"is_symlink", false}, {"uid", 0},  {"gid", 0},
                {"owner", "root"},     {"group", "root"}};
  auto good = CheckAnswer(ls, json{{"entries", json::array({entry})}});
  ASSERT_TRUE(good.ok()) << good.error().ToString();
  EXPECT_EQ(*good, (json{{"entries", json::array({entry})}}));
  // A hostile agent's RESULT never reaches the caller: wrong shapes are S300.
  for (const json& bad : {json::object(), json{{"entries", "x"}},
                          json{{"entries", json::array({json{{"name", 1}}})}}, json::array()}) {
    auto r = CheckAnswer(ls, bad);
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_EQ(r.error().code(), Code::kS300);
    EXPECT_NE(r.error().message().find("fs.ls"), std::string::npos) << r.error().message();
  }
  // Each op is checked against its own answer: an ls answer is not a stat's.
  FsCall stat = FsStatRequest{"/tmp/a"};
  EXPECT_TRUE(CheckAnswer(stat, entry).ok());
  EXPECT_FALSE(CheckAnswer(stat, json{{"entries", json::array()}}).ok());
  // An over-long owner name from the agent is a malformed answer.
  json hostile = entry;
  hostile["owner"] = std::string(FsEntry::kMaxNameBytes + 1, 'o');
  auto refused = CheckAnswer(stat, hostile);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Code::kS300);
  EXPECT_EQ(CheckAnswer(ls, json{{"entries", json::array({hostile})}}).error().code(), Code::kS300);
  FsCall rm = FsRmRequest{"/x", true};
  EXPECT_EQ(ToJson(rm), (json{{"op", "fs.rm"}, {"path", "/x"}, {"recursive", true}}));
  EXPECT_TRUE(CheckAnswer(rm, json{{"removed", true}}).ok());
  EXPECT_FALSE(CheckAnswer(rm, json{{"removed", "yes"}}).ok());
}

}  // namespace
}  // namespace skiff::proto
