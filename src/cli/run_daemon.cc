#include "cli/run_daemon.h"

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "api/http_util.h"
#include "cli/cli.h"
#include "cli/daemon_call.h"
#include "cli/daemon_discovery.h"
#include "cli/daemon_process.h"
#include "cli/output_lines.h"
#include "cli/report.h"
#include "cli/std_sink.h"
#include "cli/terminal.h"
#include "functions/decode.h"

namespace skiff::cli {

using json = nlohmann::json;

namespace {

class DaemonCalls {
 public:
  explicit DaemonCalls(const Endpoint& ep) : client_(ep) {}
  // Function `fn`'s result, or the daemon's error.
  Result<json> Call(const std::string& fn, const json& payload) {
    auto r = client_.Post("/v1/functions/" + fn, api::Dump(payload));
    if (!r.ok()) return std::move(r).error();
    if (r->status != 200) return DaemonError(r->status, r->body);
    json body = json::parse(r->body, nullptr, false);
    if (!body.is_object()) return DaemonError(r->status, r->body);
    return body;
  }

 private:
  Client client_;
};

// The sandbox's own timeout for the run's command: the process is killed at
// the command's deadline, and the sandbox outlives a quiet command (a
// process alone is not activity) but not a client that vanished for long.
constexpr uint64_t kIdleMarginSecs = 60;

// Ctrl-C or SIGTERM between the calls that set a run up: the run stops its
// sandbox and exits 130 at the next step (during the session itself,
// RunTerminal takes these signals).
volatile std::sig_atomic_t g_interrupted = 0;
void OnInterrupt(int) { g_interrupted = 1; }

// sandbox::create as the embedded run makes its sandbox.
json CreatePayload(const RunFlags& f, uint64_t timeout_ms) {
  json p = {{"image", f.image}, {"network", f.network}};
  if (!f.env.empty()) p["env"] = f.env;
  if (f.cpus) p["cpus"] = *f.cpus;
  if (f.memory_mb) p["memory_mb"] = *f.memory_mb;
  if (!f.isolation.empty()) p["isolation"] = f.isolation;
  p["idle_timeout_secs"] = (timeout_ms + 999) / 1000 + kIdleMarginSecs;
  return p;
}

}  // namespace

Result<std::optional<Endpoint>> DaemonForRun(const RunFlags& f) {
  if (f.embedded) return std::optional<Endpoint>();
  return FindRunningDaemon(f.url);
}

namespace {

// The sandbox::run request of a run that is not attached to a terminal:
// the sandbox as the embedded run makes it, then the code or the command.
json RunPayload(const RunFlags& f, uint64_t timeout_ms) {
  json p = CreatePayload(f, timeout_ms);
  if (!f.lang.empty()) {
    p["code"] = f.code;
    p["lang"] = f.lang;
  } else {
    p["argv"] = f.command;
  }
  p["timeout_ms"] = timeout_ms;
  return p;
}

// --json: sandbox::run's answer, printed whole as the embedded run prints it.
int RunForJson(DaemonCalls& d, const RunFlags& f, uint64_t timeout_ms) {
  Result<json> r = d.Call("sandbox::run", RunPayload(f, timeout_ms));
  if (!r.ok()) return ReportError(r.error());
  std::printf("%s\n", api::Dump(*r).c_str());
  return r->value("exit_code", 0);
}

// A run that is not attached: one POST /v1/run whose answer streams the
// output and ends with the result (docs/api.md#run-stream). The daemon
// stops the sandbox when the run ends, and when this client goes away
// (Ctrl-C closes the connection).
int RunStreamed(const Endpoint& ep, const RunFlags& f, uint64_t timeout_ms) {
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  StdSink sink;
  OutputLines lines(sink);
  bool malformed = false;
  Client client(ep);
  auto r = client.PostStream(
      "/v1/run", api::Dump(RunPayload(f, timeout_ms)),
      [&](std::string_view b) {
        if (!lines.Feed(b)) malformed = true;
        // The result (or the error) is the last line: no need to wait for
        // the end of the response.
        return !malformed && g_interrupted == 0 && !lines.end() && !lines.error();
      },
      [] { return g_interrupted == 0; });
  if (g_interrupted != 0) {
    std::fprintf(stderr, "\nskiff: interrupted; stopping the sandbox\n");
    return kExitInterrupted;
  }
  if (!r.ok()) return ReportError(r.error());
  if (r->status != 200) return ReportError(DaemonError(r->status, r->body));
  if (lines.error()) return ReportErrorObject(*lines.error());
  if (malformed || !lines.end())
    return ReportError(Error(Code::kS300, "skiff daemon: the run's output stream broke off"));
  return lines.end()->value("exit_code", 0);
}

}  // namespace

int RunThroughDaemon(const Endpoint& ep, const RunFlags& f) {
  const uint64_t timeout_ms = f.timeout_ms.value_or(fn::kDefaultExecTimeoutMs);
  DaemonCalls d(ep);
  if (!f.interactive && !f.tty)
    return f.json_out ? RunForJson(d, f, timeout_ms) : RunStreamed(ep, f, timeout_ms);

  // -i / -t (a command or the image's interpreter; never --code): a live
  // process attached to this terminal.
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  auto interrupted_now = [] {
    if (g_interrupted == 0) return false;
    std::fprintf(stderr, "\nskiff: interrupted; stopping the sandbox\n");
    return true;
  };

  json create = CreatePayload(f, timeout_ms);
  // A session at a terminal may sit quiet for long: the daemon's own idle
  // timeout applies, as for any sandbox a person drives.
  create.erase("idle_timeout_secs");
  Result<json> created = d.Call("sandbox::create", create);
  if (!created.ok()) return ReportError(created.error());
  const std::string id = created->value("sandbox_id", "");
  // The sandbox goes when the run does, however it ends here.
  auto stop = [&d, &id] { (void)d.Call("sandbox::stop", json{{"sandbox_id", id}, {"wait", false}}); };
  if (interrupted_now()) {
    stop();
    return kExitInterrupted;
  }

  // hold_output: every byte reaches this terminal, however fast the command writes.
  json start = {{"sandbox_id", id}, {"stdin", true}, {"hold_output", true}};
  start["argv"] = f.command.empty() ? json(DefaultInteractive(f.image)) : json(f.command);
  AddStartEnvAndTerminal(start, f.tty, f.env);
  if (f.timeout_ms) start["timeout_ms"] = timeout_ms;
  Result<json> started = d.Call("sandbox::process::start", start);
  if (!started.ok()) {
    stop();
    return ReportError(started.error());
  }
  if (interrupted_now()) {
    stop();
    return kExitInterrupted;
  }
  DaemonProcess proc(ep, id, started->value("pid", int64_t{0}));
  TerminalOptions opt;
  opt.raw = f.tty && ::isatty(0) != 0;
  opt.input = f.interactive;
  int code = RunTerminal(proc, opt);
  stop();
  return code;
}

}  // namespace skiff::cli
