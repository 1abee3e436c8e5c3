// Hostile input on the iii engine WebSocket (docs/architecture.md#transports-and-their-limits,
// docs/api.md#limits-and-defaults): non-JSON text, unknown `type`, invokefunction without ids, binary frames,
// a 100 MB frame, 10 000 concurrent invocations on one socket, and a client that vanishes while its execs
// run. Each frame is answered or dropped with a log line; a second connection keeps getting answers
// throughout; the daemon's VmRSS stays under kRssBoundKb; an exec whose caller vanished finishes, its process
// is gone, and its sandbox keeps following the idle rules.
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>

#include "daemon_harness.h"
#include "ws_client.h"

namespace skiff::e2e {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// The daemon's resident set must stay under this while it is flooded
// (idle it is a few tens of MiB; a 32 MiB frame limit and a bounded number
// of in-flight invocations per connection keep it far below this).
constexpr long kRssBoundKb = 256 * 1024;

const char* kConfig =
    "image_allowlist: [host]\n"
    "isolation: jail\n"
    "max_concurrent_exec_per_sandbox: 4\n"
    "default_idle_timeout_secs: 600\n";

long VmRssKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// Host pids whose command line contains `needle` (NUL-separated argv).
std::vector<pid_t> PidsWithCmdline(const std::string& needle) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream in(e.path() / "cmdline");
    std::string s((std::istreambuf_iterator<char>(in)), {});
    if (s.find(needle) != std::string::npos) out.push_back(std::stoi(name));
  }
  return out;
}

// Host pids of `sleep <arg>`.
std::vector<pid_t> SleepPids(const std::string& arg) {
  return PidsWithCmdline(std::string("sleep\0", 6) + arg + std::string("\0", 1));
}

class WsHostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    d_ = std::make_unique<Daemon>(kConfig);
    ASSERT_TRUE(d_->ready()) << d_->Log();
    ASSERT_EQ(other_.Open(*d_, "/"), 101);
    auto hello = other_.RecvJson();
    ASSERT_TRUE(hello && (*hello)["type"] == "workerregistered");
  }
  void TearDown() override {
    if (d_) {
      EXPECT_EQ(d_->Terminate(), 0) << d_->Log();
    }
  }

  // The bystander connection still gets a correct answer.
  void ExpectOtherServed(const std::string& when) {
    std::string id = "other-" + std::to_string(++other_seq_);
    other_.SendJson({{"type", "invokefunction"}, {"invocation_id", id}, {"function_id", "sandbox::list"}});
    auto r = other_.RecvJson(20000);
    ASSERT_TRUE(r) << "second connection got no answer " << when;
    EXPECT_EQ((*r)["invocation_id"], id) << when;
    EXPECT_TRUE((*r)["result"].contains("sandboxes")) << when << ": " << r->dump();
    EXPECT_LT(VmRssKb(d_->pid()), kRssBoundKb) << when;
  }

  // `ws` still answers a ping with a pong.
  static void ExpectAlive(WsClient& ws, const std::string& when) {
    ws.SendJson({{"type", "ping"}});
    auto r = ws.RecvJson(10000);
    ASSERT_TRUE(r) << "connection dead " << when;
    EXPECT_EQ((*r)["type"], "pong") << when;
  }

  json Http(const std::string& fn, const json& payload) {
    auto r = d_->Call(fn, payload);
    EXPECT_EQ(r.status, 200) << fn << ": " << r.body;
    return r.Json();
  }

  std::unique_ptr<Daemon> d_;
  WsClient other_;
  int other_seq_ = 0;
};

