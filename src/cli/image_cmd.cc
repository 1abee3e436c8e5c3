// `skiff image …`: manage the image store directly (no daemon needed).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/text.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "images/build.h"
#include "images/recipe.h"
#include "images/store.h"
#include "sandbox/config.h"

namespace skiff::cli {
namespace {

using images::Store;

Store StoreFor(const std::string& config_path, int* rc) {
  if (config_path.empty()) return Store(Store::DefaultRoot());
  auto c = LoadConfigFile(config_path);
  if (!c.ok()) {
    std::fprintf(stderr, "skiff: %s\n", c.error().ToString().c_str());
    *rc = kExitConfig;
    return Store(Store::DefaultRoot());
  }
  return Store::ForPolicy(ImagePolicyFor(*c));
}

int Report(const Result<images::ImageMeta>& r, const Store& store, int64_t t0) {
  if (!r.ok()) {
    std::fprintf(stderr, "skiff: %s\n", r.error().ToString().c_str());
    return 1;
  }
  std::printf("%s  sha256:%s  %s  %.1f s  %.0f MiB\n", r->name.c_str(), r->digest.c_str(), r->source.c_str(),
              static_cast<double>(MonotonicMillis() - t0) / 1000.0,
              static_cast<double>(images::TreeBytes(store.RootfsDir(r->digest))) / 1048576.0);
  return 0;
}

void Progress(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

// The flags and positionals of `image` and its subcommands.
struct ImageFlags {
  std::string config_path;
  std::vector<std::string> presets;
  std::string name, source;
};

}  // namespace

void AddImageCommands(CLI::App& app, int& rc) {
  auto* image = app.add_subcommand("image", "manage images: build, import, pull, ls, inspect, rm, gc");
  image->require_subcommand(1);
  auto f = std::make_shared<ImageFlags>();
  image->add_option("--config", f->config_path, "daemon config (for images_dir)");

  auto* build = image->add_subcommand("build", "build presets from Debian packages (cached by recipe)");
  build->add_option("preset", f->presets, "python | node | base")->required();
  build->callback([f, &rc] {
    Store store = StoreFor(f->config_path, &rc);
    for (const auto& p : f->presets) {
      int64_t t0 = MonotonicMillis();
      if (int r = Report(images::BuildPreset(store, p, Progress), store, t0)) rc = r;
    }
  });

  auto* imp = image->add_subcommand("import", "import a docker-save or OCI layout archive: NAME FILE");
  imp->add_option("name", f->name)->required();
  imp->add_option("file", f->source)->required();
  imp->callback([f, &rc] {
    Store store = StoreFor(f->config_path, &rc);
    rc = Report(images::ImportArchive(store, f->name, f->source, Progress), store, MonotonicMillis());
  });

  auto* pull = image->add_subcommand("pull", "pull from a registry (distribution API v2): NAME REF");
  pull->add_option("name", f->name)->required();
  pull->add_option("ref", f->source)->required();
  pull->callback([f, &rc] {
    Store store = StoreFor(f->config_path, &rc);
    rc = Report(images::Pull(store, f->name, f->source, Progress), store, MonotonicMillis());
  });

  auto* ls = image->add_subcommand("ls", "list installed images");
  ls->callback([f, &rc] {
    Store store = StoreFor(f->config_path, &rc);
    std::printf("%-12s %-10s %-20s %-6s %s\n", "NAME", "KIND", "DIGEST", "IN USE", "SOURCE");
    for (const auto& n : store.CurrentNames()) {
      auto d = store.Current(n);
      auto m = d ? store.Read(*d) : std::nullopt;
      if (!m) continue;
      std::printf("%-12s %-10s %-20s %-6s %s\n", n.c_str(), m->kind.c_str(), m->digest.substr(0, 19).c_str(),
                  store.InUse(m->digest) ? "yes" : "no", m->source.c_str());
    }
  });

  auto* inspect = image->add_subcommand("inspect", "show an installed image's metadata: NAME");
  inspect->add_option("name", f->name)->required();
  inspect->callback([f, &rc] {
    Store store = StoreFor(f->config_path, &rc);
    auto d = store.Current(f->name);
    auto m = d ? store.Read(*d) : std::nullopt;
    if (!m) {
      std::fprintf(stderr, "skiff: image '%s' is not installed\n", f->name.c_str());
      rc = 1;
      return;
    }
    nlohmann::json j = {{"name", m->name},
                        {"digest", "sha256:" + m->digest},
                        {"kind", m->kind},
                        {"source", m->source},
                        {"env", m->env},
                        {"workdir", m->workdir},
                        {"user", m->user},
                        {"rootfs", store.RootfsDir(m->digest)},
                        {"created_at", Rfc3339Millis(m->created_ms)},
                        {"build_ms", m->build_ms}};
    std::printf("%s\n", j.dump(2).c_str());
  });

  auto* rm = image->add_subcommand(
      "rm",
      "remove an image: forget NAME and delete its files unless another name uses them; "
      "refused while a running sandbox uses them");
  rm->add_option("name", f->name)->required();
  rm->callback([f, &rc] {
    Store store = StoreFor(f->config_path, &rc);
    auto r = store.Remove(f->name);
    if (!r.ok()) {
      std::fprintf(stderr, "skiff: %s\n", r.error().ToString().c_str());
      rc = 1;
      return;
    }
    std::printf("removed %s, freed %.1f MiB\n", f->name.c_str(),
                static_cast<double>(r->bytes_freed) / 1048576.0);
  });

  auto* gc =
      image->add_subcommand("gc", "remove store entries no image references and no running sandbox uses");
  gc->callback([f, &rc] {
    Store store = StoreFor(f->config_path, &rc);
    auto r = store.Gc();
    if (!r.ok()) {
      std::fprintf(stderr, "skiff: %s\n", r.error().ToString().c_str());
      rc = 1;
      return;
    }
    std::printf("removed %zu entries, freed %.1f MiB\n", r->removed.size(),
                static_cast<double>(r->bytes_freed) / 1048576.0);
    for (const auto& d : r->kept_in_use) {
      std::printf("kept sha256:%s: in use by a running sandbox\n", d.substr(0, 12).c_str());
    }
  });
}

}  // namespace skiff::cli
