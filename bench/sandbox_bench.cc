// Library-level benchmarks of the sandbox lifecycle, printed as JSON:
//   exec round trip on a live sandbox vs a bare fork/exec on the host,
//   sandboxes created+stopped per second (sequential).
// Usage: skiff-sandbox-bench [--image host] [--isolation jail] [--execs N] [--creates N]
#include <dirent.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sandbox/backends.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double Pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

double ForkExecTrueUs() {
  auto t0 = Clock::now();
  pid_t pid;
  char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
  if (posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, environ) != 0) return -1;
  int st;
  waitpid(pid, &st, 0);
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

double TvSec(const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; }

// CPU seconds (user + system) spent so far by this process and by the
// agents it runs (its skiff-agent children, read from /proc). On a busy
// machine wall-clock throughput is noisy; CPU per byte is not.
double CpuSec() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  double sec = TvSec(ru.ru_utime) + TvSec(ru.ru_stime);
  static const double kTick = static_cast<double>(sysconf(_SC_CLK_TCK));
  DIR* d = opendir("/proc");
  if (!d) return sec;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream f(std::string("/proc/") + e->d_name + "/stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    auto open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    if (line.substr(open + 1, close - open - 1) != "skiff-agent") continue;
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    std::vector<std::string> v;
    while (rest >> field) v.push_back(field);
    // v[0] is field 3 (state): ppid is v[1], utime v[11], stime v[12].
    if (v.size() < 13 || std::stoi(v[1]) != getpid()) continue;
    sec += (std::stod(v[11]) + std::stod(v[12])) / kTick;
  }
  closedir(d);
  return sec;
}

double ChildrenCpuSec() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  return TvSec(ru.ru_utime) + TvSec(ru.ru_stime);
}

}  // namespace

