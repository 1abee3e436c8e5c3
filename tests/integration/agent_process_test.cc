// skiff-agent live processes (proc.*), run as PID 1 of a private namespace:
// background processes, their output rings read from absolute offsets,
// stdin, signals, waits, terminals, the caps, and the kill at the end.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <set>
#include <thread>

#include "agent_harness.h"
#include "protocol/frame.h"
#include "protocol/process_messages.h"

namespace skiff::agent_test {
namespace {

using Clock = std::chrono::steady_clock;
using proto::Event;

const char* const kPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// "1\n2\n...n\n", as seq prints it.
std::string SeqText(int64_t from, int64_t to) {
  std::string s;
  for (int64_t i = from; i <= to; ++i) {
    s += std::to_string(i);
    s += '\n';
  }
  return s;
}

// What a proc.output stream gave.
struct OutputRead {
  json first_meta;
  std::vector<json> gaps;
  std::string out, err;
  bool ended_out = false, ended_err = false;
  std::optional<json> result;
  std::optional<json> error;  // ERROR, or a test timeout
};

class AgentProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (namespaces, mounts)";
    sb_ = AgentSandbox::Start();
    ASSERT_NE(sb_, nullptr);
  }

  Result<json> Call(json req) { return sb_->Call(std::move(req)); }

  // proc.start of `argv` with `extra` fields; the pid, or 0 after a failed
  // assertion.
  Result<json> StartRaw(std::vector<std::string> argv, json extra = json::object()) {
    json req = extra;
    req["op"] = "proc.start";
    req["argv"] = argv;
    if (!req.contains("env")) req["env"] = {kPath, "HOME=/root"};
    return Call(req);
  }
  int64_t Start(std::vector<std::string> argv, json extra = json::object()) {
    auto r = StartRaw(std::move(argv), std::move(extra));
    EXPECT_TRUE(r.ok()) << r.error().ToString();
    if (!r.ok()) return 0;
    EXPECT_EQ((*r)["state"], "running") << r->dump();
    return (*r)["pid"].get<int64_t>();
  }

  json Wait(int64_t pid, std::optional<int64_t> timeout_ms = std::nullopt) {
    json req{{"op", "proc.wait"}, {"pid", pid}};
    if (timeout_ms) req["timeout_ms"] = *timeout_ms;
    auto r = Call(req);
    EXPECT_TRUE(r.ok()) << r.error().ToString();
    return r.ok() ? *r : json();
  }

  json Info(int64_t pid) {
    auto r = Call({{"op", "proc.list"}});
    EXPECT_TRUE(r.ok());
    if (r.ok())
      for (const auto& p : (*r)["processes"])
        if (p["pid"] == pid) return p;
    return json();
  }

  // proc.input of `bytes` (then END); the RESULT or the ERROR.
  Result<json> Input(int64_t pid, const std::string& bytes, bool close = false) {
    auto s = sb_->client().Open(json{{"op", "proc.input"}, {"pid", pid}, {"close", close}});
    if (!s.ok()) return s.error();
    auto deadline = Clock::now() + 30s;
    if (!bytes.empty()) (void)(*s)->Send(proto::kStdin, bytes, deadline);
    (void)(*s)->End(proto::kStdin);
    for (;;) {
      auto e = (*s)->Next(deadline);
      if (!e) return Error(Code::kS300, "test timeout");
      if (e->kind == Event::Kind::kResult) return e->json;
      if (e->kind == Event::Kind::kError || e->kind == Event::Kind::kClosed)
        return Error(CodeFromName(e->json.value("code", "S300")).value_or(Code::kS300),
                     e->json.value("message", ""));
    }
  }

  std::shared_ptr<proto::Stream> OpenOutput(int64_t pid, int64_t out_from, int64_t err_from, bool follow) {
    auto s = sb_->client().Open(json{{"op", "proc.output"},
                                     {"pid", pid},
                                     {"stdout_from", out_from},
                                     {"stderr_from", err_from},
                                     {"follow", follow}});
    EXPECT_TRUE(s.ok());
    if (!s.ok()) return nullptr;
    (void)(*s)->End(proto::kStdin);
    return *s;
  }

