// `skiff attach ID PID`: the terminal attached to a live process — its
// output replayed from what its buffer holds (or --from N), then followed;
// keystrokes to it; Ctrl-P Ctrl-Q detaches. Exits with the process's status
// when it ends.
#include <unistd.h>

#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/daemon_call.h"
#include "cli/daemon_discovery.h"
#include "cli/daemon_process.h"
#include "cli/report.h"
#include "cli/terminal.h"

namespace skiff::cli {
namespace {

struct AttachFlags {
  ClientFlags client;
  std::string sandbox_id;
  int64_t pid = 0;
  int64_t from = 0;
  bool no_stdin = false;
};

int Attach(const AttachFlags& f) {
  auto ep = FindDaemon(f.client.url, true);
  if (!ep.ok()) return ReportError(ep.error());
  DaemonProcess proc(*ep, f.sandbox_id, f.pid);
  TerminalOptions opt;
  opt.raw = ::isatty(0) != 0 && !f.no_stdin;
  opt.input = !f.no_stdin;
  opt.from = f.from;
  return RunTerminal(proc, opt);
}

}  // namespace

void AddAttachCommand(CLI::App& app, int& rc) {
  auto* attach = app.add_subcommand("attach", "attach the terminal to a process: skiff attach ID PID");
  auto f = std::make_shared<AttachFlags>();
  AddClientFlags(attach, f->client);
  attach->add_option("sandbox", f->sandbox_id)->required();
  attach->add_option("pid", f->pid)->required()->check(CLI::PositiveNumber);
  attach->add_option("--from", f->from, "output offset to replay from (default: all the buffer holds)")
      ->check(CLI::NonNegativeNumber);
  attach->add_flag("--no-stdin", f->no_stdin, "only watch: do not send keystrokes");
  attach->callback([f, &rc] { rc = Attach(*f); });
}

}  // namespace skiff::cli
