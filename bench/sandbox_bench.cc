// Library-level benchmarks of the sandbox lifecycle, printed as JSON:
//   exec round trip on a live sandbox vs a bare fork/exec on the host,
//   sandboxes created+stopped per second (sequential).
// Usage: skiff-sandbox-bench [--image host] [--isolation jail] [--execs N] [--creates N]
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sandbox/manager.h"

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

}  // namespace

int main(int argc, char** argv) {
  std::string image = "host", isolation = "jail";
  int execs = 300, creates = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--image") image = v;
    else if (k == "--isolation") isolation = v;
    else if (k == "--execs") execs = std::stoi(v);
    else if (k == "--creates") creates = std::stoi(v);
  }
  skiff::Config cfg;
  cfg.allow_all_images = true;
  cfg.isolation = isolation;
  cfg.max_concurrent_sandboxes = 1024;
  auto mgr = skiff::SandboxManager::FromConfig(cfg);
  if (!mgr.ok()) {
    fprintf(stderr, "%s\n", mgr.error().ToString().c_str());
    return 1;
  }
  auto& m = **mgr;
  skiff::CreateSpec cs;
  cs.image = image;
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
  printf("{\"isolation\":\"%s\",\"image\":\"%s\",\"exec_rtt_us_p50\":%.1f,\"exec_rtt_us_p99\":%.1f,"
         "\"bare_fork_exec_us_p50\":%.1f,\"create_stop_ms_p50\":%.2f,\"create_stop_ms_p99\":%.2f,"
         "\"sandboxes_per_sec\":%.1f}\n",
         isolation.c_str(), image.c_str(), Median(rtt), Pct(rtt, 0.99), Median(bare), Median(cycle),
         Pct(cycle, 0.99), creates / secs);
  return 0;
}