  // Reads a proc.output stream to its end. `on_data`, when given, sees each
  // stdout DATA as it arrives.
  OutputRead ReadAll(const std::shared_ptr<proto::Stream>& s, std::chrono::seconds wait = 60s,
                     const std::function<void(const std::string&)>& on_data = nullptr) {
    OutputRead o;
    if (!s) {
      o.error = json{{"code", "OPEN"}};
      return o;
    }
    auto deadline = Clock::now() + wait;
    for (;;) {
      auto e = s->Next(deadline);
      if (!e) {
        o.error = json{{"code", "TIMEOUT"}};
        return o;
      }
      switch (e->kind) {
        case Event::Kind::kMeta:
          if (e->json.contains("gap")) {
            o.gaps.push_back(e->json["gap"]);
          } else {
            EXPECT_TRUE(o.first_meta.is_null()) << "a second start META: " << e->json.dump();
            o.first_meta = e->json;
          }
          break;
        case Event::Kind::kData:
          if (e->channel == proto::kStdout) {
            o.out += e->data;
            if (on_data) on_data(e->data);
          } else {
            o.err += e->data;
          }
          break;
        case Event::Kind::kEnd:
          (e->channel == proto::kStdout ? o.ended_out : o.ended_err) = true;
          break;
        case Event::Kind::kResult:
          o.result = e->json;
          return o;
        case Event::Kind::kError:
        case Event::Kind::kClosed:
          o.error = e->json;
          return o;
      }
    }
  }

  OutputRead Output(int64_t pid, int64_t out_from = 0, int64_t err_from = 0, bool follow = false) {
    return ReadAll(OpenOutput(pid, out_from, err_from, follow));
  }

