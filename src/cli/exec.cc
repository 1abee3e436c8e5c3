// `skiff exec`: a command in a sandbox of the daemon; its output and exit
// status pass through.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/http_util.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/daemon_call.h"
#include "cli/daemon_discovery.h"
#include "cli/daemon_process.h"
#include "cli/report.h"
#include "cli/terminal.h"

namespace skiff::cli {
namespace {

using json = nlohmann::json;

struct ExecFlags {
  ClientFlags client;
  std::string sandbox_id, workdir;
  std::vector<std::string> command, env;
  std::optional<uint64_t> timeout_ms;
  bool detach = false;       // -d: start in the background, print the pid
  bool interactive = false;  // -i: stdin to the process
  bool tty = false;          // -t: a pseudo-terminal, the local terminal in raw mode
  std::string tag;
};

int PrintExecResult(const ClientFlags& flags, const json& r) {
  if (flags.json_out) {
    std::printf("%s\n", api::Dump(r).c_str());
  } else {
    WriteAll(1, r.value("stdout", std::string()));
    WriteAll(2, r.value("stderr", std::string()));
    if (r.value("stdout_truncated", false)) std::fprintf(stderr, "skiff: stdout was truncated at 1 MiB\n");
    if (r.value("stderr_truncated", false)) std::fprintf(stderr, "skiff: stderr was truncated at 1 MiB\n");
  }
  int code = r.value("exit_code", 0);
  return code < 0 ? kExitSkiffError : code;
}

// -d: sandbox::process::start; prints the process id (docker prints the
// container's), which ps, logs and kill take.
int StartDetached(const ExecFlags& f) {
  json p = {{"sandbox_id", f.sandbox_id}, {"argv", f.command}};
  if (f.timeout_ms) p["timeout_ms"] = *f.timeout_ms;
  if (!f.workdir.empty()) p["workdir"] = f.workdir;
  if (!f.env.empty()) p["env"] = f.env;
  if (!f.tag.empty()) p["tag"] = f.tag;
  int rc = 0;
  auto r = CallFunction(f.client, "sandbox::process::start", p, &rc);
  if (!r) return rc;
  if (f.client.json_out) {
    std::printf("%s\n", api::Dump(*r).c_str());
  } else {
    std::printf("%lld\n", static_cast<long long>(r->value("pid", int64_t{0})));
  }
  return 0;
}

// -i / -t: a live process attached to this terminal (terminal.h).
int ExecAttached(const ExecFlags& f) {
  json p = {{"sandbox_id", f.sandbox_id}, {"argv", f.command}, {"stdin", f.interactive}};
  if (f.timeout_ms) p["timeout_ms"] = *f.timeout_ms;
  if (!f.workdir.empty()) p["workdir"] = f.workdir;
  AddStartEnvAndTerminal(p, f.tty, f.env);
  int rc = 0;
  auto r = CallFunction(f.client, "sandbox::process::start", p, &rc);
  if (!r) return rc;
  auto ep = FindDaemon(f.client.url, false);
  if (!ep.ok()) return ReportError(ep.error());
  DaemonProcess proc(*ep, f.sandbox_id, r->value("pid", int64_t{0}));
  TerminalOptions opt;
  opt.raw = f.tty && ::isatty(0) != 0;
  opt.input = f.interactive;
  int code = RunTerminal(proc, opt);
  return code;
}

int Exec(const ExecFlags& f) {
  if (f.detach) return StartDetached(f);
  if (f.interactive || f.tty) return ExecAttached(f);
  json p = {{"sandbox_id", f.sandbox_id}, {"argv", f.command}};
  if (f.timeout_ms) p["timeout_ms"] = *f.timeout_ms;
  if (!f.workdir.empty()) p["workdir"] = f.workdir;
  if (!f.env.empty()) p["env"] = f.env;
  int rc = 0;
  auto r = CallFunction(f.client, "sandbox::exec", p, &rc);
  return r ? PrintExecResult(f.client, *r) : rc;
}

}  // namespace

void AddExecCommand(CLI::App& app, int& rc) {
  auto* exec = app.add_subcommand("exec", "run a command in a sandbox: skiff exec [-d|-it] ID -- CMD [ARGS]");
  auto f = std::make_shared<ExecFlags>();
  AddClientFlags(exec, f->client);
  exec->add_option("sandbox", f->sandbox_id)->required();
  exec->add_option("command", f->command)->required();
  exec->add_option("--timeout-ms", f->timeout_ms);
  exec->add_option("--workdir", f->workdir);
  exec->add_option("--env", f->env, "NAME=value (repeatable)")->allow_extra_args(false);
  exec->add_flag("-d,--detach", f->detach, "start it in the background and print its process id");
  exec->add_flag("-i,--interactive", f->interactive, "keep stdin open and send it to the process");
  exec->add_flag("-t,--tty", f->tty, "give the process a terminal (raw mode here; Ctrl-P Ctrl-Q detaches)");
  exec->add_option("--tag", f->tag, "with -d: a label shown by skiff ps");
  exec->callback([f, &rc] { rc = Exec(*f); });
}

}  // namespace skiff::cli
