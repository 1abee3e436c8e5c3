// A hostile local caller of the HTTP API (docs/security.md, "The API under a hostile local caller"):
// a flood of idle connections beyond the daemon's descriptors, a flood beyond max_connections, and
// fs::grep answers the caller never reads. The daemon does not spin (its CPU time stays low), its log
// does not grow without bound, it refuses what it cannot hold with 503 S400 at once and serves again
// when the flood goes; a grep's memory cost is bounded whether or not the caller reads.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon_harness.h"

namespace skiff::e2e {
namespace {

using namespace std::chrono_literals;

const char* kConfig =
    "image_allowlist: [host]\n"
    "isolation: jail\n"
    "default_idle_timeout_secs: 600\n";

// "VmRSS:" / "VmHWM:" of /proc/<pid>/status, in KiB.
long StatusKb(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(key.size()));
  }
  return -1;
}

// utime + stime of /proc/<pid>/stat (every thread), in clock ticks.
long CpuTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), {});
  auto close = s.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(s.substr(close + 2));
  std::string field;
  long utime = 0, stime = 0;
  // Fields after the command: state is field 3, utime 14, stime 15.
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return utime + stime;
}

// What arrives on `fd` within `timeout` (until the peer closes).
std::string Receive(int fd, std::chrono::milliseconds timeout) { return ReadAll(fd, timeout); }

// A 503 whose body is the S400 error object.
void ExpectBusy(const std::string& raw, const std::string& what) {
  ASSERT_EQ(raw.rfind("HTTP/1.1 503", 0), 0u) << what << ": " << raw.substr(0, 200);
  auto body = json::parse(raw.substr(raw.find("\r\n\r\n") + 4), nullptr, false);
  ASSERT_TRUE(body.is_object()) << what << ": " << raw;
  EXPECT_EQ(body["code"], "S400") << what;
  EXPECT_EQ(ValidateErrorObject(body), "") << what << ": " << body.dump();
}

// Closes every fd of `fds`.
void CloseAll(std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
  fds.clear();
}