TEST_F(WsHostileTest, MalformedFramesAreLoggedAndDropped) {
  WsClient ws;
  ASSERT_EQ(ws.Open(*d_, "/"), 101);
  ASSERT_TRUE(ws.RecvJson());
  long rss0 = VmRssKb(d_->pid());
  ASSERT_GT(rss0, 0);

  ws.SendText("this is not json");
  ws.SendText("{\"type\":");
  ws.SendText("[1,2,3]");
  ws.SendText(std::string(100000, '['));  // deeper than the parser accepts
  ExpectAlive(ws, "after non-JSON text");
  ExpectOtherServed("after non-JSON text");

  ws.SendJson({{"type", "martian"}});
  ws.SendJson({{"type", 42}});
  ws.SendJson({{"no_type", true}});
  ExpectAlive(ws, "after unknown types");

  // invokefunction without function_id (nothing to run) and without
  // invocation_id (runs, no reply: the id is optional, null = fire and forget).
  ws.SendJson({{"type", "invokefunction"}, {"data", json::object()}});
  ws.SendJson({{"type", "invokefunction"}, {"function_id", 7}});
  ws.SendJson({{"type", "invokefunction"}, {"function_id", "sandbox::list"}});
  ExpectAlive(ws, "after invokefunction without ids");  // no invocationresult came first

  // Binary frames: JSON is served, telemetry discarded, garbage dropped.
  ws.Send(2, std::string("\x00\xff\xfe garbage", 11));
  ws.Send(2, "OTLP\x01\x02 spans");
  ws.Send(2, R"({"type":"invokefunction","invocation_id":"bin-1","function_id":"sandbox::list"})");
  auto bin = ws.RecvJson();
  ASSERT_TRUE(bin);
  EXPECT_EQ((*bin)["invocation_id"], "bin-1");
  EXPECT_TRUE((*bin)["result"].contains("sandboxes"));
  ExpectOtherServed("after binary frames");

  std::string log = d_->Log();
  EXPECT_THAT(log, HasSubstr("ws: ignoring a frame that is not a JSON object"));
  EXPECT_THAT(log, HasSubstr("ws: ignoring a frame of unknown type 'martian'"));
  EXPECT_THAT(log, HasSubstr("ws: invokefunction without a string function_id"));

  // A 100 MB frame: refused from its header with close code 1009, never
  // buffered (the daemon's RSS does not grow by anything near 100 MB).
  WsClient big;
  ASSERT_EQ(big.Open(*d_, "/"), 101);
  ASSERT_TRUE(big.RecvJson());
  std::thread sender([&] { big.Send(1, std::string(100u << 20, 'a')); });
  std::optional<WsClient::Msg> close;
  for (int i = 0; i < 20 && !close; ++i) {
    auto m = big.Recv(5000);
    if (!m) break;
    if (m->opcode == 8) close = m;
  }
  sender.join();
  ASSERT_TRUE(close) << "no close frame for a 100 MB frame";
  EXPECT_EQ(WsClient::CloseCode(*close), 1009);
  EXPECT_THAT(d_->Log(), HasSubstr("ws: frame over 32 MiB; closing with 1009"));
  EXPECT_LT(VmRssKb(d_->pid()), rss0 + 64 * 1024);
  ExpectAlive(ws, "after the 100 MB frame on another socket");
  ExpectOtherServed("after the 100 MB frame");
}

TEST_F(WsHostileTest, TenThousandConcurrentInvocationsOnOneSocket) {
  WsClient ws;
  ASSERT_EQ(ws.Open(*d_, "/"), 101);
  ASSERT_TRUE(ws.RecvJson());
  constexpr int kN = 10000;
  std::atomic<long> peak_kb{0};
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done) {
      long kb = VmRssKb(d_->pid());
      if (kb > peak_kb) peak_kb = kb;
      std::this_thread::sleep_for(20ms);
    }
  });
  // All 10 000 are sent before any reply is read (a separate thread reads).
  std::thread sender([&] {
    for (int i = 0; i < kN; ++i) {
      ws.SendJson({{"type", "invokefunction"},
                   {"invocation_id", "flood-" + std::to_string(i)},
                   {"function_id", i % 2 ? "sandbox::list" : "engine::functions::list"}});
    }
  });
  std::set<std::string> seen;
  int bad = 0;
  bool other_checked = false;
  auto t0 = std::chrono::steady_clock::now();
  while (static_cast<int>(seen.size()) < kN && std::chrono::steady_clock::now() - t0 < 180s) {
    auto m = ws.RecvJson(30000);
    if (!m) break;
    if (!m->contains("result")) ++bad;
    seen.insert((*m)["invocation_id"].get<std::string>());
    if (!other_checked && seen.size() > kN / 4) {
      other_checked = true;  // the bystander is served in the middle of the flood
      ExpectOtherServed("during the flood");
    }
  }
  sender.join();
  done = true;
  sampler.join();
  EXPECT_EQ(static_cast<int>(seen.size()), kN) << "answers missing";
  EXPECT_EQ(bad, 0);
  EXPECT_TRUE(other_checked);
  EXPECT_LT(peak_kb.load(), kRssBoundKb) << "peak VmRSS " << peak_kb << " kB";
  std::printf("flood: %d invocations in %.2f s, daemon peak VmRSS %ld kB\n", kN,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), peak_kb.load());
  ExpectAlive(ws, "after the flood");
  ExpectOtherServed("after the flood");
}

