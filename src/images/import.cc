// ImportArchive: `docker save` archives and OCI image-layout tarballs.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/log.h"
#include "base/sha256.h"
#include "base/text.h"
#include "base/unique_fd.h"
#include "images/archive_path.h"
#include "images/build.h"
#include "images/install.h"
#include "images/oci.h"
#include "images/recipe.h"

namespace skiff::images {
namespace {

Error BadArchive(const std::string& detail) { return InvalidRequest("image archive: " + detail); }

// The outer archive unpacked as a flat set of files: path -> staged file.
// Symlinks between members (newer `docker save` links layer.tar into
// blobs/) are resolved by name, inside the archive only.
class Members {
 public:
  explicit Members(std::string dir) : dir_(std::move(dir)) {}

  Status Load(const std::string& archive_path) {
    std::unique_ptr<archive, decltype(&archive_read_free)> a(archive_read_new(), archive_read_free);
    archive_read_support_filter_all(a.get());
    archive_read_support_format_tar(a.get());
    archive_read_support_format_gnutar(a.get());
    if (archive_read_open_filename(a.get(), archive_path.c_str(), 1 << 16) != ARCHIVE_OK) {
      return BadArchive("cannot open " + archive_path + ": " + archive_error_string(a.get()));
    }
    archive_entry* e;
    int r;
    size_t n = 0;
    while ((r = archive_read_next_header(a.get(), &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
      const char* p = archive_entry_pathname(e);
      if (!p) return BadArchive("member without a name");
      bool ok;
      std::string path = NormalizeArchivePath(p, &ok);
      if (!ok) return BadArchive("member escapes the archive: " + std::string(p));
      if (++n > 100000) return BadArchive("too many members");
      mode_t type = archive_entry_filetype(e);
      if (const char* hl = archive_entry_hardlink(e)) {
        bool hok;
        std::string t = NormalizeArchivePath(hl, &hok);
        if (!hok) return BadArchive("member escapes the archive: " + std::string(hl));
        links_[path] = "/" + t;
      } else if (type == AE_IFLNK) {
        const char* t = archive_entry_symlink(e);
        if (t) links_[path] = t;
      } else if (type == AE_IFREG) {
        std::string staged = dir_ + "/" + std::to_string(n);
        UniqueFd fd(::open(staged.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
        if (!fd) return Error::Sys(Code::kS300, "open", staged, errno);
        if (archive_read_data_into_fd(a.get(), fd.get()) != ARCHIVE_OK) {
          return BadArchive("reading " + path + ": " + archive_error_string(a.get()));
        }
        files_[path] = staged;
      }
    }
    if (r != ARCHIVE_EOF) return BadArchive(archive_error_string(a.get()));
    return OkStatus();
  }

  // The staged file for a member path, following member symlinks.
  std::optional<std::string> File(std::string path) const {
    bool ok;
    path = NormalizeArchivePath(path, &ok);
    for (int hops = 0; ok && hops < 16; ++hops) {
      if (auto f = files_.find(path); f != files_.end()) return f->second;
      auto l = links_.find(path);
      if (l == links_.end()) return std::nullopt;
      std::string target = l->second;
      if (!target.starts_with("/")) {
        // Relative to the link's directory: prefix "dir/" (nothing at the top).
        if (auto slash = path.rfind('/'); slash != std::string::npos) target.insert(0, path, 0, slash + 1);
      }
      path = NormalizeArchivePath(target, &ok);
    }
    return std::nullopt;
  }

 private:
  std::string dir_;
  std::map<std::string, std::string> files_;
  std::map<std::string, std::string> links_;
};

Result<std::string> ReadAll(const std::string& path, size_t max) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Error::Sys(Code::kS300, "open", path, errno);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys(Code::kS300, "read", path, errno);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max) return BadArchive("metadata file too large");
  }
  return out;
}

Result<std::string> FileSha256(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Error::Sys(Code::kS300, "open", path, errno);
  Sha256 h;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys(Code::kS300, "read", path, errno);
    if (n == 0) break;
    h.Update(buf, static_cast<size_t>(n));
  }
  return h.HexDigest();
}

Result<nlohmann::json> ParseJson(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return BadArchive(what + " is not JSON");
  }
}

// An OCI blob by descriptor digest, verified.
Result<std::string> Blob(const Members& m, const nlohmann::json& desc, const std::string& what) {
  if (!desc.is_object() || !desc.contains("digest") || !desc["digest"].is_string()) {
    return BadArchive(what + " descriptor without a digest");
  }
  std::string d = desc["digest"].get<std::string>();
  if (!d.starts_with("sha256:") || !IsHexDigest(d.substr(7))) {
    return BadArchive(what + " digest must be sha256:<hex>: " + d);
  }
  auto f = m.File("blobs/sha256/" + d.substr(7));
  if (!f) return BadArchive(what + " blob missing: " + d);
  SKIFF_ASSIGN_OR_RETURN(std::string got, FileSha256(*f));
  if (got != d.substr(7)) return BadArchive(what + " blob digest mismatch: " + d);
  return *f;
}

bool IsIndexType(const std::string& t) {
  return t == "application/vnd.oci.image.index.v1+json" ||
         t == "application/vnd.docker.distribution.manifest.list.v2+json";
}

struct Plan {
  std::string config_file;
  std::vector<std::string> layer_files;
};

Result<Plan> PlanOci(const Members& m) {
  auto idx_file = m.File("index.json");
  if (!idx_file) return BadArchive("neither manifest.json nor index.json found");
  SKIFF_ASSIGN_OR_RETURN(std::string idx_text, ReadAll(*idx_file, 4 << 20));
  SKIFF_ASSIGN_OR_RETURN(nlohmann::json idx, ParseJson(idx_text, "index.json"));
  for (int depth = 0; depth < 4; ++depth) {
    if (!idx.is_object() || !idx.contains("manifests") || !idx["manifests"].is_array() ||
        idx["manifests"].empty()) {
      return BadArchive("index without manifests");
    }
    // Prefer linux/amd64; else the only entry.
    nlohmann::json pick;
    for (const auto& d : idx["manifests"]) {
      if (!d.is_object()) continue;
      auto plat = d.value("platform", nlohmann::json::object());
      if (plat.is_object() && plat.value("os", "") == "linux" && plat.value("architecture", "") == "amd64") {
        pick = d;
        break;
      }
    }
    if (pick.is_null()) {
      if (idx["manifests"].size() != 1) return BadArchive("no linux/amd64 manifest");
      pick = idx["manifests"][0];
    }
    SKIFF_ASSIGN_OR_RETURN(std::string f, Blob(m, pick, "manifest"));
    SKIFF_ASSIGN_OR_RETURN(std::string text, ReadAll(f, 4 << 20));
    SKIFF_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(text, "manifest"));
    std::string mt = pick.value("mediaType", "");
    if (doc.is_object() && doc.contains("mediaType") && doc["mediaType"].is_string()) {
      mt = doc["mediaType"].get<std::string>();
    }
    if (IsIndexType(mt) || (doc.is_object() && doc.contains("manifests"))) {
      idx = doc;
      continue;
    }
    if (!doc.is_object() || !doc.contains("layers") || !doc["layers"].is_array()) {
      return BadArchive("manifest without layers");
    }
    Plan plan;
    SKIFF_ASSIGN_OR_RETURN(plan.config_file, Blob(m, doc.value("config", nlohmann::json()), "config"));
    for (const auto& l : doc["layers"]) {
      SKIFF_ASSIGN_OR_RETURN(std::string lf, Blob(m, l, "layer"));
      plan.layer_files.push_back(lf);
    }
    return plan;
  }
  return BadArchive("index nesting too deep");
}

