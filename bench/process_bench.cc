// Live processes at the library level (the daemon's own path to an agent,
// without HTTP): output latency (a process's write to the caller's receipt),
// streamed throughput of 1 GiB against a local pipe in the same run, and the
// memory an idle background process costs the daemon and the agent. Prints
// one JSON object; bench/run turns it into rows.
//   skiff-process-bench [--isolation jail|microvm] [--image host]
#include <dirent.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "sandbox/backends.h"

namespace {

using Clock = std::chrono::steady_clock;

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

long RssKb(const std::string& status_path) {
  std::ifstream in(status_path);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

// RSS of every skiff-agent process on the host (the jail's agents).
long AgentsRssKb() {
  long total = 0;
  DIR* d = opendir("/proc");
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) {
    std::string pid = e->d_name;
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream comm("/proc/" + pid + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name == "skiff-agent") total += RssKb("/proc/" + pid + "/status");
  }
  closedir(d);
  return total;
}

// Collects a followed process's output.
struct Collect final : skiff::ProcessOutputSink {
  std::function<void(std::string_view)> on_data;
  uint64_t bytes = 0, lost = 0;
  bool OnStart(int64_t, int64_t) override { return true; }
  bool OnData(uint8_t, int64_t, std::string_view b) override {
    bytes += b.size();
    if (on_data) on_data(b);
    return true;
  }
  bool OnGap(uint8_t, int64_t from, int64_t to) override {
    lost += static_cast<uint64_t>(to - from);
    return true;
  }
};

int64_t StartProcess(skiff::SandboxManager& m, const std::string& id, std::vector<std::string> argv,
                     int64_t buffer = skiff::proto::kDefaultProcBuffer) {
  skiff::proto::ProcStartRequest req;
  req.argv = std::move(argv);
  req.buffer_bytes = buffer;
  auto r = m.Process(id, req);
  if (!r.ok()) {
    fprintf(stderr, "process start: %s\n", r.error().ToString().c_str());
    return -1;
  }
  return r->value("pid", int64_t{-1});
}

}  // namespace

