// The subcommands of `skiff`, one file each. Every Add*Command adds its
// subcommand (flags, positionals, help text) to `app`; when that subcommand
// is the one chosen, its callback sets `rc` to skiff's exit status.
#pragma once

#include <CLI/CLI.hpp>
#include <string_view>

#include "cli/cli.h"

namespace skiff::cli {

// cli.cc: adds the subcommand named `only` (with the one an Add adds beside
// it), or every subcommand when `only` names none.
void AddCommands(CLI::App& app, int& rc, DaemonMain daemon, std::string_view only);

// serve.cc: the daemon, foreground; `daemon` is its main.
void AddServeCommand(CLI::App& app, int& rc, DaemonMain daemon);
void AddRunCommand(CLI::App& app, int& rc);      // run.cc: one sandbox, no daemon
void AddDoctorCommand(CLI::App& app, int& rc);   // doctor.cc: what this host offers
void AddVersionCommand(CLI::App& app, int& rc);  // version.cc
void AddRouteCommand(CLI::App& app, int& rc);    // route.cc: a fleet's router (docs/multihost.md)

// Clients of a daemon.
void AddCreateCommand(CLI::App& app, int& rc);     // create.cc
void AddExecCommand(CLI::App& app, int& rc);       // exec.cc (-d: a background process)
void AddPsCommand(CLI::App& app, int& rc);         // ps.cc
void AddLogsCommand(CLI::App& app, int& rc);       // logs.cc
void AddKillCommand(CLI::App& app, int& rc);       // kill.cc
void AddAttachCommand(CLI::App& app, int& rc);     // attach.cc
void AddLsCommand(CLI::App& app, int& rc);         // ls.cc
void AddStopCommand(CLI::App& app, int& rc);       // stop.cc
void AddPauseCommands(CLI::App& app, int& rc);     // pause.cc: pause, resume
void AddStatsCommand(CLI::App& app, int& rc);      // stats.cc
void AddSnapshotCommands(CLI::App& app, int& rc);  // snapshot.cc: snapshot [ls|rm], fork
void AddCatalogCommand(CLI::App& app, int& rc);    // catalog.cc
void AddCpCommand(CLI::App& app, int& rc);         // cp.cc
void AddFsCommand(CLI::App& app, int& rc);         // fs.cc

// image_cmd.cc: `skiff image build|import|pull|ls|inspect|rm|gc`, the image
// store directly (no daemon needed).
void AddImageCommands(CLI::App& app, int& rc);

}  // namespace skiff::cli
