// `skiff logs [-f] [--since N] ID PID`: a live process's output from its
// buffer (stdout to stdout, stderr to stderr), and with -f everything it
// writes until it exits; the exit status is the process's when -f saw it end.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "api/http_util.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/daemon_call.h"
#include "cli/daemon_discovery.h"
#include "cli/output_lines.h"
#include "cli/report.h"
#include "cli/std_sink.h"

namespace skiff::cli {
namespace {

using json = nlohmann::json;

struct LogsFlags {
  ClientFlags client;
  std::string sandbox_id;
  int64_t pid = 0;
  bool follow = false;
  int64_t since = 0;  // stdout and stderr offset to start from
};

int Logs(const LogsFlags& f) {
  auto ep = FindDaemon(f.client.url, true);
  if (!ep.ok()) return ReportError(ep.error());
  std::string path = "/v1/sandboxes/" + PercentEncode(f.sandbox_id) + "/processes/" + std::to_string(f.pid) +
                     "/output?stdout_from=" + std::to_string(f.since) +
                     "&stderr_from=" + std::to_string(f.since) + (f.follow ? "&follow=true" : "");
  StdSink sink;
  OutputLines lines(sink);
  bool malformed = false;
  Client c(*ep);
  auto r = c.Stream(path, [&](std::string_view bytes) {
    if (!lines.Feed(bytes)) malformed = true;
    return true;
  });
  if (!r.ok()) return ReportError(r.error());
  if (r->status != 200) {
    json body = json::parse(r->body, nullptr, false);
    if (f.client.json_out) std::printf("%s\n", r->body.c_str());
    if (body.is_object()) return f.client.json_out ? kExitSkiffError : ReportErrorObject(body);
    std::fprintf(stderr, "skiff: HTTP %ld\n", r->status);
    return kExitSkiffError;
  }
  if (lines.error()) return ReportErrorObject(*lines.error());
  if (malformed || !lines.end()) {
    std::fprintf(stderr, "skiff: the output stream broke off; resume with --since %lld\n",
                 static_cast<long long>(std::min(lines.next_stdout(), lines.next_stderr())));
    return kExitSkiffError;
  }
  if (!f.follow) return 0;
  const json& p = *lines.end();
  return p.value("state", "") == "exited" ? p.value("exit_code", 0) : 0;
}

}  // namespace

void AddLogsCommand(CLI::App& app, int& rc) {
  auto* logs = app.add_subcommand("logs", "a process's output: skiff logs [-f] [--since N] ID PID");
  auto f = std::make_shared<LogsFlags>();
  AddClientFlags(logs, f->client);
  logs->add_option("sandbox", f->sandbox_id)->required();
  logs->add_option("pid", f->pid)->required()->check(CLI::PositiveNumber);
  logs->add_flag("-f,--follow", f->follow, "keep streaming until the process exits");
  logs->add_option("--since", f->since, "byte offset to start from (stdout and stderr)")
      ->check(CLI::NonNegativeNumber);
  logs->callback([f, &rc] { rc = Logs(*f); });
}

}  // namespace skiff::cli
