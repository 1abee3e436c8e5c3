// The sandbox::process::* handlers against a SandboxService double: bad
// input is S001 before any lookup, each call reaches the agent as exactly
// one proc.* request, and the answers are encoded as documented.
#include <gtest/gtest.h>

#include "base/text.h"
#include "functions/registry.h"
#include "functions_fake_manager.h"

namespace skiff {
namespace {

using nlohmann::json;
using testing::Fake;
using testing::FakeBroker;
using testing::kLiveId;
using testing::kUnknownId;

class ProcessHandlers : public ::testing::Test {
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
  Code FailCode(std::string_view id, const json& payload) {
    Result<json> r = Call(id, payload);
    EXPECT_FALSE(r.ok()) << id << " " << payload.dump() << " -> " << (r.ok() ? r->dump() : "");
    return r.ok() ? Code::kS300 : r.error().code();
  }
  std::unique_ptr<testing::FakeSandboxService> manager_;
  FakeBroker broker_;
};

TEST_F(ProcessHandlers, BadInputIsS001BeforeTheLookup) {
  const json id = kUnknownId;
  std::vector<std::pair<const char*, json>> cases = {
      {"sandbox::process::start", {{"sandbox_id", id}}},  // no command
      {"sandbox::process::start", {{"sandbox_id", id}, {"cmd", "echo 'x"}}},
      {"sandbox::process::start", {{"sandbox_id", id}, {"cmd", "sleep"}, {"pty", "yes"}}},
      {"sandbox::process::start",
       {{"sandbox_id", id}, {"cmd", "sleep"}, {"pty", {{"rows", 0}, {"cols", 80}}}}},
      {"sandbox::process::start",
       {{"sandbox_id", id}, {"cmd", "sleep"}, {"pty", {{"rows", 24}, {"cols", 5000}}}}},
      {"sandbox::process::start", {{"sandbox_id", id}, {"cmd", "sleep"}, {"buffer_bytes", 10}}},
      {"sandbox::process::start", {{"sandbox_id", id}, {"cmd", "sleep"}, {"buffer_bytes", int64_t{1} << 30}}},
      {"sandbox::process::start", {{"sandbox_id", id}, {"cmd", "sleep"}, {"timeout_ms", 0}}},
      {"sandbox::process::start", {{"sandbox_id", id}, {"cmd", "sleep"}, {"tag", std::string(300, 't')}}},
      {"sandbox::process::start", {{"sandbox_id", id}, {"cmd", "sleep"}, {"user", ""}}},
      {"sandbox::process::start", {{"sandbox_id", "nope"}, {"cmd", "sleep"}}},
      {"sandbox::process::output", {{"sandbox_id", id}}},  // no pid
      {"sandbox::process::output", {{"sandbox_id", id}, {"pid", 0}}},
      {"sandbox::process::output", {{"sandbox_id", id}, {"pid", -3}}},
      {"sandbox::process::output", {{"sandbox_id", id}, {"pid", "7"}}},
      {"sandbox::process::output", {{"sandbox_id", id}, {"pid", int64_t{1} << 40}}},
      {"sandbox::process::output", {{"sandbox_id", id}, {"pid", 7}, {"stdout_from", -1}}},
      {"sandbox::process::output", {{"sandbox_id", id}, {"pid", 7}, {"max_bytes", int64_t{1} << 40}}},
      {"sandbox::process::input", {{"sandbox_id", id}, {"pid", 7}, {"data", "a"}, {"data_base64", "YQ=="}}},
      {"sandbox::process::input", {{"sandbox_id", id}, {"pid", 7}, {"data_base64", "!!"}}},
      {"sandbox::process::signal", {{"sandbox_id", id}, {"pid", 7}, {"signal", "SEGV"}}},
      {"sandbox::process::signal", {{"sandbox_id", id}, {"pid", 7}, {"signal", "9"}}},
      {"sandbox::process::signal", {{"sandbox_id", id}, {"pid", 7}}},
      {"sandbox::process::wait", {{"sandbox_id", id}, {"pid", 7}, {"timeout_ms", 300001}}},
      {"sandbox::process::resize", {{"sandbox_id", id}, {"pid", 7}, {"rows", 40}}},
      {"sandbox::process::resize", {{"sandbox_id", id}, {"pid", 7}, {"rows", 40}, {"cols", 0}}},
      {"sandbox::process::forget", {{"sandbox_id", id}, {"pid", true}}},
      {"sandbox::process::list", {{"sandbox_id", 5}}},
  };
  for (const auto& [fn, payload] : cases)
    EXPECT_EQ(FailCode(fn, payload), Code::kS001) << fn << " " << payload.dump();
  EXPECT_EQ(Fake().calls, 0) << "a malformed request reached the lookup";
  // Well-formed, unknown sandbox: S002.
  EXPECT_EQ(FailCode("sandbox::process::list", {{"sandbox_id", id}}), Code::kS002);
}

TEST_F(ProcessHandlers, StartBuildsOneProcStart) {
  Fake().proc_result = {{"pid", 42}};
  auto r = Call("sandbox::process::start", {{"sandbox_id", kLiveId},
                                            {"cmd", "python3 -m http.server"},
                                            {"env", {{"A", "1"}}},
                                            {"tag", "web"},
                                            {"pty", true},
                                            {"timeout_ms", 5000}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)["pid"], 42);
  EXPECT_EQ((*r)["sandbox_id"], kLiveId);
  ASSERT_EQ(Fake().proc_calls.size(), 1u);
  const json& sent = Fake().proc_calls[0].second;
  EXPECT_EQ(sent["op"], "proc.start");
  EXPECT_EQ(sent["argv"], (json{"python3", "-m", "http.server"}));
  EXPECT_EQ(sent["env"], (json{"A=1"}));
  EXPECT_EQ(sent["tag"], "web");
  EXPECT_EQ(sent["pty"], (json{{"rows", 24}, {"cols", 80}}));
  EXPECT_EQ(sent["stdin"], true) << "a terminal always takes input";
  EXPECT_EQ(sent["timeout_ms"], 5000);
}

TEST_F(ProcessHandlers, SignalNamesAcceptTheSigPrefix) {
  auto r = Call("sandbox::process::signal", {{"sandbox_id", kLiveId}, {"pid", 7}, {"signal", "SIGINT"}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)["signal"], "INT");
  EXPECT_EQ(Fake().proc_calls.at(0).second, (json{{"op", "proc.signal"}, {"pid", 7}, {"signal", "INT"}}));
}

TEST_F(ProcessHandlers, InlineOutputIsBase64FromTheOffsetAndCapped) {
  Fake().proc_output_stdout = "hello\nworld\n";
  Fake().proc_info.pid = 7;
  auto r = Call("sandbox::process::output",
                {{"sandbox_id", kLiveId}, {"pid", 7}, {"stdout_from", 6}, {"max_bytes", 3}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)["stdout"]["from"], 6);
  EXPECT_EQ((*r)["stdout"]["next"], 9);
  EXPECT_EQ(*Base64Decode((*r)["stdout"]["data"].get<std::string>()), "wor");
  EXPECT_EQ((*r)["process"]["pid"], 7);
  EXPECT_EQ(Fake().proc_calls.at(0).second["follow"], false);
}

TEST_F(ProcessHandlers, FollowNeedsAChannelTransportAndAnExistingPid) {
  Result<json> r =
      Call("sandbox::process::output", {{"sandbox_id", kLiveId}, {"pid", 7}, {"follow", true}}, false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS001);
  Fake().proc_result = {{"processes", json::array()}};
  EXPECT_EQ(FailCode("sandbox::process::output", {{"sandbox_id", kLiveId}, {"pid", 7}, {"follow", true}}),
            Code::kS220);
  Fake().proc_result = {{"processes", json::array({{{"pid", 7}}})}};
  Fake().proc_output_stdout = "line\n";
  r = Call("sandbox::process::output", {{"sandbox_id", kLiveId}, {"pid", 7}, {"follow", true}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)["stream"]["direction"], "read");
  // The channel carries NDJSON: start, data (base64), end.
  std::string text = broker_.Drain(0);
  std::vector<json> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    ASSERT_NE(nl, std::string::npos) << "every line ends with a newline";
    lines.push_back(json::parse(text.substr(pos, nl - pos)));
    pos = nl + 1;
  }
  ASSERT_EQ(lines.size(), 3u) << text;
  EXPECT_EQ(lines[0]["type"], "start");
  EXPECT_EQ(lines[1]["type"], "data");
  EXPECT_EQ(lines[1]["channel"], "stdout");
  EXPECT_EQ(*Base64Decode(lines[1]["data"].get<std::string>()), "line\n");
  EXPECT_EQ(lines[2]["type"], "end");
}

TEST_F(ProcessHandlers, InputTextAndBase64) {
  auto r = Call("sandbox::process::input", {{"sandbox_id", kLiveId}, {"pid", 7}, {"data", "ls\n"}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)["bytes_written"], 3);
  r = Call("sandbox::process::input",
           {{"sandbox_id", kLiveId}, {"pid", 7}, {"data_base64", "AAE="}, {"close", true}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(Fake().proc_input, std::string("ls\n\x00\x01", 5));
  EXPECT_EQ(Fake().proc_calls.at(1).second, (json{{"op", "proc.input"}, {"pid", 7}, {"close", true}}));
}

}  // namespace
}  // namespace skiff
