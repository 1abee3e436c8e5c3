#include "cli/run_daemon.h"

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "api/http_util.h"
#include "base/text.h"
#include "cli/cli.h"
#include "cli/daemon_call.h"
#include "cli/daemon_discovery.h"
#include "cli/daemon_process.h"
#include "cli/report.h"
#include "cli/terminal.h"
#include "functions/decode.h"
#include "sandbox/run_step.h"

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

// --json: the functions whose answer the embedded run prints, whole.
int RunForJson(DaemonCalls& d, const RunFlags& f, uint64_t timeout_ms) {
  json create = CreatePayload(f, timeout_ms);
  Result<json> r = Error(Code::kS300, "unreachable");
  if (!f.lang.empty()) {
    json p = create;
    p.erase("idle_timeout_secs");
    p["code"] = f.code;
    p["lang"] = f.lang;
    p["timeout_ms"] = timeout_ms;
    r = d.Call("sandbox::run", p);
  } else {
    Result<json> created = d.Call("sandbox::create", create);
    if (!created.ok()) return ReportError(created.error());
    std::string id = created->value("sandbox_id", "");
    json exec = {{"sandbox_id", id}, {"argv", f.command}, {"timeout_ms", timeout_ms}};
    if (!f.env.empty()) exec["env"] = f.env;
    r = d.Call("sandbox::exec", exec);
    (void)d.Call("sandbox::stop", json{{"sandbox_id", id}, {"wait", false}});
  }
  if (!r.ok()) return ReportError(r.error());
  std::printf("%s\n", api::Dump(*r).c_str());
  return r->value("exit_code", 0);
}

}  // namespace

int RunThroughDaemon(const Endpoint& ep, const RunFlags& f) {
  DaemonCalls d(ep);
  const bool code_mode = !f.lang.empty();
  const bool attached = f.interactive || f.tty;
  const uint64_t timeout_ms = f.timeout_ms.value_or(fn::kDefaultExecTimeoutMs);
  if (f.json_out && !attached) return RunForJson(d, f, timeout_ms);
  // A failing step of a code run is reported as the embedded sandbox::run
  // reports it.
  auto fail = [&](const Error& e, std::string_view step, const std::string& id) {
    return ReportError(code_mode ? WrapRunStep(e, step, id) : e);
  };

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
  if (attached) create.erase("idle_timeout_secs");
  Result<json> created = d.Call("sandbox::create", create);
  if (!created.ok()) return fail(created.error(), kRunStepCreate, "");
  const std::string id = created->value("sandbox_id", "");
  // The sandbox goes when the run does, however it ends here.
  auto stop = [&d, &id] { (void)d.Call("sandbox::stop", json{{"sandbox_id", id}, {"wait", false}}); };
  if (interrupted_now()) {
    stop();
    return kExitInterrupted;
  }

  // hold_output: every byte reaches this terminal, however fast the command writes.
  json start = {{"sandbox_id", id}, {"stdin", attached}, {"hold_output", true}};
  if (code_mode) {
    RunLang lang = LangFor(f.lang);
    Result<json> w = d.Call("sandbox::fs::write", json{{"sandbox_id", id},
                                                       {"path", lang.file},
                                                       {"content_b64", Base64Encode(f.code)},
                                                       {"mode", "0644"},
                                                       {"parents", true}});
    if (!w.ok()) {
      stop();
      return fail(w.error(), kRunStepCode, id);
    }
    if (lang.bash && !d.Call("sandbox::fs::stat", json{{"sandbox_id", id}, {"path", "/bin/bash"}}).ok())
      lang.program = "/bin/sh";
    start["argv"] = json::array({lang.program, lang.file});
  } else {
    start["argv"] = attached && f.command.empty() ? json(DefaultInteractive(f.image)) : json(f.command);
  }
  AddStartEnvAndTerminal(start, f.tty, f.env);
  if (!attached || f.timeout_ms) start["timeout_ms"] = timeout_ms;
  Result<json> started = d.Call("sandbox::process::start", start);
  if (!started.ok()) {
    stop();
    return fail(started.error(), kRunStepExec, id);
  }

  if (interrupted_now()) {
    stop();
    return kExitInterrupted;
  }
  DaemonProcess proc(ep, id, started->value("pid", int64_t{0}));
  TerminalOptions opt;
  opt.raw = f.tty && ::isatty(0) != 0;
  opt.input = f.interactive;
  // As sandbox::exec: a command killed at its deadline is the error S200.
  if (!attached) opt.timeout_error_ms = timeout_ms;
  bool interrupted = false;
  opt.interrupted = &interrupted;
  int code = RunTerminal(proc, opt);
  if (interrupted && !attached) std::fprintf(stderr, "\nskiff: interrupted; stopping the sandbox\n");
  stop();
  return interrupted && !attached ? kExitInterrupted : code;
}

}  // namespace skiff::cli