  // Waits until a process of the sandbox runs `cmdline` (its arguments
  // joined by spaces).
  bool WaitForProcess(const std::string& cmdline, std::chrono::milliseconds wait = 10s) {
    auto deadline = Clock::now() + wait;
    while (Clock::now() < deadline) {
      std::string all = sb_->Sh("for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done");
      if (all.find(cmdline + " \n") != std::string::npos) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  std::unique_ptr<AgentSandbox> sb_;
};

TEST_F(AgentProcess, OpsAreAnnounced) {
  const json& ops = sb_->client().hello()["ops"];
  for (const char* op : {"proc.start", "proc.list", "proc.output", "proc.input", "proc.signal", "proc.wait",
                         "proc.resize", "proc.forget"})
    EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << op;
}

TEST_F(AgentProcess, StartAnswersAtOnceAndListShowsIt) {
  auto t0 = Clock::now();
  auto r = StartRaw({"sleep", "100"}, {{"tag", "napper"}, {"cwd", "/tmp"}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_LT(Clock::now() - t0, 2s);
  auto info = proto::ProcInfo::FromJson(*r);
  ASSERT_TRUE(info.ok()) << info.error().ToString() << r->dump();
  EXPECT_GT(info->pid, 1);
  EXPECT_TRUE(info->running);
  EXPECT_EQ(info->argv, (std::vector<std::string>{"sleep", "100"}));
  EXPECT_EQ(info->cwd, "/tmp");
  EXPECT_EQ(info->tag, "napper");
  EXPECT_FALSE(info->stdin_open);
  EXPECT_FALSE(info->pty.has_value());
  EXPECT_EQ(info->buffer_bytes, proto::kDefaultProcBuffer);
  EXPECT_GT(info->started_ms, int64_t{1600000000000});
  auto list = Call({{"op", "proc.list"}});
  ASSERT_TRUE(list.ok());
  auto l = proto::ProcListResult::FromJson(*list);
  ASSERT_TRUE(l.ok()) << l.error().ToString();
  ASSERT_EQ(l->processes.size(), 1u);
  EXPECT_EQ(l->processes[0].pid, info->pid);
  EXPECT_TRUE(l->processes[0].running);
  // The process is real: the sandbox sees it.
  EXPECT_TRUE(WaitForProcess("sleep 100"));
}

TEST_F(AgentProcess, ExitIsRecordedWithItsOutput) {
  int64_t pid = Start({"sh", "-c", "echo out; echo err >&2; exit 3"});
  json w = Wait(pid);
  EXPECT_EQ(w["state"], "exited");
  EXPECT_EQ(w["exit_code"], 3);
  EXPECT_EQ(w["signal"], 0);
  EXPECT_EQ(w["timed_out"], false);
  EXPECT_GE(w["ended_ms"].get<int64_t>(), w["started_ms"].get<int64_t>());
  OutputRead o = Output(pid);
  ASSERT_FALSE(o.error) << o.error->dump();
  EXPECT_EQ(o.first_meta, (json{{"stdout_from", 0}, {"stderr_from", 0}}));
  EXPECT_EQ(o.out, "out\n");
  EXPECT_EQ(o.err, "err\n");
  EXPECT_TRUE(o.ended_out && o.ended_err);
  ASSERT_TRUE(o.result);
  EXPECT_EQ((*o.result)["stdout"], (json{{"start", 0}, {"end", 4}}));
  // From an offset inside the output.
  o = Output(pid, 2, 4);
  EXPECT_EQ(o.out, "t\n");
  EXPECT_EQ(o.err, "");
  // Beyond the end: S001.
  auto s = OpenOutput(pid, 5, 0, false);
  o = ReadAll(s);
  ASSERT_TRUE(o.error);
  EXPECT_EQ((*o.error)["code"], "S001") << o.error->dump();
}

TEST_F(AgentProcess, AProgramThatCannotRunIsListedAsExited) {
  auto r = StartRaw({"no-such-program-xyz"});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)["state"], "exited");
  EXPECT_EQ((*r)["exit_code"], 127);
  OutputRead o = Output((*r)["pid"].get<int64_t>());
  EXPECT_EQ(o.err, "exec: no-such-program-xyz: not found\n");
  // A bad cwd is the request's error.
  r = StartRaw({"true"}, {{"cwd", "/missing/dir"}});
  EXPECT_EQ(CodeOf(r), "S211");
}

TEST_F(AgentProcess, OutputIsStreamedAsItComes) {
  auto t0 = Clock::now();
  int64_t pid = Start({"sh", "-c", "echo first; sleep 2; echo second"});
  auto s = OpenOutput(pid, 0, 0, true);
  std::optional<Clock::duration> first_at;
  OutputRead o = ReadAll(s, 30s, [&](const std::string&) {
    if (!first_at) first_at = Clock::now() - t0;
  });
  ASSERT_FALSE(o.error) << o.error->dump();
  ASSERT_TRUE(first_at);
  EXPECT_LT(*first_at, 1500ms) << "the first line came only with the end";
  EXPECT_GE(Clock::now() - t0, 1900ms);
  EXPECT_EQ(o.out, "first\nsecond\n");
  ASSERT_TRUE(o.result);
  EXPECT_EQ((*o.result)["state"], "exited");  // follow ends with the process
  EXPECT_EQ((*o.result)["exit_code"], 0);
}

// A client that detaches mid-stream and comes back from its last offset
// gets exactly the bytes the process wrote, when the ring is big enough.
TEST_F(AgentProcess, ReattachingFromTheLastOffsetIsExact) {
  constexpr int64_t kPer = 140000, kChunks = 50;  // ~52 MiB of seq output
  const std::string expected = SeqText(1, kPer * kChunks);
  int64_t pid = Start({"sh", "-c",
                       "i=0; while [ $i -lt " + std::to_string(kChunks) + " ]; do seq $((i*" +
                           std::to_string(kPer) + "+1)) $((i*" + std::to_string(kPer) + "+" +
                           std::to_string(kPer) + ")); sleep 0.05; i=$((i+1)); done"},
                      {{"buffer_bytes", proto::kMaxProcBuffer}});
  std::string got;
  int attaches = 0;
  auto deadline = Clock::now() + 240s;
  for (;;) {
    ASSERT_LT(Clock::now(), deadline);
    auto s = OpenOutput(pid, static_cast<int64_t>(got.size()), 0, true);
    ASSERT_NE(s, nullptr);
    ++attaches;
    // Detach after ~9 MiB more (the last attach reads to the end).
    size_t detach_at = got.size() + (size_t{9} << 20);
    bool done = false;
    for (;;) {
      auto e = s->Next(deadline);
      ASSERT_TRUE(e.has_value()) << "timeout at " << got.size();
      if (e->kind == Event::Kind::kMeta) {
        ASSERT_FALSE(e->json.contains("gap")) << "the ring overwrote unsent bytes: " << e->json.dump();
        ASSERT_EQ(e->json["stdout_from"], got.size()) << "reattach did not start at the last offset";
      } else if (e->kind == Event::Kind::kData) {
        ASSERT_EQ(e->channel, proto::kStdout);
        got += e->data;
      } else if (e->kind == Event::Kind::kResult) {
        done = true;
        break;
      } else if (e->kind != Event::Kind::kEnd) {
        FAIL() << "unexpected event: " << e->json.dump();
      }
      if (got.size() >= detach_at) break;
    }
    if (done) break;
    s.reset();  // CANCEL: detaches, the process runs on
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_GE(attaches, 4);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected) << "the bytes differ";
  json info = Info(pid);
  EXPECT_EQ(info["attached"], 0);
  EXPECT_EQ(info["stdout"]["end"], expected.size());
}

// Reads a follow stream of `pid`, whose stdout is `expected`, checking every
// DATA against its true offset and every gap META against the stream's
// position; `pause` is spent before each of the first `slow_events`.
struct GapRead {
  size_t gaps = 0, bytes = 0;
  int64_t pos = 0;
  json result;
};
GapRead ReadChecked(const std::shared_ptr<proto::Stream>& s, const std::string& expected,
                    std::chrono::milliseconds pause = 0ms, int slow_events = 0) {
  GapRead g;
  bool meta = false;
  auto deadline = Clock::now() + 120s;
  for (int n = 0;; ++n) {
    if (n < slow_events) std::this_thread::sleep_for(pause);
    auto e = s->Next(deadline);
    EXPECT_TRUE(e.has_value());
    if (!e) return g;
    if (e->kind == Event::Kind::kMeta && !meta) {
      meta = true;
      EXPECT_EQ(e->json, (json{{"stdout_from", 0}, {"stderr_from", 0}}));
    } else if (e->kind == Event::Kind::kMeta) {
      auto m = proto::ProcOutputMeta::FromJson(e->json);
      EXPECT_TRUE(m.ok() && m->gap) << e->json.dump();
      if (!m.ok() || !m->gap) return g;
      EXPECT_EQ(m->gap->channel, proto::kStdout);
      EXPECT_EQ(m->gap->from, g.pos) << "a gap must start where the stream was";
      EXPECT_GT(m->gap->to, m->gap->from);
      g.pos = m->gap->to;
      ++g.gaps;
    } else if (e->kind == Event::Kind::kData) {
      EXPECT_LE(static_cast<size_t>(g.pos) + e->data.size(), expected.size());
      if (expected.compare(static_cast<size_t>(g.pos), e->data.size(), e->data) != 0) {
        ADD_FAILURE() << "DATA at " << g.pos << " is not the process's bytes there";
        return g;
      }
      g.pos += static_cast<int64_t>(e->data.size());
      g.bytes += e->data.size();
    } else if (e->kind == Event::Kind::kResult) {
      g.result = e->json;
      return g;
    } else if (e->kind != Event::Kind::kEnd) {
      ADD_FAILURE() << e->json.dump();
      return g;
    }
  }
}

// A 4 KiB ring under a fast writer: the stream says which bytes it lost
// (gap META), and every byte it sends is at its true offset.
TEST_F(AgentProcess, ASmallRingReportsGaps) {
  const std::string expected = SeqText(1, 2000000);
  int64_t pid = Start({"sh", "-c", "sleep 0.5; seq 1 2000000"}, {{"buffer_bytes", proto::kMinProcBuffer}});
  GapRead g = ReadChecked(OpenOutput(pid, 0, 0, true), expected);
  EXPECT_EQ(g.result["stdout"]["end"], expected.size());
  EXPECT_EQ(g.result["stdout"]["start"], expected.size() - proto::kMinProcBuffer);
  EXPECT_EQ(g.pos, static_cast<int64_t>(expected.size()));
  EXPECT_GE(g.gaps, 1u);
  EXPECT_LT(g.bytes, expected.size());
  // Asked for overwritten bytes, a stream starts at the ring's start and
  // its META says so.
  OutputRead o = Output(pid, 0, 0);
  EXPECT_EQ(o.first_meta["stdout_from"], expected.size() - proto::kMinProcBuffer);
  EXPECT_EQ(o.out, expected.substr(expected.size() - proto::kMinProcBuffer));
  EXPECT_TRUE(o.gaps.empty());
}

// Gap METAs are not under credit: a reader that is slow to consume must
// not receive more unconsumed control frames than the host client holds
// (which would end the connection); the losses merge into larger gaps.
TEST_F(AgentProcess, ASlowReaderOfASmallRingKeepsTheConnection) {
  const std::string expected = SeqText(1, 3000000);
  // cat writes 128 KiB at a time: every read overruns the 4 KiB ring.
  sb_->Sh("seq 1 3000000 > /tmp/seq");
  int64_t pid = Start({"sh", "-c", "sleep 0.2; cat /tmp/seq"}, {{"buffer_bytes", proto::kMinProcBuffer}});
  auto s = OpenOutput(pid, 0, 0, true);
  std::this_thread::sleep_for(500ms);
  GapRead g = ReadChecked(s, expected, 5ms, 200);
  EXPECT_TRUE(sb_->client().alive()) << sb_->client().failure();
  EXPECT_EQ(g.pos, static_cast<int64_t>(expected.size()));
  EXPECT_GE(g.gaps, 1u);
  EXPECT_EQ(g.result["state"], "exited");
}

// hold_output: the same 4 KiB ring and fast writer, but nothing unread is
// overwritten: with no reader the writer waits, its ring full; a slow
// reader then gets every byte, without a gap.
TEST_F(AgentProcess, AHeldRingLosesNothingAndTheWriterWaits) {
  const std::string expected = SeqText(1, 2000000);
  int64_t pid =
      Start({"seq", "1", "2000000"}, {{"buffer_bytes", proto::kMinProcBuffer}, {"hold_output", true}});
  std::this_thread::sleep_for(500ms);
  json held = Info(pid);
  EXPECT_EQ(held["state"], "running") << held.dump();
  EXPECT_EQ(held["stdout"]["start"], 0) << held.dump();
  EXPECT_EQ(held["stdout"]["end"], proto::kMinProcBuffer) << held.dump();
  GapRead g = ReadChecked(OpenOutput(pid, 0, 0, true), expected, 5ms, 100);
  EXPECT_EQ(g.gaps, 0u);
  EXPECT_EQ(g.bytes, expected.size());
  EXPECT_EQ(g.result["state"], "exited");
  EXPECT_EQ(g.result["exit_code"], 0);
}

TEST_F(AgentProcess, ConcurrentAttachersSeeTheSameBytes) {
  const std::string expected = SeqText(1, 300000);
  int64_t pid = Start({"sh", "-c", "sleep 0.3; seq 1 300000"}, {{"buffer_bytes", proto::kMaxProcBuffer}});
  OutputRead a, b;
  std::thread ta([&] { a = ReadAll(OpenOutput(pid, 0, 0, true)); });
  std::thread tb([&] { b = ReadAll(OpenOutput(pid, 0, 0, true)); });
  ta.join();
  tb.join();
  ASSERT_FALSE(a.error);
  ASSERT_FALSE(b.error);
  EXPECT_TRUE(a.out == expected) << a.out.size();
  EXPECT_TRUE(b.out == expected) << b.out.size();
  EXPECT_TRUE(a.gaps.empty() && b.gaps.empty());
}

TEST_F(AgentProcess, StdinThroughProcInput) {
  int64_t pid = Start({"cat"}, {{"stdin", true}, {"buffer_bytes", proto::kMaxProcBuffer}});
  EXPECT_EQ(Info(pid)["stdin_open"], true);
  auto r = Input(pid, "hello\n");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)["bytes_written"], 6);
  // More than the credit window: the agent returns credit as cat takes it.
  std::string big(3u << 20, 'x');
  r = Input(pid, big);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)["bytes_written"], big.size());
  r = Input(pid, "world", /*close=*/true);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)["bytes_written"], 5);
  json w = Wait(pid, 10000);
  EXPECT_EQ(w["state"], "exited");
  EXPECT_EQ(w["exit_code"], 0);
  EXPECT_EQ(w["stdin_open"], false);
  OutputRead o = Output(pid);
  EXPECT_TRUE(o.out == "hello\n" + big + "world") << o.out.size();
  // Input to an exited process, or one started without stdin: S221.
  EXPECT_EQ(CodeOf(Input(pid, "late")), "S221");
  int64_t nostdin = Start({"sleep", "100"});
  EXPECT_EQ(CodeOf(Input(nostdin, "x")), "S221");
  // After close, stdin stays closed.
  int64_t pid2 = Start({"sleep", "100"}, {{"stdin", true}});
  ASSERT_TRUE(Input(pid2, "", true).ok());
  EXPECT_EQ(Info(pid2)["stdin_open"], false);
  EXPECT_EQ(CodeOf(Input(pid2, "x")), "S221");
}

