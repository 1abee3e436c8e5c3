// `skiff run`: a command or code in a fresh sandbox, streamed to the
// terminal; Ctrl-C stops the sandbox. The sandbox is this process's own
// (embedded), or a running daemon's when one listens (run_daemon.h).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/http_util.h"
#include "base/thread.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/local_process.h"
#include "cli/report.h"
#include "cli/run_daemon.h"
#include "cli/run_flags.h"
#include "cli/terminal.h"
#include "sandbox/backends.h"
#include "sandbox/config.h"

namespace skiff::cli {
namespace {

bool ParseEnv(const std::vector<std::string>& in, Env* out) {
  for (const auto& kv : in) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "skiff: --env takes NAME=value, got '%s'\n", kv.c_str());
      return false;
    }
    out->emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return true;
}

class TerminalSink : public OutputSink {
 public:
  bool OnStdout(std::string_view b) override {
    WriteAll(1, b);
    return true;
  }
  bool OnStderr(std::string_view b) override {
    WriteAll(2, b);
    return true;
  }
};

int g_sig_pipe[2] = {-1, -1};
void OnSig(int sig) {
  // Async-signal-safe: only write(2).
  unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_sig_pipe[1], &b, 1);
}

// run -it: a throwaway sandbox with one live process attached to this
// terminal (terminal.h); the sandbox is stopped when the process ends or
// the session detaches.
int RunInteractive(SandboxManager& manager, const RunFlags& o, const CreateSpec& cs, const Env& env) {
  auto created = manager.Create(cs);
  if (!created.ok()) return ReportError(created.error());
  proto::ProcStartRequest req;
  req.argv = o.command.empty() ? DefaultInteractive(o.image) : o.command;
  for (const auto& [k, v] : env) req.env.push_back(k + "=" + v);
  if (o.tty) {
    req.pty = CurrentTermSize();
    if (const char* term = std::getenv("TERM"); term != nullptr && *term != '\0')
      req.env.push_back(std::string("TERM=") + term);
  }
  req.has_stdin = o.interactive || o.tty;
  if (o.timeout_ms) req.timeout_ms = static_cast<int64_t>(*o.timeout_ms);
  auto started = manager.Process(created->sandbox_id, req);
  if (!started.ok()) {
    (void)manager.Stop(created->sandbox_id, true);
    return ReportError(started.error());
  }
  LocalProcess proc(manager, created->sandbox_id, started->value("pid", int64_t{0}));
  TerminalOptions opt;
  opt.raw = o.tty && ::isatty(0) != 0;
  opt.input = o.interactive;
  int code = RunTerminal(proc, opt);
  (void)manager.Stop(created->sandbox_id, /*wait=*/true);
  return code;
}

