// `skiff cp`: one file between this host and a sandbox of the daemon;
// exactly one side is SANDBOX_ID:PATH.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "base/text.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/daemon_call.h"
#include "cli/file_transfer.h"

namespace skiff::cli {
namespace {

struct CpFlags {
  ClientFlags client;
  std::string src, dst, mode;
  bool parents = false;
};

// "ID:PATH" -> {id, path}; nullopt for a local path.
std::optional<std::pair<std::string, std::string>> RemoteSpec(const std::string& s) {
  auto colon = s.find(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  std::string id = s.substr(0, colon);
  if (!CanonicalUuid(id)) return std::nullopt;
  return std::make_pair(id, s.substr(colon + 1));
}

int Copy(const CpFlags& f) {
  auto rs = RemoteSpec(f.src), rd = RemoteSpec(f.dst);
  if (rs && !rd) return Download(f.client, rs->first, rs->second, f.dst);
  if (rd && !rs) return Upload(f.client, f.src, rd->first, rd->second, f.parents, f.mode);
  std::fprintf(stderr, "skiff cp: exactly one side must be SANDBOX_ID:PATH\n");
  return kExitSkiffError;
}

}  // namespace

void AddCpCommand(CLI::App& app, int& rc) {
  auto* cp = app.add_subcommand(
      "cp", "copy files: skiff cp LOCAL ID:PATH | skiff cp ID:PATH LOCAL ('-' = stdin/stdout)");
  auto f = std::make_shared<CpFlags>();
  AddClientFlags(cp, f->client);
  cp->add_option("src", f->src)->required();
  cp->add_option("dst", f->dst)->required();
  cp->add_flag("-p,--parents", f->parents, "create missing parent directories in the sandbox");
  cp->add_option("--mode", f->mode, "octal mode of the uploaded file (default 0644)");
  cp->callback([f, &rc] { rc = Copy(*f); });
}

}  // namespace skiff::cli
