// `skiff version`.
#include <cstdio>

#include "api/server.h"
#include "cli/commands.h"

namespace skiff::cli {

void AddVersionCommand(CLI::App& app, int& /*rc*/) {
  auto* version = app.add_subcommand("version", "print the version");
  version->callback([] { std::printf("skiff %s\n", api::Version().c_str()); });
}

}  // namespace skiff::cli
