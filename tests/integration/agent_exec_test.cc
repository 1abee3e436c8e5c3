// skiff-agent exec engine, run as PID 1 of a private namespace.
#include <poll.h>

#include <thread>

#include "agent_harness.h"
#include "protocol/frame.h"
#include "protocol/messages.h"

namespace skiff::agent_test {
namespace {

class AgentExec : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (namespaces, mounts)";
    sb_ = AgentSandbox::Start();
    ASSERT_NE(sb_, nullptr);
  }
  std::unique_ptr<AgentSandbox> sb_;
};

TEST_F(AgentExec, HelloAndInfo) {
  const json& h = sb_->client().hello();
  EXPECT_EQ(h["proto"], 1);
  EXPECT_EQ(h["agent"].get<std::string>().rfind("skiff-agent/", 0), 0u);
  EXPECT_NE(std::find(h["ops"].begin(), h["ops"].end(), "fs.sed"), h["ops"].end());
  auto r = sb_->Call({{"op", "info"}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)["pid"], 1);  // PID 1 of its namespace
  EXPECT_EQ((*r)["proto"], 1);
  EXPECT_TRUE((*r)["kernel"].is_string());
}

// op "usage": the agent's own system, in the form the host accepts.
TEST_F(AgentExec, UsageAnswersItsSystemsCounters) {
  const json& h = sb_->client().hello();
  EXPECT_NE(std::find(h["ops"].begin(), h["ops"].end(), "usage"), h["ops"].end());
  auto r = sb_->Call({{"op", "usage"}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  auto u = proto::UsageResult::FromJson(*r);
  ASSERT_TRUE(u.ok()) << u.error().ToString() << " " << r->dump();
  EXPECT_GE(u->cpu_count, 1u);
  EXPECT_GT(u->cpu_total_ticks, 0u);
  EXPECT_GT(u->mem_total_bytes, 0u);
  EXPECT_GT(u->disk_total_bytes, 0u);
  auto bad = sb_->Call({{"op", "usage"}, {"extra", 1}});
  EXPECT_TRUE(bad.ok()) << "unknown fields are ignored, as by every op";
}

TEST_F(AgentExec, ExitCodesSignalsAndSeparateStreams) {
  auto o = sb_->Exec({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(o.exit_code, 3);
  EXPECT_EQ(o.signal, 0);
  EXPECT_EQ(o.out, "out\n");
  EXPECT_EQ(o.err, "err\n");
  EXPECT_TRUE(o.got_meta);
  EXPECT_EQ(o.result["timed_out"], false);
  EXPECT_EQ(o.result["cancelled"], false);
  EXPECT_EQ(o.result["stdout_truncated"], false);
  EXPECT_TRUE(o.result["duration_ms"].is_number_integer());

  o = sb_->Exec({"sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(o.exit_code, 143);
  EXPECT_EQ(o.signal, 15);
  o = sb_->Exec({"sh", "-c", "kill -KILL $$"});
  EXPECT_EQ(o.exit_code, 137);
  o = sb_->Exec({"true"});
  EXPECT_EQ(o.exit_code, 0);
}

TEST_F(AgentExec, NotFoundIs127) {
  auto o = sb_->Exec({"no-such-program-xyz"});
  EXPECT_EQ(o.exit_code, 127);
  EXPECT_EQ(o.err, "exec: no-such-program-xyz: not found\n");
  EXPECT_EQ(o.out, "");
  EXPECT_FALSE(o.got_meta);
  o = sb_->Exec({"/nope/prog"});
  EXPECT_EQ(o.exit_code, 127);
  EXPECT_EQ(o.err, "exec: /nope/prog: not found\n");
  // PATH is the final environment's: without /usr/bin in it, ls is not found.
  o = sb_->Exec({"ls"}, json{{"env", {"PATH=/nowhere"}}});
  EXPECT_EQ(o.exit_code, 127);
}

TEST_F(AgentExec, PermissionDeniedAndExecFormatAre126) {
  ASSERT_TRUE(sb_->Write("/tmp/noexec", "#!/bin/sh\necho hi\n", {{"mode", 0644}}).ok());
  auto o = sb_->Exec({"/tmp/noexec"});
  EXPECT_EQ(o.exit_code, 126);
  EXPECT_EQ(o.err, "exec: /tmp/noexec: permission denied\n");
  ASSERT_TRUE(sb_->Write("/tmp/garbage", "this is not a program\n", {{"mode", 0755}}).ok());
  o = sb_->Exec({"/tmp/garbage"});
  EXPECT_EQ(o.exit_code, 126);
  EXPECT_EQ(o.err, "exec: /tmp/garbage: exec format error\n");
  // A name without '/' searched in PATH finds the executable one.
  ASSERT_TRUE(
      sb_->Write("/tmp/bin1/tool", "#!/bin/sh\necho one\n", {{"mode", 0755}, {"parents", true}}).ok());
  o = sb_->Exec({"tool"}, json{{"env", {"PATH=/tmp/none:/tmp/bin1:/usr/bin"}}});
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.out, "one\n");
}

TEST_F(AgentExec, StdinIsStreamed) {
  auto o = sb_->Exec({"cat"}, json::object(), std::string("hello\nworld"));
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.out, "hello\nworld");
  // More than the initial window: credit must come back from the agent.
  std::string big(3u << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>('a' + (i / 4096) % 26);
  o = sb_->Exec({"sh", "-c", "cat | md5sum"}, json::object(), big);
  EXPECT_EQ(o.exit_code, 0);
  auto ref = sb_->Write("/tmp/big", big);
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(o.out, sb_->Sh("md5sum < /tmp/big"));
  // Without stdin the child sees EOF at once.
  o = sb_->Exec({"sh", "-c", "cat; echo done"});
  EXPECT_EQ(o.out, "done\n");
  // A child that does not read stdin still completes.
  o = sb_->Exec({"true"}, json::object(), std::string(2u << 20, 'y'));
  EXPECT_EQ(o.exit_code, 0);
}

TEST_F(AgentExec, EnvironmentIsExactlyTheRequest) {
  auto o = sb_->Exec({"/usr/bin/env"}, json{{"env", {"FOO=bar=baz", "PATH=/usr/bin", "NOEQUALS", "=x"}}});
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.out, "FOO=bar=baz\nPATH=/usr/bin\n");
}

TEST_F(AgentExec, CwdErrors) {
  auto o = sb_->Exec({"pwd"}, json{{"cwd", "/tmp"}});
  EXPECT_EQ(o.out, "/tmp\n");
  o = sb_->Exec({"pwd"}, json{{"cwd", "/missing/dir"}});
  ASSERT_TRUE(o.error.has_value());
  EXPECT_EQ((*o.error)["code"], "S211");
  EXPECT_EQ((*o.error)["message"], "file not found: workdir /missing/dir");
  ASSERT_TRUE(sb_->Write("/tmp/afile", "x").ok());
  o = sb_->Exec({"pwd"}, json{{"cwd", "/tmp/afile"}});
  ASSERT_TRUE(o.error.has_value());
  EXPECT_EQ((*o.error)["code"], "S212");
  EXPECT_EQ((*o.error)["message"], "not a directory or wrong type: workdir /tmp/afile");
}

TEST_F(AgentExec, TimeoutKillsTheWholeGroup) {
  auto t0 = std::chrono::steady_clock::now();
  auto o = sb_->Exec({"sh", "-c", "sleep 100 & echo $! > /tmp/gc; echo started; sleep 100"},
                     json{{"timeout_ms", 500}});
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, 10s);
  EXPECT_EQ(o.result["timed_out"], true);
  EXPECT_EQ(o.exit_code, 137);
  EXPECT_EQ(o.out, "started\n");  // partial output streamed before the kill
  std::string gc = sb_->Sh("cat /tmp/gc");
  ASSERT_FALSE(gc.empty());
  // The grandchild is gone (killed with the group, then reaped by PID 1).
  std::this_thread::sleep_for(200ms);
  auto k = sb_->Exec({"sh", "-c", "kill -0 " + gc.substr(0, gc.size() - 1)});
  EXPECT_NE(k.exit_code, 0);
}

TEST_F(AgentExec, BackgroundChildHoldingPipesDelaysCompletion) {
  auto t0 = std::chrono::steady_clock::now();
  auto o = sb_->Exec({"sh", "-c", "(sleep 1; echo late) & echo early"});
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.out, "early\nlate\n");
  EXPECT_GE(took, 900ms);
}

TEST_F(AgentExec, OutputCapDrainsAndTruncates) {
  auto t0 = std::chrono::steady_clock::now();
  auto o = sb_->Exec({"sh", "-c", "head -c 100000000 /dev/zero; head -c 5000 /dev/zero >&2"},
                     json{{"output_limit", 1 << 20}});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 60s);
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.out.size(), 1u << 20);
  EXPECT_EQ(o.result["stdout_truncated"], true);
  EXPECT_EQ(o.err.size(), 5000u);
  EXPECT_EQ(o.result["stderr_truncated"], false);
  // Default limit is 1 MiB; a small explicit limit on stderr.
  o = sb_->Exec({"sh", "-c", "head -c 3000000 /dev/zero >&2"}, json{{"output_limit", 100}});
  EXPECT_EQ(o.err.size(), 100u);
  EXPECT_EQ(o.result["stderr_truncated"], true);
  o = sb_->Exec({"sh", "-c", "head -c 2000000 /dev/zero"});
  EXPECT_EQ(o.out.size(), 1u << 20);
  EXPECT_EQ(o.result["stdout_truncated"], true);
  // Exactly at the limit: not truncated.
  o = sb_->Exec({"sh", "-c", "head -c 100 /dev/zero"}, json{{"output_limit", 100}});
  EXPECT_EQ(o.out.size(), 100u);
  EXPECT_EQ(o.result["stdout_truncated"], false);
}

