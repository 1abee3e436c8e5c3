// The live-process messages (protocol/process_messages.h): each request and
// answer round trips through its exact wire JSON, and hostile values are
// refused with their S-code (S001 for a request, S300 for an answer).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "protocol/process_messages.h"

namespace skiff::proto {
namespace {

using nlohmann::json;

template <typename T>
void ExpectWire(const T& v, const std::string& wire) {
  EXPECT_EQ(v.ToJson().dump(), wire);
  auto back = T::FromJson(json::parse(wire));
  ASSERT_TRUE(back.ok()) << wire << ": " << back.error().ToString();
  EXPECT_TRUE(*back == v) << wire << " came back as " << back->ToJson().dump();
}

template <typename T>
void ExpectRefused(const json& j, Code code) {
  auto r = T::FromJson(j);
  ASSERT_FALSE(r.ok()) << j.dump() << " was accepted";
  EXPECT_EQ(r.error().code(), code) << j.dump() << ": " << r.error().ToString();
}

json With(json base, const std::string& key, json value) {
  base[key] = std::move(value);
  return base;
}

TEST(ProcessMessages, StartWire) {
  ProcStartRequest r;
  r.argv = {"sh", "-c", "echo hi"};
  r.env = {"A=1"};
  ExpectWire(
      r,
      R"({"argv":["sh","-c","echo hi"],"buffer_bytes":1048576,"env":["A=1"],"op":"proc.start","stdin":false})");
  r.cwd = "/tmp";
  r.user = "1000:1000";
  r.tag = "server";
  r.pty = TermSize{40, 132};
  r.has_stdin = true;
  r.buffer_bytes = 4096;
  r.timeout_ms = 5000;
  r.hold_output = true;
  ExpectWire(
      r,
      R"({"argv":["sh","-c","echo hi"],"buffer_bytes":4096,"cwd":"/tmp","env":["A=1"],"hold_output":true,"op":"proc.start","pty":{"cols":132,"rows":40},"stdin":true,"tag":"server","timeout_ms":5000,"user":"1000:1000"})");
}

TEST(ProcessMessages, StartRefusesHostileInput) {
  json good = ProcStartRequest{.argv = {"true"}}.ToJson();
  ASSERT_TRUE(ProcStartRequest::FromJson(good).ok());
  ExpectRefused<ProcStartRequest>(With(good, "argv", json::array()), Code::kS001);
  ExpectRefused<ProcStartRequest>(With(good, "argv", json::array({""})), Code::kS001);
  ExpectRefused<ProcStartRequest>(With(good, "argv", json::array({std::string("a\0b", 3)})), Code::kS001);
  ExpectRefused<ProcStartRequest>(With(good, "argv", "true"), Code::kS001);
  ExpectRefused<ProcStartRequest>(With(good, "env", json::array({1})), Code::kS001);
  ExpectRefused<ProcStartRequest>(With(good, "tag", std::string(257, 't')), Code::kS001);
  ExpectRefused<ProcStartRequest>(With(good, "pty", json{{"rows", 0}, {"cols", 80}}), Code::kS001);
  ExpectRefused<ProcStartRequest>(With(good, "pty", json{{"rows", 24}, {"cols", 4097}}), Code::kS001);
  ExpectRefused<ProcStartRequest>(With(good, "pty", "yes"), Code::kS001);
  ExpectRefused<ProcStartRequest>(With(good, "buffer_bytes", kMinProcBuffer - 1), Code::kS001);
  ExpectRefused<ProcStartRequest>(With(good, "buffer_bytes", kMaxProcBuffer + 1), Code::kS001);
  ExpectRefused<ProcStartRequest>(With(good, "buffer_bytes", "1M"), Code::kS001);
  ExpectRefused<ProcStartRequest>(With(good, "timeout_ms", 0), Code::kS001);
  ExpectRefused<ProcStartRequest>(With(good, "timeout_ms", -5), Code::kS001);
  ExpectRefused<ProcStartRequest>(With(good, "stdin", 1), Code::kS001);
  ExpectRefused<ProcStartRequest>(With(good, "hold_output", "yes"), Code::kS001);
  ExpectRefused<ProcStartRequest>(With(good, "op", "exec"), Code::kS001);
}

TEST(ProcessMessages, InfoWireAndHostileAnswers) {
  ProcInfo p;
  p.pid = 42;
  p.argv = {"sleep", "9"};
  p.cwd = "/";
  p.started_ms = 1700000000000;
  p.out = {0, 10};
  p.err = {2, 3};
  ExpectWire(
      p,
      R"({"argv":["sleep","9"],"attached":0,"buffer_bytes":1048576,"cwd":"/","pid":42,"started_ms":1700000000000,"state":"running","stderr":{"end":3,"start":2},"stdin_open":false,"stdout":{"end":10,"start":0},"timed_out":false})");
  p.running = false;
  p.exit_code = 137;
  p.signal = 9;
  p.ended_ms = 1700000000500;
  p.pty = TermSize{24, 80};
  p.tag = "t";
  ExpectWire(
      p,
      R"({"argv":["sleep","9"],"attached":0,"buffer_bytes":1048576,"cwd":"/","ended_ms":1700000000500,"exit_code":137,"pid":42,"pty":{"cols":80,"rows":24},"signal":9,"started_ms":1700000000000,"state":"exited","stderr":{"end":3,"start":2},"stdin_open":false,"stdout":{"end":10,"start":0},"tag":"t","timed_out":false})");
  json good = p.ToJson();
  // A hostile agent's record is S300, whatever is wrong in it.
  ExpectRefused<ProcInfo>(With(good, "pid", 0), Code::kS300);
  ExpectRefused<ProcInfo>(With(good, "state", "zombie"), Code::kS300);
  ExpectRefused<ProcInfo>(With(good, "exit_code", 256), Code::kS300);
  ExpectRefused<ProcInfo>(With(good, "stdout", json{{"start", 5}, {"end", 4}}), Code::kS300);
  ExpectRefused<ProcInfo>(With(good, "attached", kMaxAttachesPerProcess + 1), Code::kS300);
  ExpectRefused<ProcInfo>(json::array(), Code::kS300);
  ProcListResult list;
  list.processes = {p};
  ExpectWire(list, "{\"processes\":[" + good.dump() + "]}");
  ExpectRefused<ProcListResult>(json{{"processes", json::array({json{{"pid", "1"}}})}}, Code::kS300);
}

TEST(ProcessMessages, OutputRequestAndMeta) {
  ExpectWire(ProcOutputRequest{7, 100, 0, true},
             R"({"follow":true,"op":"proc.output","pid":7,"stderr_from":0,"stdout_from":100})");
  json good = ProcOutputRequest{7, 0, 0, false}.ToJson();
  ExpectRefused<ProcOutputRequest>(With(good, "stdout_from", -1), Code::kS001);
  ExpectRefused<ProcOutputRequest>(With(good, "pid", 0), Code::kS001);
  ExpectRefused<ProcOutputRequest>(With(good, "pid", int64_t{1} << 40), Code::kS001);
  ExpectWire(ProcOutputMeta{5, 0, std::nullopt}, R"({"stderr_from":0,"stdout_from":5})");
  ExpectWire(ProcOutputMeta{std::nullopt, std::nullopt, ProcOutputMeta::Gap{1, 10, 20}},
             R"({"gap":{"channel":1,"from":10,"to":20}})");
  ExpectRefused<ProcOutputMeta>(json::object(), Code::kS300);
  ExpectRefused<ProcOutputMeta>(json{{"stdout_from", 1}}, Code::kS300);
  ExpectRefused<ProcOutputMeta>(json{{"gap", {{"channel", 0}, {"from", 0}, {"to", 1}}}}, Code::kS300);
  ExpectRefused<ProcOutputMeta>(json{{"gap", {{"channel", 1}, {"from", 5}, {"to", 1}}}}, Code::kS300);
}

TEST(ProcessMessages, InputSignalWaitResizeForget) {
  ExpectWire(ProcInputRequest{3, true}, R"({"close":true,"op":"proc.input","pid":3})");
  ExpectWire(ProcInputResult{12}, R"({"bytes_written":12})");
  ExpectRefused<ProcInputResult>(json{{"bytes_written", -1}}, Code::kS300);
  ExpectWire(ProcSignalRequest{3, "TERM"}, R"({"op":"proc.signal","pid":3,"signal":"TERM"})");
  for (const char* bad : {"SIGTERM", "term", "SEGV", "9", ""})
    ExpectRefused<ProcSignalRequest>(json{{"op", "proc.signal"}, {"pid", 3}, {"signal", bad}}, Code::kS001);
  for (const auto& name : SignalNames()) EXPECT_TRUE(SignalFromName(name).has_value()) << name;
  EXPECT_EQ(SignalNames().size(), 10u);
  ExpectWire(ProcWaitRequest{3, std::nullopt}, R"({"op":"proc.wait","pid":3})");
  ExpectWire(ProcWaitRequest{3, 0}, R"({"op":"proc.wait","pid":3,"timeout_ms":0})");
  ExpectRefused<ProcWaitRequest>(json{{"op", "proc.wait"}, {"pid", 3}, {"timeout_ms", -1}}, Code::kS001);
  ExpectWire(ProcResizeRequest{3, TermSize{40, 132}}, R"({"cols":132,"op":"proc.resize","pid":3,"rows":40})");
  ExpectRefused<ProcResizeRequest>(json{{"op", "proc.resize"}, {"pid", 3}, {"rows", 40}}, Code::kS001);
  ExpectWire(ProcForgetRequest{3}, R"({"op":"proc.forget","pid":3})");
  ExpectWire(ProcListRequest{}, R"({"op":"proc.list"})");
}

}  // namespace
}  // namespace skiff::proto
