#include "images/build.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "base/file_io.h"
#include "base/log.h"
#include "base/text.h"
#include "images/recipe.h"

namespace skiff::images {
namespace {

// Host apt sources for Debian itself (never third-party lists), when they
// serve the recipe's suite; empty = mmdebstrap's default Debian mirror.
std::vector<std::string> DebianMirrors(const std::string& suite) {
  if (const char* m = std::getenv("SKIFF_DEBIAN_MIRROR"); m && *m) return {m};
  std::vector<std::string> out;
  for (const char* f : {"/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"}) {
    std::ifstream in(f);
    if (!in) continue;
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    bool has_suite = false;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.starts_with("#")) continue;
      if (line.find(" " + suite) != std::string::npos) has_suite = true;
    }
    if (has_suite) out.push_back(f);
  }
  return out;
}

// Adds a recipe file to a freshly built rootfs: every directory below the
// rootfs is created 0755 when missing and must not be a symlink (the tree
// is Debian's, but a path is never resolved through a link), the file is
// written without following a link and gets exactly its mode, owned by root.
Status InstallFile(const std::string& rootfs, const RecipeFile& file, const std::string& bytes) {
  std::string dir = rootfs;
  size_t pos = 1;
  while (true) {
    size_t slash = file.path.find('/', pos);
    if (slash == std::string::npos) break;
    dir += "/" + file.path.substr(pos, slash - pos);
    pos = slash + 1;
    struct stat st;
    if (::lstat(dir.c_str(), &st) != 0) {
      if (errno != ENOENT || ::mkdir(dir.c_str(), 0755) != 0)
        return Error::Sys(Code::kS300, "mkdir", dir, errno);
    } else if (!S_ISDIR(st.st_mode)) {
      return Platform("sandbox", "recipe file " + file.path + ": " + dir + " is not a directory");
    }
  }
  std::string path = rootfs + file.path;
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return Error::Sys(Code::kS300, "open", path, errno);
  SKIFF_RETURN_IF_ERROR(WriteAll(fd.get(), bytes, path));
  if (::fchown(fd.get(), 0, 0) != 0) return Error::Sys(Code::kS300, "fchown", path, errno);
  if (::fchmod(fd.get(), file.mode) != 0) return Error::Sys(Code::kS300, "fchmod", path, errno);
  return OkStatus();
}

}  // namespace