TEST_F(AgentExec, ConcurrentExecs) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  std::vector<ExecOut> outs(4);
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&, i] { outs[i] = sb_->Exec({"sh", "-c", "sleep 1; echo " + std::to_string(i)}); });
  for (auto& t : ts) t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3500ms);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(outs[i].exit_code, 0);
    EXPECT_EQ(outs[i].out, std::to_string(i) + "\n");
  }
}

TEST_F(AgentExec, CancelKillsTheGroup) {
  auto s =
      sb_->client().Open(json{{"op", "exec"}, {"argv", {"/bin/sh", "-c", "echo $$ > /tmp/cpid; sleep 100"}}});
  ASSERT_TRUE(s.ok());
  (void)(*s)->End(proto::kStdin);
  auto e = (*s)->Next(std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(e && e->kind == proto::Event::Kind::kMeta);
  std::this_thread::sleep_for(300ms);
  (*s)->Cancel();
  for (;;) {
    e = (*s)->Next(std::chrono::steady_clock::now() + 10s);
    ASSERT_TRUE(e.has_value());
    if (e->kind == proto::Event::Kind::kResult) break;
  }
  EXPECT_EQ(e->json["cancelled"], true);
  EXPECT_EQ(e->json["exit_code"], 137);
}

TEST_F(AgentExec, OrphansAreReaped) {
  sb_->Sh("for i in 1 2 3 4 5 6 7 8; do (sleep 0.2 &) ; done");
  std::this_thread::sleep_for(1s);
  std::string z = sb_->Sh("grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l");
  EXPECT_EQ(z, "0\n");
}

TEST_F(AgentExec, ChildIsConfined) {
  std::string st = sb_->Sh("grep -E '^(CapBnd|CapEff|NoNewPrivs|Seccomp):' /proc/self/status");
  EXPECT_NE(st.find("CapBnd:\t00000000a80425fb"), std::string::npos) << st;
  EXPECT_NE(st.find("CapEff:\t00000000a80425fb"), std::string::npos) << st;
  EXPECT_NE(st.find("NoNewPrivs:\t1"), std::string::npos) << st;
  EXPECT_NE(st.find("Seccomp:\t2"), std::string::npos) << st;
  auto o = sb_->Exec({"unshare", "-U", "true"});
  EXPECT_NE(o.exit_code, 0);
  o = sb_->Exec({"mount", "-t", "tmpfs", "x", "/tmp"});
  EXPECT_NE(o.exit_code, 0);
  EXPECT_EQ(sb_->Sh("ulimit -c"), "0\n");
  // The agent itself is not dumpable, so a sandboxed process cannot read its memory.
  o = sb_->Exec({"cat", "/proc/1/environ"});
  EXPECT_NE(o.exit_code, 0);
}

TEST_F(AgentExec, UnknownOpIsS219AndTheChannelKeepsServing) {
  auto r = sb_->Call({{"op", "teleport"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS219);
  EXPECT_EQ(r.error().message(), "operation not supported by this sandbox's agent: teleport");
  r = sb_->Call({{"noop", 1}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS001);
  r = sb_->Call({{"op", "fs.stat"}, {"path", 42}});
  EXPECT_EQ(CodeOf(r), "S001");
  r = sb_->Call({{"op", "exec"}, {"argv", json::array()}});
  EXPECT_EQ(CodeOf(r), "S001");
  EXPECT_EQ(sb_->Sh("echo still here"), "still here\n");
}

// Unknown frame types and malformed JSON, spoken on a raw channel.
TEST(AgentRaw, UnknownFrameTypeAndBadJson) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(sv[1], 3);
    const char* argv[] = {"skiff-agent", "--fd", "3", nullptr};
    ::execv(AgentBinary().c_str(), const_cast<char**>(argv));
    ::_exit(127);
  }
  ::close(sv[1]);
  UniqueFd fd(sv[0]);
  proto::Decoder dec;
  auto next = [&]() -> proto::Frame {
    for (;;) {
      auto f = dec.Next();
      EXPECT_TRUE(f.ok());
      if (f.ok() && *f) return **f;
      pollfd p{fd.get(), POLLIN, 0};
      if (::poll(&p, 1, 10000) <= 0) return proto::Frame{};
      char buf[65536];
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n <= 0) return proto::Frame{};
      dec.Feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  };
  auto send = [&](const std::string& b) {
    ASSERT_EQ(::write(fd.get(), b.data(), b.size()), (ssize_t)b.size());
  };
  proto::Frame h = next();
  EXPECT_EQ(h.type, proto::Type::kHello);
  // A snapshot resume is for a microVM guest only: this agent ignores it (no
  // second HELLO, nothing applied). Harmless values, should it not: this
  // host's own hostname and the current time.
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  json resume = {{"proto", 1},
                 {"resume",
                  {{"seed", std::string(64, 'a')},
                   {"realtime_ns", static_cast<int64_t>(::time(nullptr)) * 1000000000},
                   {"hostname", host}}}};
  send(proto::EncodeFrame(0, proto::Type::kHello, 0, resume.dump()));
  send(proto::EncodeFrame(0, proto::Type::kHello, 0, R"({"proto":1})"));
  send(proto::EncodeFrame(7, proto::Type::kOpen, 0, R"({"op":"info"})"));
  proto::Frame info = next();
  EXPECT_EQ(info.stream, 7u) << "the agent answered the resume";
  EXPECT_EQ(info.type, proto::Type::kResult);
  EXPECT_EQ(json::parse(info.payload, nullptr, false).value("restored", true), false);
  send(proto::EncodeFrame(1, static_cast<proto::Type>(42), 0, "??"));
  proto::Frame f = next();
  EXPECT_EQ(f.stream, 1u);
  EXPECT_EQ(f.type, proto::Type::kError);
  EXPECT_EQ(json::parse(f.payload)["code"], "S219");
  send(proto::EncodeFrame(3, proto::Type::kOpen, 0, "{not json"));
  f = next();
  EXPECT_EQ(f.stream, 3u);
  EXPECT_EQ(f.type, proto::Type::kError);
  EXPECT_EQ(json::parse(f.payload)["code"], "S001");
  send(proto::EncodeFrame(5, proto::Type::kOpen, 0, R"({"op":"info"})"));
  f = next();
  EXPECT_EQ(f.stream, 5u);
  EXPECT_EQ(f.type, proto::Type::kResult);
  // Closing the channel makes the agent exit.
  fd.reset();
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st));
}

TEST(AgentForkBomb, AgentSurvives) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  if (::access("/sys/fs/cgroup/pids", W_OK) != 0)
    GTEST_SKIP() << "no writable pids cgroup hierarchy to bound the fork bomb on this host";
  auto sb = AgentSandbox::Start({.pids_max = 100});
  ASSERT_NE(sb, nullptr);
  auto o = sb->Exec({"sh", "-c", "b() { b | b & }; b; sleep 5"}, json{{"timeout_ms", 2000}});
  EXPECT_EQ(o.result["timed_out"], true);
  // The agent answers and can start processes again once the bomb is gone.
  auto r = sb->Call({{"op", "info"}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ExecOut ok;
  for (int i = 0; i < 50; ++i) {
    ok = sb->Exec({"echo", "alive"});
    if (ok.exit_code == 0) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(ok.out, "alive\n");
}

}  // namespace
}  // namespace skiff::agent_test
