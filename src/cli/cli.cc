// The `skiff` dispatcher: the table of subcommands, parsing, exit status.
#include "cli/cli.h"

#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string_view>

#include "cli/checkout_inputs.h"
#include "cli/commands.h"

namespace skiff::cli {
namespace {

using AddCommand = void (*)(CLI::App& app, int& rc);

struct Command {
  std::string_view name;
  AddCommand add;  // null: serve (its Add takes the daemon's main)
};

// Every subcommand, in the order `skiff --help` lists them; one Add that
// adds two subcommands (pause and resume; snapshot and fork) is listed under
// each name and added once.
constexpr Command kCommands[] = {
    {"serve", nullptr},
    {"route", AddRouteCommand},
    {"run", AddRunCommand},
    {"doctor", AddDoctorCommand},
    {"version", AddVersionCommand},
    {"create", AddCreateCommand},
    {"exec", AddExecCommand},
    {"ps", AddPsCommand},
    {"logs", AddLogsCommand},
    {"kill", AddKillCommand},
    {"attach", AddAttachCommand},
    {"ls", AddLsCommand},
    {"stop", AddStopCommand},
    {"pause", AddPauseCommands},
    {"resume", AddPauseCommands},
    {"stats", AddStatsCommand},
    {"snapshot", AddSnapshotCommands},
    {"fork", AddSnapshotCommands},
    {"catalog", AddCatalogCommand},
    {"cp", AddCpCommand},
    {"fs", AddFsCommand},
    {"image", AddImageCommands},
};

void Add(const Command& c, CLI::App& app, int& rc, DaemonMain daemon) {
  if (c.add == nullptr) {
    AddServeCommand(app, rc, daemon);
  } else {
    c.add(app, rc);
  }
}

}  // namespace

void AddCommands(CLI::App& app, int& rc, DaemonMain daemon, std::string_view only) {
  for (const Command& c : kCommands) {
    if (c.name == only) return Add(c, app, rc, daemon);
  }
  AddCommand added = nullptr;
  for (const Command& c : kCommands) {
    if (c.add != nullptr && c.add == added) continue;  // its pair was added with it
    Add(c, app, rc, daemon);
    added = c.add;
  }
}

int Main(int argc, char** argv, DaemonMain daemon) {
  ReturnToWrapperIfStale(argv);
  ::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"skiff: run untrusted code in short-lived sandboxes"};
  app.require_subcommand(1);
  int rc = 0;
  // A command line that starts with a subcommand's name needs only that
  // subcommand: building all of them is most of the parser's start-up cost
  // (docs/performance.md#start-up). Anything else (--help, a typo) gets the
  // whole tree, and the same answer as before.
  AddCommands(app, rc, daemon, argc > 1 ? std::string_view(argv[1]) : std::string_view());

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