bool WaitHealthy(Daemon& d, std::chrono::seconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (d.Get("/healthz").status == 200) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

class ApiHostileTest : public ::testing::Test {
 protected:
  void SetUp() override { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

// The daemon runs out of descriptors (RLIMIT_NOFILE 256) under 600 idle
// connections. Accept errors back off instead of spinning, the connections
// it cannot take are answered 503 S400 and closed, the log stays small, and
// once the flood goes /healthz answers.
TEST_F(ApiHostileTest, DescriptorExhaustionNeitherSpinsNorFloodsTheLog) {
  constexpr rlim_t kNofile = 256;
  constexpr int kFlood = 600;
  Daemon d(kConfig, {}, [] {
    rlimit r{kNofile, kNofile};
    ::setrlimit(RLIMIT_NOFILE, &r);
  });
  ASSERT_TRUE(d.ready()) << d.Log();
  std::vector<int> fds;
  for (int i = 0; i < kFlood; ++i) {
    int fd = d.Connect();
    ASSERT_GE(fd, 0) << "connect " << i;
    fds.push_back(fd);
  }
  size_t log0 = d.Log().size();
  long cpu0 = CpuTicks(d.pid());
  // Connections past the descriptor limit are told at once, not left to wait.
  ExpectBusy(Receive(fds.back(), 3s), "the last connection of the flood");
  std::this_thread::sleep_for(6s);  // less than the 10 s header deadline: the flood is still held
  long cpu = CpuTicks(d.pid()) - cpu0;
  size_t log_growth = d.Log().size() - log0;
  long hz = ::sysconf(_SC_CLK_TCK);
  // Spinning on accept() costs a core (seconds of CPU here) and writes a
  // line per failed accept.
  EXPECT_LT(cpu, hz / 2) << "CPU ticks during the flood (" << hz << "/s)";
  EXPECT_LT(log_growth, 16u * 1024) << "log growth during the flood";
  CloseAll(fds);
  EXPECT_TRUE(WaitHealthy(d, 10s)) << "no /healthz after the flood";
  EXPECT_EQ(d.Terminate(), 0);
}

// With max_connections: 50, 45 idle connections leave room to serve; beyond
// 50 a connection gets 503 S400 at once; when they go it serves again. An
// idle connection is closed after the 10 s header deadline.
TEST_F(ApiHostileTest, ConnectionCapRefusesBeyondItAndServesBelowIt) {
  Daemon d(std::string(kConfig) + "max_connections: 50\n");
  ASSERT_TRUE(d.ready()) << d.Log();
  std::vector<int> fds;
  for (int i = 0; i < 45; ++i) {
    int fd = d.Connect();
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(d.Get("/healthz").status, 200) << "under the cap";
  for (int i = 0; i < 10; ++i) {
    int fd = d.Connect();
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  ExpectBusy(Receive(fds.back(), 3s), "connection 55 of 50");
  auto h = d.Get("/healthz");
  EXPECT_EQ(h.status, 503) << "at the cap: " << h.body;
  EXPECT_EQ(h.Json()["code"], "S400") << h.body;
  CloseAll(fds);
  EXPECT_TRUE(WaitHealthy(d, 5s)) << "no /healthz after the connections went";
  // An idle connection does not stay.
  int idle = d.Connect();
  ASSERT_GE(idle, 0);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Receive(idle, 15s), "");
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GT(waited, 8s);
  EXPECT_LT(waited, 14s) << "idle connection kept past the header deadline";
  ::close(idle);
  auto m = d.Get("/metrics");
  EXPECT_NE(m.body.find("skiff_api_connections_refused_total "), std::string::npos);
  EXPECT_EQ(d.Terminate(), 0);
}

// One POST of fs::grep (`max_matches: 0`, every line of a 61 MB file) on a
// raw socket whose answer is never read.
int GrepUnread(Daemon& d, const std::string& sid, const std::string& path) {
  std::string body = json{{"sandbox_id", sid}, {"path", path}, {"pattern", "."}, {"max_matches", 0}}.dump();
  int fd = d.Connect();
  if (fd < 0) return -1;
  int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  std::string req =
      "POST /v1/functions/sandbox::fs::grep HTTP/1.1\r\nHost: x\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// "<name>{...} <value>" summed over the series of `metrics` whose line has `needle`.
long MetricSum(const std::string& metrics, const std::string& name, const std::string& needle) {
  long sum = 0;
  std::istringstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) != 0 || line.find(needle) == std::string::npos) continue;
    sum += std::stol(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

// Three 127-byte greps on a 61 MB file whose answers are never read: the
// daemon's memory stays bounded while they are held, falls back after, and
// the non-reading connections are closed after the 30 s write stall. A grep
// that is read gets at most 100000 matches with truncated: true; an answer
// over the limit (long lines, max_line_bytes 0) is S400.
TEST_F(ApiHostileTest, GrepAnswersNobodyReadsCostBoundedMemory) {
  Daemon d(kConfig);
  ASSERT_TRUE(d.ready()) << d.Log();
  // Memory enough for the agent to build its answer (a bounded 64 MiB at most).
  auto c = d.Call("sandbox::create", {{"image", "host"}, {"memory_mb", 2048}});
  ASSERT_EQ(c.status, 200) << c.body;
  std::string sid = c.Json()["sandbox_id"];
  auto mk = d.Call("sandbox::exec",
                   {{"sandbox_id", sid},
                    {"argv",
                     {"sh", "-c",
                      "seq 1 8000000 > /tmp/big.txt && head -c 80000000 /dev/zero | tr '\\0' a | "
                      "fold -w 200000 > /tmp/long.txt && stat -c %s /tmp/big.txt /tmp/long.txt"}}});
  ASSERT_EQ(mk.status, 200) << mk.body;
  ASSERT_EQ(mk.Json()["exit_code"], 0) << mk.body;
  std::printf("file sizes: %s", mk.Json()["stdout"].get<std::string>().c_str());

  long rss0 = StatusKb(d.pid(), "VmRSS:");
  std::vector<int> fds;
  for (int i = 0; i < 3; ++i) {
    int fd = GrepUnread(d, sid, "/tmp/big.txt");
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  // Wait for the three calls to finish (their answers are then queued).
  auto end = std::chrono::steady_clock::now() + 120s;
  long done = 0;
  std::string metrics;
  while (std::chrono::steady_clock::now() < end && done < 3) {
    std::this_thread::sleep_for(500ms);
    metrics = d.Get("/metrics").body;
    done = MetricSum(metrics, "skiff_function_calls_total", "sandbox::fs::grep");
  }
  ASSERT_EQ(done, 3) << d.Log();
  EXPECT_EQ(MetricSum(metrics, "skiff_function_calls_total", "sandbox::fs::grep\",result=\"ok\""), 3)
      << metrics;
  std::this_thread::sleep_for(1s);
  long held = StatusKb(d.pid(), "VmRSS:");
  long hwm = StatusKb(d.pid(), "VmHWM:");
  std::printf("VmRSS before %ld KiB, holding 3 unread answers %ld KiB, high-water %ld KiB\n", rss0, held,
              hwm);
  // Before the bound, each such call cost ~420 MiB and 1.17 GiB stayed.
  EXPECT_LT(held - rss0, 96 * 1024) << "RSS growth while the answers are held";
  EXPECT_LT(hwm - rss0, 320 * 1024) << "peak RSS growth";

  // The caller that does read gets a truncated answer of at most 100000 matches.
  auto g = d.Call("sandbox::fs::grep",
                  {{"sandbox_id", sid}, {"path", "/tmp/big.txt"}, {"pattern", "."}, {"max_matches", 0}});
  ASSERT_EQ(g.status, 200) << g.body.substr(0, 300);
  EXPECT_EQ(g.Json()["matches"].size(), 100000u);
  EXPECT_EQ(g.Json()["truncated"], true);
  g = {};
  // An answer too large to send: S400.
  auto big = d.Call("sandbox::fs::grep", {{"sandbox_id", sid},
                                          {"path", "/tmp/long.txt"},
                                          {"pattern", "a"},
                                          {"max_matches", 0},
                                          {"max_line_bytes", 0}});
  EXPECT_EQ(big.status, 429) << big.body.substr(0, 300);
  EXPECT_EQ(big.Json()["code"], "S400") << big.body.substr(0, 300);

  // The unread answers are dropped after the write stall: only this
  // scrape's connection is left.
  end = std::chrono::steady_clock::now() + 60s;
  long open = -1;
  while (std::chrono::steady_clock::now() < end) {
    open = MetricSum(d.Get("/metrics").body, "skiff_api_connections ", "");
    if (open == 1) break;
    std::this_thread::sleep_for(1s);
  }
  EXPECT_EQ(open, 1) << "non-reading connections still open";
  long after = StatusKb(d.pid(), "VmRSS:");
  std::printf("VmRSS after the stalled answers were dropped: %ld KiB\n", after);
  EXPECT_LT(after - rss0, 64 * 1024) << "RSS growth that stayed";
  CloseAll(fds);
  EXPECT_EQ(d.Terminate(), 0);
}

}  // namespace
}  // namespace skiff::e2e