Result<Plan> PlanDocker(const Members& m, const std::string& manifest_file) {
  SKIFF_ASSIGN_OR_RETURN(std::string text, ReadAll(manifest_file, 4 << 20));
  SKIFF_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(text, "manifest.json"));
  if (!doc.is_array() || doc.empty() || !doc[0].is_object()) {
    return BadArchive("manifest.json is not a non-empty list");
  }
  if (doc.size() > 1) {
    SKIFF_LOG(Warn) << "image archive holds several images; using the first";
  }
  const auto& e = doc[0];
  if (!e.contains("Config") || !e["Config"].is_string() || !e.contains("Layers") || !e["Layers"].is_array()) {
    return BadArchive("manifest.json entry needs Config and Layers");
  }
  Plan plan;
  auto cf = m.File(e["Config"].get<std::string>());
  if (!cf) return BadArchive("config missing: " + e["Config"].get<std::string>());
  plan.config_file = *cf;
  for (const auto& l : e["Layers"]) {
    if (!l.is_string()) return BadArchive("Layers must hold strings");
    auto lf = m.File(l.get<std::string>());
    if (!lf) return BadArchive("layer missing: " + l.get<std::string>());
    plan.layer_files.push_back(*lf);
  }
  return plan;
}

}  // namespace

Result<ImageMeta> InstallImage(const Store& store, const std::string& name, const std::string& source,
                               const std::string& config_text, const std::vector<std::string>& layer_files,
                               const ProgressFn& progress) {
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  if (IsPreset(name) || name == "host") {
    return InvalidRequest("image name '" + name + "' is reserved");
  }
  std::string digest = Sha256Hex(config_text);
  SKIFF_ASSIGN_OR_RETURN(nlohmann::json config, ParseJson(config_text, "image config"));
  if (!config.is_object()) return BadArchive("image config is not an object");
  std::vector<std::string> diff_ids;
  try {
    diff_ids = config.at("rootfs").at("diff_ids").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception&) {
    return BadArchive("image config lacks rootfs.diff_ids");
  }
  if (diff_ids.size() != layer_files.size()) {
    return BadArchive("image config lists " + std::to_string(diff_ids.size()) + " layers, manifest " +
                      std::to_string(layer_files.size()));
  }

  ImageMeta meta;
  meta.name = name;
  meta.digest = digest;
  meta.kind = "oci";
  meta.source = source;
  auto cc = config.value("config", nlohmann::json::object());
  if (cc.is_object()) {
    if (cc.contains("Env") && cc["Env"].is_array()) {
      for (const auto& v : cc["Env"]) {
        if (!v.is_string()) return BadArchive("config Env must hold strings");
        std::string s = v.get<std::string>();
        if (s.find('=') == std::string::npos || s.starts_with("=")) {
          return BadArchive("config Env entry is not K=V: " + s);
        }
        meta.env.push_back(s);
      }
    }
    if (cc.contains("WorkingDir") && cc["WorkingDir"].is_string()) {
      meta.workdir = cc["WorkingDir"].get<std::string>();
      if (!meta.workdir.empty() && meta.workdir[0] != '/') {
        return BadArchive("config WorkingDir must be absolute");
      }
    }
    if (cc.contains("User") && cc["User"].is_string()) meta.user = cc["User"].get<std::string>();
    if (meta.user.size() > 64) return BadArchive("config User too long");
  }

  // The microVM block image is built on the first microVM use
  // (Catalog::Resolve), not here: a jail never needs it, and for a large
  // image it costs more than the download.
  auto finish = [&](const ImageMeta& m) -> Result<ImageMeta> {
    SKIFF_RETURN_IF_ERROR(store.SetCurrent(name, m.digest));
    return m;
  };
  if (auto have = store.Read(digest)) {
    say("image sha256:" + digest + " already in the store");
    ImageMeta m = *have;
    return finish(m);
  }
  SKIFF_ASSIGN_OR_RETURN(UniqueFd lock, store.Lock(digest));
  if (auto have = store.Read(digest)) {
    lock.reset();
    return finish(*have);
  }
  int64_t t0 = MonotonicMillis();
  SKIFF_ASSIGN_OR_RETURN(std::string tmp, store.MakeTemp(digest));
  ScopedCleanup drop([&] { (void)RemoveTree(tmp); });
  std::string rootfs = tmp + "/rootfs";
  if (::mkdir(rootfs.c_str(), 0755) != 0 || ::chmod(rootfs.c_str(), 0755) != 0) {
    return Error::Sys(Code::kS300, "mkdir", rootfs, errno);
  }
  for (size_t i = 0; i < layer_files.size(); ++i) {
    SKIFF_ASSIGN_OR_RETURN(std::string diff, LayerDiffId(layer_files[i]));
    if (diff != diff_ids[i]) {
      return BadArchive("layer " + std::to_string(i + 1) + " does not match its diff_id " + diff_ids[i]);
    }
    SKIFF_ASSIGN_OR_RETURN(LayerReport rep, ApplyLayer(rootfs, layer_files[i]));
    say("layer " + std::to_string(i + 1) + "/" + std::to_string(layer_files.size()) + ": " +
        std::to_string(rep.entries) + " entries, " + std::to_string(rep.whiteouts) + " whiteouts" +
        (rep.skipped_devices ? ", " + std::to_string(rep.skipped_devices) + " devices skipped" : "") +
        (rep.stripped_setid ? ", " + std::to_string(rep.stripped_setid) + " setuid/setgid dropped" : ""));
  }
  meta.created_ms = NowUnixMillis();
  meta.build_ms = static_cast<uint64_t>(MonotonicMillis() - t0);
  SKIFF_RETURN_IF_ERROR(store.Commit(tmp, meta));
  drop.Cancel();
  lock.reset();  // finish() takes it again for the block image
  say("imported " + name + " as sha256:" + digest);
  return finish(meta);
}

Result<ImageMeta> ImportArchive(const Store& store, const std::string& name, const std::string& path,
                                const ProgressFn& progress) {
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  if (IsPreset(name) || name == "host") {
    return InvalidRequest("image name '" + name + "' is reserved");
  }
  SKIFF_RETURN_IF_ERROR(store.Init());
  // Stage the outer archive under a random key (gc reclaims it if we die).
  std::string stage_key = Sha256Hex(RandomHex(16));
  SKIFF_ASSIGN_OR_RETURN(std::string stage, store.MakeTemp(stage_key));
  ScopedCleanup drop_stage([&] { (void)RemoveTree(stage); });
  say("reading " + path);
  Members members(stage);
  SKIFF_RETURN_IF_ERROR(members.Load(path));

  Plan plan;
  if (auto mf = members.File("manifest.json")) {
    SKIFF_ASSIGN_OR_RETURN(plan, PlanDocker(members, *mf));
  } else {
    SKIFF_ASSIGN_OR_RETURN(plan, PlanOci(members));
  }
  SKIFF_ASSIGN_OR_RETURN(std::string config_text, ReadAll(plan.config_file, 4 << 20));
  return InstallImage(store, name, path, config_text, plan.layer_files, progress);
}

}  // namespace skiff::images
