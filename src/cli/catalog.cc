// `skiff catalog`: the images the daemon lets sandboxes start from.
#include <cstdio>
#include <memory>
#include <string>

#include "api/http_util.h"
#include "cli/columns.h"
#include "cli/commands.h"
#include "cli/daemon_call.h"

namespace skiff::cli {
namespace {

using json = nlohmann::json;

int Catalog(const ClientFlags& flags) {
  int rc = 0;
  auto r = CallFunction(flags, "sandbox::catalog::list", json::object(), &rc);
  if (!r) return rc;
  if (flags.json_out) {
    std::printf("%s\n", api::Dump(*r).c_str());
    return rc;
  }
  std::printf("%s%s%s%s\n", Pad("IMAGE", 12).c_str(), Pad("ALLOWED", 9).c_str(), Pad("INSTALLED", 11).c_str(),
              "REFERENCE");
  for (const auto& e : r->value("images", json::array())) {
    std::printf("%s%s%s%s\n", Pad(e.value("name", ""), 12).c_str(),
                Pad(e.value("allowed", false) ? "yes" : "no", 9).c_str(),
                Pad(e.value("installed", false) ? "yes" : "no", 11).c_str(),
                e.value("oci_ref", e.value("image", std::string())).c_str());
  }
  return rc;
}

}  // namespace

void AddCatalogCommand(CLI::App& app, int& rc) {
  auto* catalog = app.add_subcommand("catalog", "list the images sandboxes can start from");
  auto flags = std::make_shared<ClientFlags>();
  AddClientFlags(catalog, *flags);
  catalog->callback([flags, &rc] { rc = Catalog(*flags); });
}

}  // namespace skiff::cli
