// `skiff exec`: a command in a sandbox of the daemon; its output and exit
// status pass through.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/http_util.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/daemon_call.h"
#include "cli/report.h"

namespace skiff::cli {
namespace {

using json = nlohmann::json;

struct ExecFlags {
  ClientFlags client;
  std::string sandbox_id, workdir;
  std::vector<std::string> command, env;
  std::optional<uint64_t> timeout_ms;
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

int Exec(const ExecFlags& f) {
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
  auto* exec = app.add_subcommand("exec", "run a command in a sandbox: skiff exec ID -- CMD [ARGS]");
  auto f = std::make_shared<ExecFlags>();
  AddClientFlags(exec, f->client);
  exec->add_option("sandbox", f->sandbox_id)->required();
  exec->add_option("command", f->command)->required();
  exec->add_option("--timeout-ms", f->timeout_ms);
  exec->add_option("--workdir", f->workdir);
  exec->add_option("--env", f->env, "NAME=value (repeatable)")->allow_extra_args(false);
  exec->callback([f, &rc] { rc = Exec(*f); });
}

}  // namespace skiff::cli