TEST_F(WsHostileTest, ClientVanishingMidExecOrphansNothing) {
  std::string kept = Http("sandbox::create", {{"image", "host"}})["sandbox_id"];
  std::string reaped = Http("sandbox::create", {{"image", "host"}, {"idle_timeout_secs", 2}})["sandbox_id"];
  // Unique arguments so the processes can be found on the host.
  const std::string kKept = "3.1415", kReaped = "3.1416";
  {
    WsClient ws;
    ASSERT_EQ(ws.Open(*d_, "/"), 101);
    ASSERT_TRUE(ws.RecvJson());
    ws.SendJson({{"type", "invokefunction"},
                 {"invocation_id", "e1"},
                 {"function_id", "sandbox::exec"},
                 {"data", {{"sandbox_id", kept}, {"argv", {"sleep", kKept}}}}});
    ws.SendJson({{"type", "invokefunction"},
                 {"invocation_id", "e2"},
                 {"function_id", "sandbox::exec"},
                 {"data", {{"sandbox_id", reaped}, {"argv", {"sleep", kReaped}}}}});
    bool running = false;
    for (int i = 0; i < 100 && !running; ++i) {
      running = !SleepPids(kKept).empty() && !SleepPids(kReaped).empty();
      if (!running) std::this_thread::sleep_for(50ms);
    }
    ASSERT_TRUE(running) << "the execs did not start\n" << d_->Log();
    // The client vanishes without a close frame.
  }
  auto vanished = std::chrono::steady_clock::now();
  ExpectOtherServed("right after the client vanished");
  // Both execs run to their end (~3.14 s), then their processes are gone.
  bool gone = false;
  while (!gone && std::chrono::steady_clock::now() - vanished < 15s) {
    gone = SleepPids(kKept).empty() && SleepPids(kReaped).empty();
    if (!gone) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(gone) << "exec processes outlived their exec";
  EXPECT_THAT(d_->Log(), HasSubstr("invocation(s) in flight; they run to the end, results dropped"));

  // Not orphaned: both sandboxes are listed as idle, with their exec slots back.
  auto list = Http("sandbox::list", json::object())["sandboxes"];
  std::map<std::string, json> by_id;
  for (auto& s : list) by_id[s["sandbox_id"]] = s;
  ASSERT_TRUE(by_id.count(kept)) << list.dump();
  EXPECT_EQ(by_id[kept]["exec_in_flight"], 0);
  EXPECT_EQ(by_id[kept]["exec_slots_free"], 4);
  // The short-idle one is reaped by the normal idle rule (2 s idle, 10 s
  // reaper period) ...
  bool reaped_gone = false;
  while (!reaped_gone && std::chrono::steady_clock::now() - vanished < 40s) {
    reaped_gone = true;
    json now = Http("sandbox::list", json::object());  // alive while iterated
    for (auto& s : now["sandboxes"]) {
      if (s["sandbox_id"] == reaped) reaped_gone = false;
    }
    if (!reaped_gone) std::this_thread::sleep_for(500ms);
  }
  EXPECT_TRUE(reaped_gone) << "the idle sandbox was not reaped";
  // ... and the other one is still there, usable and stoppable.
  auto ex = Http("sandbox::exec", {{"sandbox_id", kept}, {"argv", {"echo", "still-here"}}});
  EXPECT_EQ(ex["stdout"], "still-here\n");
  auto st = Http("sandbox::stop", {{"sandbox_id", kept}, {"wait", true}});
  EXPECT_FALSE(st.contains("code")) << st.dump();
  auto left = Http("sandbox::list", json::object())["sandboxes"];
  EXPECT_EQ(left.size(), 0u) << left.dump() << " kept=" << kept << " reaped=" << reaped;
  ExpectOtherServed("at the end");
}

}  // namespace
}  // namespace skiff::e2e
