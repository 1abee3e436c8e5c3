#include "images/catalog.h"

#include <sys/stat.h>

#include <utility>

#include "base/log.h"
#include "images/build.h"
#include "images/recipe.h"
#include "images/store.h"

namespace skiff {
namespace {

constexpr char kHostRef[] = "skiff.local/host";

}  // namespace

Catalog::Catalog(images::ImagePolicy policy) : policy_(std::move(policy)) {}

std::vector<CatalogEntry> Catalog::List() const {
  std::vector<CatalogEntry> out;
  for (const auto& name : images::PresetNames()) {
    CatalogEntry e;
    e.name = name;
    auto r = images::PresetRecipe(name);
    e.oci_ref = r.ok() ? r->OciRef() : "skiff.local/preset/" + name;
    e.kind = "preset";
    e.allowed = policy_.Allowed(name);
    e.installed = Installed(name);
    out.push_back(std::move(e));
  }
  out.push_back({"host", kHostRef, "host", policy_.Allowed("host"), true});
  for (const auto& [name, source] : policy_.custom_images) {  // std::map: sorted by name
    if (images::IsPreset(name) || name == "host") continue;   // rejected by config validation
    out.push_back({name, source, "custom", policy_.Allowed(name), Installed(name)});
  }
  return out;
}

bool Catalog::Known(const std::string& name) const {
  return images::IsPreset(name) || name == "host" || policy_.custom_images.count(name) > 0;
}

bool Catalog::Installed(const std::string& name) const {
  images::Store store = images::Store::ForPolicy(policy_);
  if (images::IsPreset(name)) {
    auto r = images::PresetRecipe(name);
    return r.ok() && store.Read(r->digest).has_value();
  }
  if (name == "host") return true;
  if (!policy_.custom_images.count(name)) return false;
  auto d = store.Current(name);
  return d && store.Read(*d).has_value();
}

std::optional<std::string> Catalog::InstalledDigest(const std::string& name) const {
  images::Store store = images::Store::ForPolicy(policy_);
  if (images::IsPreset(name)) {
    auto r = images::PresetRecipe(name);
    if (r.ok() && store.Read(r->digest)) return r->digest;
    return std::nullopt;
  }
  if (!policy_.custom_images.count(name)) return std::nullopt;
  auto d = store.Current(name);
  if (d && store.Read(*d)) return d;
  return std::nullopt;
}

Result<ResolvedImage> Catalog::Resolve(const std::string& name, bool block_image) {
  if (!Known(name) || !policy_.Allowed(name)) {
    std::string allowed;
    for (const auto& e : List()) {
      if (e.allowed) allowed += (allowed.empty() ? "" : ", ") + e.name;
    }
    return Error(Code::kS100, "image '" + name + "' is not in the catalog or not allowed; allowed images: " +
                                  (allowed.empty() ? "none" : allowed));
  }
  if (name == "host") return HostImage();

  images::Store store = images::Store::ForPolicy(policy_);
  // The entry is leased before its paths are handed out; a gc or rm that
  // deleted it in between makes us resolve the name again.
  std::optional<images::ImageLease> lease;
  std::optional<std::string> digest;
  for (int attempt = 0; !lease; ++attempt) {
    digest = InstalledDigest(name);
    if (!digest) {
      if (!policy_.auto_install) {
        return Error(Code::kS101,
                     "image '" + name + "' is not installed on this host and auto_install is off");
      }
      SKIFF_LOG(Info) << "image " << name << " is not installed; installing it now";
      Result<images::ImageMeta> got = Error(Code::kS300, "");
      if (images::IsPreset(name)) {
        got = images::BuildPreset(store, name, progress_);
      } else {
        const std::string& source = policy_.custom_images.at(name);
        got = images::IsArchiveSource(source) ? images::ImportArchive(store, name, source, progress_)
                                              : images::Pull(store, name, source, progress_);
      }
      if (!got.ok()) {
        std::string message = "auto-install failed for image '" + name;
        message.append("': ").append(got.error().message());
        return Error(Code::kS102, std::move(message));
      }
      digest = got->digest;
    }
    auto l = store.Lease(*digest);
    if (l.ok()) {
      lease = std::move(l).value();
    } else if (attempt >= 2) {
      return Error(Code::kS102, "auto-install failed for image '" + name + "': " + l.error().message());
    }
  }
  auto meta = store.Read(*digest);
  if (!meta) {
    return Error(Code::kS102,
                 "auto-install failed for image '" + name + "': store entry " + *digest + " vanished");
  }
  ResolvedImage out;
  out.name = name;
  out.rootfs.layers.push_back({"/", {store.RootfsDir(*digest)}});
  if (block_image) {
    auto block = store.EnsureBlockImage(*digest, "erofs");
    if (block.ok()) {
      out.rootfs.block_image = *block;
      out.rootfs.block_fstype = "erofs";
    } else {
      SKIFF_LOG(Warn) << "image " << name << ": no block image: " << block.error().message();
    }
  }
  out.env = meta->env;
  out.workdir = meta->workdir;
  out.user = meta->user;
  out.services = meta->services;
  out.lease = std::make_shared<const images::ImageLease>(std::move(*lease));
  return out;
}

}  // namespace skiff