int Run(RunFlags& o) {
  if (!o.file.empty()) {
    std::FILE* f = std::fopen(o.file.c_str(), "rb");
    if (!f) {
      std::fprintf(stderr, "skiff: cannot read %s: %s\n", o.file.c_str(), std::strerror(errno));
      return kExitSkiffError;
    }
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) o.code.append(buf, n);
    std::fclose(f);
    if (o.lang.empty()) {
      auto dot = o.file.rfind('.');
      std::string ext = dot == std::string::npos ? "" : o.file.substr(dot + 1);
      o.lang = ext == "py" ? "python" : ext == "js" ? "node" : ext == "sh" ? "shell" : ext;
    }
  }
  bool code_mode = !o.lang.empty() || !o.code.empty();
  if (code_mode && !o.command.empty()) {
    std::fprintf(stderr, "skiff: give either a command after -- or --lang/--code/--file\n");
    return kExitSkiffError;
  }
  if (!code_mode && o.command.empty() && !o.interactive && !o.tty) {
    std::fprintf(stderr, "skiff: nothing to run: give a command after --, or --lang with --code/--file\n");
    return kExitSkiffError;
  }
  if (code_mode && o.lang.empty()) {
    std::fprintf(stderr, "skiff: --code needs --lang (python, node, shell, bash, or a program)\n");
    return kExitSkiffError;
  }
  if (o.image.empty()) {
    o.image = (o.lang == "python" || o.lang == "py")                           ? "python"
              : (o.lang == "node" || o.lang == "js" || o.lang == "javascript") ? "node"
                                                                               : "base";
  }
  Env env;
  if (!ParseEnv(o.env, &env)) return kExitSkiffError;
  if ((o.interactive || o.tty) && code_mode) {
    std::fprintf(stderr, "skiff: -i/-t run a command or an interpreter, not --code/--file\n");
    return kExitSkiffError;
  }
  auto daemon = DaemonForRun(o);
  if (!daemon.ok()) return ReportError(daemon.error());
  if (*daemon) return RunThroughDaemon(**daemon, o);

  Config config;
  config.allow_all_images = true;  // embedded: the caller is the operator
  // A jail run builds (probes, cleans up after) only the jail backend, not
  // the microVM one it will not use.
  if (o.isolation == "jail") config.isolation = o.isolation;
  auto mgr = MakeSandboxManager(config);
  if (!mgr.ok()) return ReportError(mgr.error());
  SandboxManager& manager = **mgr;

  // Ctrl-C / SIGTERM: stop the sandbox (every sandbox of this process),
  // then exit 130.
  if (::pipe2(g_sig_pipe, O_CLOEXEC) == 0) {
    struct sigaction sa = {};
    sa.sa_handler = OnSig;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
    Result<std::thread> watcher = StartThread("signal watcher", [&manager]() {
      unsigned char sig;
      while (::read(g_sig_pipe[0], &sig, 1) < 0 && errno == EINTR) {
      }
      std::fprintf(stderr, "\nskiff: interrupted; stopping the sandbox\n");
      manager.Shutdown();
      ::_exit(kExitInterrupted);
    });
    if (!watcher.ok()) return ReportError(std::move(watcher).error().With("watching for Ctrl-C"));
    watcher->detach();
  }

  CreateSpec cs;
  cs.image = o.image;
  cs.env = env;
  cs.cpus = o.cpus;
  cs.memory_mb = o.memory_mb;
  cs.network = o.network;
  if (!o.isolation.empty()) cs.isolation = o.isolation;
  if (o.interactive || o.tty) {
    int code = RunInteractive(manager, o, cs, env);
    manager.Shutdown();
    return code;
  }
  TerminalSink sink;
  Result<ExecResult> r = Error(Code::kS300, "unreachable");
  if (code_mode) {
    RunSpec rs;
    rs.create = cs;
    rs.code = o.code;
    rs.lang = o.lang;
    rs.timeout_ms = o.timeout_ms;
    r = manager.Run(rs, o.json_out ? nullptr : &sink);
  } else {
    auto created = manager.Create(cs);
    if (!created.ok()) return ReportError(created.error());
    ExecSpec es;
    es.sandbox_id = created->sandbox_id;
    es.argv = o.command;
    es.env = env;
    es.timeout_ms = o.timeout_ms;
    r = manager.Exec(es, o.json_out ? nullptr : &sink);
    (void)manager.Stop(created->sandbox_id, /*wait=*/true);
  }
  if (!r.ok()) {
    Error e = r.error();
    // The output went to the terminal as it came: not again from the
    // error's details (a timeout carries what the command wrote).
    if (!o.json_out && e.details() && e.details()->is_object()) {
      nlohmann::json d = *e.details();
      d.erase("stdout");
      d.erase("stderr");
      e.set_details(std::move(d));
    }
    int rc = ReportError(e);
    manager.Shutdown();
    return rc;
  }
  if (o.json_out) std::printf("%s\n", api::Dump(r->ToJson()).c_str());
  manager.Shutdown();
  return r->exit_code;
}

}  // namespace

void AddRunCommand(CLI::App& app, int& rc) {
  auto* run = app.add_subcommand(
      "run", "run a command or code in a fresh sandbox (a running daemon's, else one of this process)");
  auto o = std::make_shared<RunFlags>();
  run->add_option("image", o->image, "catalog image (default from --lang: python, node, else base)");
  run->add_option("command", o->command, "the command and its arguments, after --");
  run->add_option("--lang", o->lang, "python | node | shell | bash | <program>: run --code/--file");
  run->add_option("--code", o->code, "source text to run with --lang");
  run->add_option("--file", o->file, "a script file to run (language from its extension)");
  run->add_option("--timeout-ms", o->timeout_ms, "exec timeout in ms (default 300000)");
  // One NAME=value per --env: a greedy vector option would also swallow
  // the "--" that starts the command.
  run->add_option("--env", o->env, "NAME=value (repeatable)")->allow_extra_args(false);
  run->add_option("--isolation", o->isolation, "microvm | jail (default: auto)");
  run->add_option("--cpus", o->cpus, "vCPUs / CPU quota");
  run->add_option("--memory-mb", o->memory_mb, "memory limit in MiB");
  run->add_flag("--network", o->network, "give the sandbox public network egress");
  run->add_flag("--json", o->json_out, "print the exec response as JSON instead of streaming");
  run->add_flag("-i,--interactive", o->interactive, "keep stdin open and send it to the process");
  run->add_flag("-t,--tty", o->tty,
                "give the process a terminal (raw mode here); without a command: the image's interpreter");
  run->add_flag("--embedded", o->embedded,
                "run in this process even when a daemon listens on the user socket");
  run->add_option("--url", o->url,
                  "run on this daemon (http://HOST:PORT or unix:PATH); default: SKIFF_URL, else the "
                  "user socket's daemon if one listens, else embedded");
  run->callback([o, &rc] { rc = Run(*o); });
}

}  // namespace skiff::cli
