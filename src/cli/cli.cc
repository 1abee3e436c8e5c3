// The `skiff` dispatcher: the table of subcommands, parsing, exit status.
#include "cli/cli.h"

#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"

namespace skiff::cli {
namespace {

using AddCommand = void (*)(CLI::App& app, int& rc);

// In the order `skiff --help` lists them, after `serve`.
constexpr AddCommand kCommands[] = {
    AddRunCommand,  AddDoctorCommand, AddVersionCommand, AddCreateCommand,    AddExecCommand,
    AddPsCommand,   AddLogsCommand,   AddKillCommand,    AddAttachCommand,    AddLsCommand,
    AddStopCommand, AddPauseCommands, AddStatsCommand,   AddSnapshotCommands, AddCatalogCommand,
    AddCpCommand,   AddFsCommand,     AddImageCommands,
};

}  // namespace

int Main(int argc, char** argv, DaemonMain daemon) {
  ::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"skiff: run untrusted code in short-lived sandboxes"};
  app.require_subcommand(1);
  int rc = 0;
  AddServeCommand(app, rc, daemon);
  AddRouteCommand(app, rc);
  for (AddCommand add : kCommands) add(app, rc);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitConfig;
  }
  std::fflush(stdout);
  return rc;
}

}  // namespace skiff::cli