Result<ImageMeta> BuildPreset(const Store& store, const std::string& name, const ProgressFn& progress) {
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
    SKIFF_LOG(Debug) << "image " << name << ": " << s;
  };
  SKIFF_ASSIGN_OR_RETURN(Recipe recipe, PresetRecipe(name));
  // The files' bytes are checked before anything is built: a file changed
  // without its recipe's pin is refused at once.
  std::vector<std::string> file_bytes;
  for (const auto& f : recipe.files) {
    SKIFF_ASSIGN_OR_RETURN(std::string bytes, RecipeFileBytes(f));
    file_bytes.push_back(std::move(bytes));
  }
  // Called without the build lock held (EnsureBlockImage takes it).
  auto finish = [&](ImageMeta meta) -> Result<ImageMeta> {
    SKIFF_RETURN_IF_ERROR(store.SetCurrent(name, meta.digest));
    auto block = store.EnsureBlockImage(meta.digest);
    if (!block.ok()) {
      SKIFF_LOG(Warn) << "image " << name << ": no block image: " << block.error().message();
    }
    return meta;
  };
  if (auto have = store.Read(recipe.digest)) {
    say("preset " + name + " " + recipe.Version() + " already built");
    return finish(*have);
  }
  if (::geteuid() != 0) {
    return Platform("sandbox",
                    "building preset images needs root (mmdebstrap --mode=root "
                    "keeps the rootfs owned by uid 0)");
  }
  SKIFF_ASSIGN_OR_RETURN(UniqueFd lock, store.Lock(recipe.digest));
  if (auto have = store.Read(recipe.digest)) {  // built by another process meanwhile
    lock.reset();
    say("preset " + name + " " + recipe.Version() + " built concurrently");
    return finish(*have);
  }
  SKIFF_ASSIGN_OR_RETURN(std::string tmp, store.MakeTemp(recipe.digest));
  ScopedCleanup drop([&] { (void)RemoveTree(tmp); });
  std::string rootfs = tmp + "/rootfs";

  // One argument, written over three lines.
  static constexpr const char* kDropCachesHook =
      "--customize-hook=rm -rf \"$1\"/var/lib/apt/lists/* \"$1\"/var/cache/apt/* "
      "\"$1\"/var/cache/debconf/*-old \"$1\"/var/lib/dpkg/*-old \"$1\"/var/log/*.log "
      "\"$1\"/var/log/apt/*";
  std::vector<std::string> argv = {
      "mmdebstrap",
      "--mode=root",
      "--variant=" + recipe.variant,
      "--aptopt=APT::Install-Recommends \"false\"",
      "--aptopt=APT::Install-Suggests \"false\"",
      // Trim documentation, manuals and translations (copyright files stay).
      "--dpkgopt=path-exclude=/usr/share/man/*",
      "--dpkgopt=path-exclude=/usr/share/info/*",
      "--dpkgopt=path-exclude=/usr/share/doc/*",
      "--dpkgopt=path-include=/usr/share/doc/*/copyright",
      "--dpkgopt=path-exclude=/usr/share/locale/*",
      "--dpkgopt=path-include=/usr/share/locale/locale.alias",
      "--dpkgopt=path-exclude=/usr/share/lintian/*",
      // Package lists and caches are rebuilt by `apt-get update` if needed.
      kDropCachesHook,
  };
  if (!recipe.packages.empty()) {
    std::string inc;
    for (const auto& p : recipe.packages) inc += (inc.empty() ? "" : ",") + p;
    argv.push_back("--include=" + inc);
  }
  argv.push_back(recipe.suite);
  argv.push_back(rootfs);
  for (auto& m : DebianMirrors(recipe.suite)) argv.push_back(m);

  say("building preset " + name + " " + recipe.Version() + " with mmdebstrap (" + recipe.suite + ", " +
      recipe.variant + ", " + std::to_string(recipe.packages.size()) + " packages)");
  int64_t t0 = MonotonicMillis();
  Status st = RunLogged(argv, [&](const std::string& line) {
    if (progress) progress(line);
  });
  if (!st.ok()) return std::move(st).error();
  for (size_t i = 0; i < recipe.files.size(); ++i) {
    say("adding " + recipe.files[i].path);
    SKIFF_RETURN_IF_ERROR(InstallFile(rootfs, recipe.files[i], file_bytes[i]));
  }
  if (::chmod(rootfs.c_str(), 0755) != 0) return Error::Sys(Code::kS300, "chmod", rootfs, errno);

  ImageMeta meta;
  meta.name = name;
  meta.digest = recipe.digest;
  meta.kind = "preset";
  meta.source = recipe.OciRef();
  meta.env = recipe.env;
  meta.workdir = recipe.workdir;
  meta.user = recipe.user;
  meta.services = recipe.services;
  meta.created_ms = NowUnixMillis();
  meta.build_ms = static_cast<uint64_t>(MonotonicMillis() - t0);
  SKIFF_RETURN_IF_ERROR(store.Commit(tmp, meta));
  drop.Cancel();
  lock.reset();  // finish() takes it again for the block image
  say("built preset " + name + " in " + std::to_string(meta.build_ms / 1000) + " s (" +
      std::to_string(TreeBytes(store.RootfsDir(meta.digest)) / (uint64_t{1024} * 1024)) + " MiB)");
  return finish(meta);
}

Result<ImageMeta> BuildPreset(const std::string& name, const ProgressFn& progress) {
  return BuildPreset(Store(Store::DefaultRoot()), name, progress);
}

Result<ImageMeta> ImportArchive(const std::string& name, const std::string& path,
                                const ProgressFn& progress) {
  return ImportArchive(Store(Store::DefaultRoot()), name, path, progress);
}

bool IsArchiveSource(const std::string& s) {
  if (s.starts_with("/") || s.starts_with("./") || s.starts_with("../")) return true;
  for (const char* ext : {".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.xz", ".oci"}) {
    if (s.ends_with(ext)) return true;
  }
  return false;
}

}  // namespace skiff::images