TEST_F(AgentProcess, Signals) {
  int64_t pid = Start({"sleep", "100"});
  auto r = Call({{"op", "proc.signal"}, {"pid", pid}, {"signal", "TERM"}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(*r, json::object());
  json w = Wait(pid, 10000);
  EXPECT_EQ(w["state"], "exited");
  EXPECT_EQ(w["signal"], 15);
  EXPECT_EQ(w["exit_code"], 143);
  // Exited: S221. An unknown name: S001.
  EXPECT_EQ(CodeOf(Call({{"op", "proc.signal"}, {"pid", pid}, {"signal", "TERM"}})), "S221");
  int64_t other = Start({"sleep", "100"});
  EXPECT_EQ(CodeOf(Call({{"op", "proc.signal"}, {"pid", other}, {"signal", "SEGV"}})), "S001");
  EXPECT_EQ(CodeOf(Call({{"op", "proc.signal"}, {"pid", other}, {"signal", "9"}})), "S001");
  EXPECT_EQ(Info(other)["state"], "running");
  // The group: a child of the process goes too.
  int64_t sh = Start({"sh", "-c", "sleep 200 & wait"});
  ASSERT_TRUE(WaitForProcess("sleep 200"));
  ASSERT_TRUE(Call({{"op", "proc.signal"}, {"pid", sh}, {"signal", "KILL"}}).ok());
  EXPECT_EQ(Wait(sh, 10000)["signal"], 9);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(sb_->Sh("grep -l '^sleep$' /proc/[0-9]*/comm | wc -l"), "1\n");  // only `other`
}

TEST_F(AgentProcess, WaitWithAndWithoutTimeout) {
  int64_t pid = Start({"sleep", "100"});
  auto t0 = Clock::now();
  json w = Wait(pid, 300);
  EXPECT_GE(Clock::now() - t0, 290ms);
  EXPECT_LT(Clock::now() - t0, 5s);
  EXPECT_EQ(w["state"], "running");
  w = Wait(pid, 0);
  EXPECT_EQ(w["state"], "running");
  int64_t quick = Start({"sleep", "0.3"});
  w = Wait(quick);
  EXPECT_EQ(w["state"], "exited");
  EXPECT_EQ(w["exit_code"], 0);
  // An exited process answers at once.
  w = Wait(quick);
  EXPECT_EQ(w["state"], "exited");
  // Cancelling a wait ends it; the process runs on.
  auto s = sb_->client().Open(json{{"op", "proc.wait"}, {"pid", pid}});
  ASSERT_TRUE(s.ok());
  std::this_thread::sleep_for(100ms);
  (*s)->Cancel();
  EXPECT_EQ(Info(pid)["state"], "running");
}

TEST_F(AgentProcess, TimeoutKillsTheGroup) {
  auto t0 = Clock::now();
  int64_t pid = Start({"sh", "-c", "sleep 100 & sleep 100"}, {{"timeout_ms", 300}});
  json w = Wait(pid, 20000);
  EXPECT_LT(Clock::now() - t0, 10s);
  EXPECT_EQ(w["state"], "exited");
  EXPECT_EQ(w["timed_out"], true);
  EXPECT_EQ(w["signal"], 9);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(sb_->Sh("grep -l '^sleep$' /proc/[0-9]*/comm | wc -l"), "0\n");
}

TEST_F(AgentProcess, ForgetRemovesAnExitedProcess) {
  int64_t pid = Start({"true"});
  EXPECT_EQ(Wait(pid)["state"], "exited");
  ASSERT_TRUE(Call({{"op", "proc.forget"}, {"pid", pid}}).ok());
  EXPECT_TRUE(Info(pid).is_null());
  EXPECT_EQ(CodeOf(Call({{"op", "proc.forget"}, {"pid", pid}})), "S220");
  int64_t running = Start({"sleep", "100"});
  EXPECT_EQ(CodeOf(Call({{"op", "proc.forget"}, {"pid", running}})), "S221");
  EXPECT_EQ(Info(running)["state"], "running");
}

TEST_F(AgentProcess, OnlyTheNewestExitedProcessesStayListed) {
  std::vector<int64_t> pids;
  for (int i = 0; i < proto::kMaxExitedProcesses + 6; ++i) {
    int64_t pid = Start({"true"}, {{"buffer_bytes", proto::kMinProcBuffer}});
    ASSERT_GT(pid, 0);
    ASSERT_EQ(Wait(pid)["state"], "exited");
    pids.push_back(pid);
  }
  auto list = Call({{"op", "proc.list"}});
  ASSERT_TRUE(list.ok());
  std::set<int64_t> listed;
  for (const auto& p : (*list)["processes"]) listed.insert(p["pid"].get<int64_t>());
  EXPECT_EQ(listed, std::set<int64_t>(pids.end() - proto::kMaxExitedProcesses, pids.end()));
  EXPECT_EQ(CodeOf(Call({{"op", "proc.wait"}, {"pid", pids[0]}})), "S220");
}

TEST_F(AgentProcess, UnknownPidIsS220ForEveryOp) {
  const int64_t pid = 99999;
  EXPECT_EQ(CodeOf(Call({{"op", "proc.signal"}, {"pid", pid}, {"signal", "TERM"}})), "S220");
  EXPECT_EQ(CodeOf(Call({{"op", "proc.wait"}, {"pid", pid}})), "S220");
  EXPECT_EQ(CodeOf(Call({{"op", "proc.resize"}, {"pid", pid}, {"rows", 10}, {"cols", 10}})), "S220");
  EXPECT_EQ(CodeOf(Call({{"op", "proc.forget"}, {"pid", pid}})), "S220");
  EXPECT_EQ(CodeOf(Input(pid, "x")), "S220");
  OutputRead o = Output(pid);
  ASSERT_TRUE(o.error);
  EXPECT_EQ((*o.error)["code"], "S220");
  // An exec's pid is not a live process.
  EXPECT_EQ(CodeOf(Call({{"op", "proc.wait"}, {"pid", 1}})), "S220");
  // Hostile values.
  EXPECT_EQ(CodeOf(Call({{"op", "proc.wait"}, {"pid", -1}})), "S001");
  EXPECT_EQ(CodeOf(Call({{"op", "proc.output"}, {"pid", 5}, {"stdout_from", -1}})), "S001");
  EXPECT_EQ(CodeOf(Call({{"op", "proc.start"}, {"argv", json::array()}})), "S001");
  EXPECT_EQ(CodeOf(Call({{"op", "proc.start"}, {"argv", {"true"}}, {"buffer_bytes", 1}})), "S001");
  EXPECT_EQ(CodeOf(StartRaw({"true"}, {{"tag", std::string(300, 't')}})), "S001");
  EXPECT_EQ(CodeOf(StartRaw({"true", std::string(200000, 'a')})), "S001");
  EXPECT_EQ(CodeOf(Call({{"op", "proc.teleport"}})), "S219");
}

TEST_F(AgentProcess, LiveProcessCap) {
  std::vector<int64_t> pids;
  for (int i = 0; i < proto::kMaxLiveProcesses; ++i) {
    int64_t pid = Start({"sleep", "1000"}, {{"buffer_bytes", proto::kMinProcBuffer}});
    ASSERT_GT(pid, 0) << "start " << i;
    pids.push_back(pid);
  }
  auto r = StartRaw({"sleep", "1000"}, {{"buffer_bytes", proto::kMinProcBuffer}});
  EXPECT_EQ(CodeOf(r), "S400") << MessageOf(r);
  auto list = Call({{"op", "proc.list"}});
  ASSERT_TRUE(list.ok());
  auto l = proto::ProcListResult::FromJson(*list);
  ASSERT_TRUE(l.ok()) << l.error().ToString();
  ASSERT_EQ(l->processes.size(), pids.size());
  for (size_t i = 0; i < pids.size(); ++i) EXPECT_TRUE(l->processes[i].running);
  std::set<int64_t> listed;
  for (const auto& p : l->processes) listed.insert(p.pid);
  EXPECT_EQ(listed, std::set<int64_t>(pids.begin(), pids.end()));
  // One ends: there is room for one more.
  ASSERT_TRUE(Call({{"op", "proc.signal"}, {"pid", pids[0]}, {"signal", "KILL"}}).ok());
  EXPECT_EQ(Wait(pids[0])["state"], "exited");
  EXPECT_TRUE(StartRaw({"sleep", "1000"}, {{"buffer_bytes", proto::kMinProcBuffer}}).ok());
}

TEST_F(AgentProcess, RingBytesCap) {
  // 8 processes of two 16 MiB rings reserve the 256 MiB.
  for (int i = 0; i < 8; ++i)
    ASSERT_GT(Start({"sleep", "1000"}, {{"buffer_bytes", proto::kMaxProcBuffer}}), 0);
  auto r = StartRaw({"sleep", "1000"}, {{"buffer_bytes", proto::kMinProcBuffer}});
  EXPECT_EQ(CodeOf(r), "S400") << MessageOf(r);
  // Reserving is not allocating: the agent stays small.
  EXPECT_LT(sb_->AgentHwmKb(), 64 * 1024);
}

TEST_F(AgentProcess, AttachCap) {
  int64_t pid = Start({"sleep", "100"});
  std::vector<std::shared_ptr<proto::Stream>> streams;
  for (int i = 0; i < proto::kMaxAttachesPerProcess; ++i) {
    auto s = OpenOutput(pid, 0, 0, true);
    ASSERT_NE(s, nullptr);
    auto e = s->Next(Clock::now() + 10s);
    ASSERT_TRUE(e && e->kind == Event::Kind::kMeta);
    streams.push_back(s);
  }
  EXPECT_EQ(Info(pid)["attached"], proto::kMaxAttachesPerProcess);
  OutputRead o = Output(pid, 0, 0, true);
  ASSERT_TRUE(o.error);
  EXPECT_EQ((*o.error)["code"], "S400");
  // Detaching makes room.
  streams.pop_back();
  auto deadline = Clock::now() + 10s;
  while (Info(pid)["attached"] != proto::kMaxAttachesPerProcess - 1 && Clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(Info(pid)["attached"], proto::kMaxAttachesPerProcess - 1);
  o = Output(pid, 0, 0, false);
  EXPECT_FALSE(o.error);
}

TEST_F(AgentProcess, TerminalHasTheSizeAndTerm) {
  // It waits for a line, so it is still running (its stdin open) when asked:
  // once it exits its input is closed.
  int64_t pid = Start({"sh", "-c", "read x; echo $TERM; tput cols; stty size"},
                      {{"pty", {{"rows", 24}, {"cols", 80}}}});
  EXPECT_EQ(Info(pid)["stdin_open"], true);
  ASSERT_TRUE(Input(pid, "\n").ok());
  OutputRead o = ReadAll(OpenOutput(pid, 0, 0, true));
  ASSERT_FALSE(o.error) << o.error->dump();
  // The line's echo, then what it printed.
  EXPECT_EQ(o.out, "\r\nxterm-256color\r\n80\r\n24 80\r\n");
  EXPECT_EQ(o.err, "");
  ASSERT_TRUE(o.result);
  EXPECT_EQ((*o.result)["pty"], (json{{"rows", 24}, {"cols", 80}}));
  // TERM from the request wins.
  pid = Start({"sh", "-c", "echo $TERM"},
              {{"pty", {{"rows", 24}, {"cols", 80}}}, {"env", {kPath, "TERM=dumb"}}});
  o = ReadAll(OpenOutput(pid, 0, 0, true));
  EXPECT_EQ(o.out, "dumb\r\n");
  // A terminal for another user is that user's.
  pid = Start({"sh", "-c", "id -u; stat -c %u $(tty); stty size"},
              {{"pty", {{"rows", 30}, {"cols", 90}}}, {"user", "1000"}});
  o = ReadAll(OpenOutput(pid, 0, 0, true));
  EXPECT_EQ(o.out, "1000\r\n1000\r\n30 90\r\n");
  // Resize of a process without a terminal: S221.
  int64_t plain = Start({"sleep", "100"});
  EXPECT_EQ(CodeOf(Call({{"op", "proc.resize"}, {"pid", plain}, {"rows", 40}, {"cols", 132}})), "S221");
  EXPECT_EQ(CodeOf(Call({{"op", "proc.resize"}, {"pid", plain}, {"rows", 0}, {"cols", 132}})), "S001");
}

TEST_F(AgentProcess, TerminalResize) {
  int64_t pid = Start({"sh", "-c", "read x; stty size"}, {{"pty", {{"rows", 24}, {"cols", 80}}}});
  auto r = Call({{"op", "proc.resize"}, {"pid", pid}, {"rows", 40}, {"cols", 132}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(Info(pid)["pty"], (json{{"rows", 40}, {"cols", 132}}));
  ASSERT_TRUE(Input(pid, "\n").ok());
  OutputRead o = ReadAll(OpenOutput(pid, 0, 0, true));
  EXPECT_NE(o.out.find("40 132\r\n"), std::string::npos) << o.out;
  // Exited: S221.
  EXPECT_EQ(CodeOf(Call({{"op", "proc.resize"}, {"pid", pid}, {"rows", 10}, {"cols", 10}})), "S221");
}

TEST_F(AgentProcess, TerminalCtrlCInterruptsTheForegroundJob) {
  int64_t pid = Start({"sh", "-i"}, {{"pty", {{"rows", 24}, {"cols", 80}}}, {"env", {kPath, "PS1=$ "}}});
  auto s = OpenOutput(pid, 0, 0, true);
  ASSERT_NE(s, nullptr);
  std::string out;
  auto read_until = [&](const std::string& what, std::chrono::seconds wait) {
    auto deadline = Clock::now() + wait;
    while (out.find(what) == std::string::npos) {
      auto e = s->Next(deadline);
      if (!e) return false;
      if (e->kind == Event::Kind::kData) out += e->data;
      if (e->kind == Event::Kind::kResult || e->kind == Event::Kind::kError) return false;
    }
    return true;
  };
  ASSERT_TRUE(Input(pid, "sleep 100\n").ok());
  ASSERT_TRUE(WaitForProcess("sleep 100"));
  ASSERT_TRUE(Input(pid, "\x03").ok());
  ASSERT_TRUE(Input(pid, "echo o''k\n").ok());
  // The typed line echoes as "o''k"; only the shell prints "ok".
  EXPECT_TRUE(read_until("ok\r\n", 10s)) << out;
  EXPECT_EQ(Info(pid)["state"], "running");  // the shell survived
  EXPECT_EQ(sb_->Sh("grep -l '^sleep$' /proc/[0-9]*/comm | wc -l"), "0\n");
  // Closing a terminal's input sends its end of file: the shell exits.
  ASSERT_TRUE(Input(pid, "", /*close=*/true).ok());
  json w = Wait(pid, 10000);
  EXPECT_EQ(w["state"], "exited");
  EXPECT_EQ(w["exit_code"], 0);
}

TEST_F(AgentProcess, TerminalCloseEndsAPartialLine) {
  int64_t pid = Start({"cat"}, {{"pty", {{"rows", 24}, {"cols", 80}}}});
  auto r = Input(pid, "abc", /*close=*/true);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)["bytes_written"], 3);
  json w = Wait(pid, 10000);
  EXPECT_EQ(w["state"], "exited");
  OutputRead o = Output(pid);
  EXPECT_EQ(o.out, "abcabc") << o.out;  // the echo, then cat's copy
}

// Every background process dies with the channel, and the namespace is
// left empty.
TEST_F(AgentProcess, EverythingIsKilledWhenTheChannelCloses) {
  for (int i = 0; i < 100; ++i)
    ASSERT_GT(Start({"sleep", "1000"}, {{"buffer_bytes", proto::kMinProcBuffer}}), 0);
  auto list = Call({{"op", "proc.list"}});
  ASSERT_TRUE(list.ok());
  EXPECT_EQ((*list)["processes"].size(), 100u);
  // The host pids of the sandbox's processes (its own pid namespace).
  auto ns_of = [](const std::string& pid) {
    char buf[64] = {};
    ssize_t n = ::readlink(("/proc/" + pid + "/ns/pid").c_str(), buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  };
  const std::string ns = ns_of(std::to_string(sb_->agent_pid()));
  ASSERT_FALSE(ns.empty());
  auto members = [&] {
    std::vector<std::string> out;
    DIR* d = ::opendir("/proc");
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.find_first_not_of("0123456789") == std::string::npos && ns_of(name) == ns) out.push_back(name);
    }
    ::closedir(d);
    return out;
  };
  EXPECT_GE(members().size(), 101u);  // the agent and its 100
  EXPECT_EQ(sb_->CloseChannelAndWait(20s), 0);
  EXPECT_TRUE(members().empty());
}

}  // namespace
}  // namespace skiff::agent_test