int main(int argc, char** argv) {
  std::string image = "host", isolation = "jail";
  bool only_stream = false;  // --only-stream: the throughput row alone (for profiling it)
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "--only-stream") {
      only_stream = true;
      continue;
    }
    if (i + 1 >= argc) break;
    std::string v = argv[++i];
    if (k == "--image") image = v;
    if (k == "--isolation") isolation = v;
  }
  skiff::Config cfg;
  cfg.allow_all_images = true;
  cfg.isolation = isolation;
  auto mgr = skiff::MakeSandboxManager(cfg);
  if (!mgr.ok()) return fprintf(stderr, "%s\n", mgr.error().ToString().c_str()), 1;
  auto& m = **mgr;
  skiff::CreateSpec cs;
  cs.image = image;
  cs.memory_mb = 1024;
  auto sb = m.Create(cs);
  if (!sb.ok()) return fprintf(stderr, "%s\n", sb.error().ToString().c_str()), 1;
  const std::string& id = sb->sandbox_id;

  // 1. Output latency: the process prints CLOCK_REALTIME (ns) 200 times,
  // 20 ms apart; the receipt time minus the printed one is the latency.
  // The jail shares the host's clock; a microVM guest's is its own, so
  // there the figure is not taken.
  std::vector<double> lat_us;
  if (isolation == "jail" && !only_stream) {
    int64_t pid = StartProcess(
        m, id, {"sh", "-c", "i=0; while [ $i -lt 200 ]; do date +%s%N; sleep 0.02; i=$((i+1)); done"});
    if (pid < 0) return 1;
    Collect c;
    std::string partial;
    c.on_data = [&](std::string_view b) {
      timespec now{};
      clock_gettime(CLOCK_REALTIME, &now);
      double recv_ns = static_cast<double>(now.tv_sec) * 1e9 + static_cast<double>(now.tv_nsec);
      partial.append(b);
      size_t nl;
      while ((nl = partial.find('\n')) != std::string::npos) {
        double sent_ns = std::stod(partial.substr(0, nl));
        lat_us.push_back((recv_ns - sent_ns) / 1e3);
        partial.erase(0, nl + 1);
      }
    };
    auto r = m.ProcessOutput(id, skiff::proto::ProcOutputRequest{pid, 0, 0, true}, c);
    if (!r.ok()) return fprintf(stderr, "output: %s\n", r.error().ToString().c_str()), 1;
  }

  // 2. Throughput: 1 GiB from `head -c 1G /dev/zero`, followed from its
  // start (16 MiB rings), against the same command read through a local
  // pipe; 5 runs of each, interleaved, medians (one run swings with where
  // the scheduler puts four busy threads on few cores).
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  constexpr int kStreamRuns = 5;
  std::vector<double> stream_rates, pipe_rates;
  uint64_t streamed = 0, lost = 0, piped = 0;
  for (int run = 0; run < kStreamRuns; ++run) {
    int64_t pid = StartProcess(m, id, {"head", "-c", std::to_string(kGiB), "/dev/zero"}, int64_t{16} << 20);
    if (pid < 0) return 1;
    Collect big;
    auto t0 = Clock::now();
    auto r = m.ProcessOutput(id, skiff::proto::ProcOutputRequest{pid, 0, 0, true}, big);
    double stream_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!r.ok()) return fprintf(stderr, "output: %s\n", r.error().ToString().c_str()), 1;
    (void)m.Process(id, skiff::proto::ProcForgetRequest{pid});
    stream_rates.push_back(static_cast<double>(big.bytes) / (1 << 20) / stream_s);
    streamed += big.bytes;
    lost += big.lost;
    t0 = Clock::now();
    FILE* p = popen("head -c 1073741824 /dev/zero", "r");
    uint64_t got = 0;
    static char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) got += n;
    pclose(p);
    double pipe_s = std::chrono::duration<double>(Clock::now() - t0).count();
    pipe_rates.push_back(static_cast<double>(got) / (1 << 20) / pipe_s);
    piped += got;
  }

  // 3. Memory of 100 idle background processes (sleep), in this process
  // (the daemon's role) and in the jail's agent.
  long self_before = RssKb("/proc/self/status"), agent_before = AgentsRssKb();
  for (int i = 0; i < (only_stream ? 0 : 100); ++i)
    if (StartProcess(m, id, {"sleep", "1000"}) < 0) return 1;
  auto listed = m.Process(id, skiff::proto::ProcListRequest{});
  long self_after = RssKb("/proc/self/status"), agent_after = AgentsRssKb();
  (void)m.Stop(id, true);
  m.Shutdown();

  printf(
      "{\"isolation\":\"%s\",\"output_latency_us_p50\":%.0f,\"output_latency_us_p99\":%.0f,"
      "\"latency_samples\":%zu,\"stream_mib_s\":%.0f,\"stream_bytes\":%llu,\"stream_lost_bytes\":%llu,"
      "\"stream_runs\":%d,\"pipe_mib_s\":%.0f,\"pipe_bytes\":%llu,\"idle_processes\":%zu,"
      "\"daemon_kib_per_idle_process\":%.1f,\"agent_kib_per_idle_process\":%.1f}\n",
      isolation.c_str(), Pct(lat_us, 0.5), Pct(lat_us, 0.99), lat_us.size(), Pct(stream_rates, 0.5),
      static_cast<unsigned long long>(streamed), static_cast<unsigned long long>(lost), kStreamRuns,
      Pct(pipe_rates, 0.5), static_cast<unsigned long long>(piped),
      listed.ok() ? (*listed)["processes"].size() : size_t{0}, (self_after - self_before) / 100.0,
      isolation == "jail" ? (agent_after - agent_before) / 100.0 : 0.0);
  return 0;
}