int main(int argc, char** argv) {
  std::string image = "host", isolation = "jail";
  int execs = 300, creates = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--image")
      image = v;
    else if (k == "--isolation")
      isolation = v;
    else if (k == "--execs")
      execs = std::stoi(v);
    else if (k == "--creates")
      creates = std::stoi(v);
  }
  skiff::Config cfg;
  cfg.allow_all_images = true;
  cfg.isolation = isolation;
  cfg.max_concurrent_sandboxes = 1024;
  auto mgr = skiff::MakeSandboxManager(cfg);
  if (!mgr.ok()) {
    fprintf(stderr, "%s\n", mgr.error().ToString().c_str());
    return 1;
  }
  auto& m = **mgr;
  skiff::CreateSpec cs;
  cs.image = image;
  cs.memory_mb = 2048;  // room for the 256 MiB file on the sandbox tmpfs
  auto sb = m.Create(cs);
  if (!sb.ok()) {
    fprintf(stderr, "%s\n", sb.error().ToString().c_str());
    return 1;
  }
  skiff::ExecSpec es;
  es.sandbox_id = sb->sandbox_id;
  es.argv = {"/bin/true"};
  std::vector<double> rtt, bare;
  for (int i = 0; i < execs; ++i) {
    // Interleaved: A (sandbox exec) then B (bare fork/exec).
    auto t0 = Clock::now();
    auto r = m.Exec(es);
    double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (!r.ok() || r->exit_code != 0) {
      fprintf(stderr, "exec failed: %s\n", r.ok() ? "non-zero exit" : r.error().ToString().c_str());
      return 1;
    }
    rtt.push_back(us);
    bare.push_back(ForkExecTrueUs());
  }
  // fs throughput: 1000 x 1 KiB files and one 256 MiB file, written and
  // read back through the agent, against cp of the same data on the host.
  auto once = [](std::shared_ptr<std::string> body) {
    auto done = std::make_shared<bool>(false);
    return skiff::ByteSource([done, body]() -> skiff::Result<std::string> {
      if (*done) return std::string();
      *done = true;
      return *body;
    });
  };
  auto chunked = [](uint64_t total) {
    auto left = std::make_shared<uint64_t>(total);
    auto chunk = std::make_shared<std::string>(1 << 20, 'z');
    return skiff::ByteSource([left, chunk]() -> skiff::Result<std::string> {
      uint64_t n = std::min<uint64_t>(*left, chunk->size());
      *left -= n;
      return chunk->substr(0, n);
    });
  };
  auto small = std::make_shared<std::string>(1024, 'k');
  auto t_sw = Clock::now();
  for (int i = 0; i < 1000; ++i)
    if (auto w = m.FsWrite(sb->sandbox_id, "/tmp/s/" + std::to_string(i), 0644, true, once(small), {});
        !w.ok())
      return fprintf(stderr, "fs::write: %s\n", w.error().ToString().c_str()), 1;
  double small_write_s = std::chrono::duration<double>(Clock::now() - t_sw).count();
  auto t_sr = Clock::now();
  for (int i = 0; i < 1000; ++i)
    if (!m.FsRead(sb->sandbox_id, "/tmp/s/" + std::to_string(i), nullptr, [](std::string_view) {
            return true;
          }).ok())
      return 1;
  double small_read_s = std::chrono::duration<double>(Clock::now() - t_sr).count();
  constexpr uint64_t kBig = 256ull << 20;
  double cpu_bw = CpuSec();
  auto t_bw = Clock::now();
  if (auto w = m.FsWrite(sb->sandbox_id, "/tmp/big", 0644, false, chunked(kBig), {}); !w.ok())
    return fprintf(stderr, "fs::write big: %s\n", w.error().ToString().c_str()), 1;
  double big_write_s = std::chrono::duration<double>(Clock::now() - t_bw).count();
  cpu_bw = CpuSec() - cpu_bw;
  uint64_t got = 0;
  double cpu_br = CpuSec();
  auto t_br = Clock::now();
  if (!m.FsRead(sb->sandbox_id, "/tmp/big", nullptr,
                [&](std::string_view b) {
                  got += b.size();
                  return true;
                })
           .ok() ||
      got != kBig)
    return 1;
  double big_read_s = std::chrono::duration<double>(Clock::now() - t_br).count();
  cpu_br = CpuSec() - cpu_br;
  // Host cp of the same sizes, tmpfs to tmpfs (/dev/shm), as the reference.
  auto t_cp = Clock::now();
  int rc = system(
      "head -c 268435456 /dev/zero > /dev/shm/skiff-bench-src && "
      "cp /dev/shm/skiff-bench-src /dev/shm/skiff-bench-dst");
  double cp_big_s = std::chrono::duration<double>(Clock::now() - t_cp).count();
  t_cp = Clock::now();
  double cpu_cp = ChildrenCpuSec();
  rc |= system("cp /dev/shm/skiff-bench-src /dev/shm/skiff-bench-dst2");
  cpu_cp = ChildrenCpuSec() - cpu_cp;
  cp_big_s = std::min(cp_big_s, std::chrono::duration<double>(Clock::now() - t_cp).count());
  (void)!system("rm -f /dev/shm/skiff-bench-src /dev/shm/skiff-bench-dst /dev/shm/skiff-bench-dst2");
  (void)rc;
  (void)m.Stop(sb->sandbox_id, true);

  std::vector<double> cycle;
  auto c0 = Clock::now();
  for (int i = 0; i < creates; ++i) {
    auto t0 = Clock::now();
    auto c = m.Create(cs);
    if (!c.ok()) {
      fprintf(stderr, "create failed: %s\n", c.error().ToString().c_str());
      return 1;
    }
    (void)m.Stop(c->sandbox_id, true);
    cycle.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  double secs = std::chrono::duration<double>(Clock::now() - c0).count();
  printf(
      "{\"isolation\":\"%s\",\"image\":\"%s\",\"exec_rtt_us_p50\":%.1f,\"exec_rtt_us_p99\":%.1f,"
      "\"bare_fork_exec_us_p50\":%.1f,\"create_stop_ms_p50\":%.2f,\"create_stop_ms_p99\":%.2f,"
      "\"sandboxes_per_sec\":%.1f,\"fs_small_write_files_per_sec\":%.0f,"
      "\"fs_small_read_files_per_sec\":%.0f,\"fs_big_write_mib_s\":%.0f,\"fs_big_read_mib_s\":%.0f,"
      "\"host_cp_big_mib_s\":%.0f,\"fs_big_write_cpu_ms\":%.0f,\"fs_big_read_cpu_ms\":%.0f,"
      "\"host_cp_big_cpu_ms\":%.0f}\n",
      isolation.c_str(), image.c_str(), Median(rtt), Pct(rtt, 0.99), Median(bare), Median(cycle),
      Pct(cycle, 0.99), creates / secs, 1000 / small_write_s, 1000 / small_read_s, 256 / big_write_s,
      256 / big_read_s, 256 / cp_big_s, cpu_bw * 1e3, cpu_br * 1e3, cpu_cp * 1e3);
  return 0;
}
