// The image catalog: presets (python, node, base), the host image, and
// operator custom images; resolves a catalog name to a root filesystem.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "images/image_policy.h"
#include "images/image_service.h"
#include "isolation/isolator.h"

namespace skiff {
namespace images {
struct ImageLease;  // images/store.h
}

struct CatalogEntry {
  std::string name;
  std::string oci_ref;
  std::string kind;  // "preset" | "host" | "custom"
  bool allowed = false;
  bool installed = false;
};

// What a sandbox of this image starts from.
struct ResolvedImage {
  std::string name;
  RootfsSpec rootfs;
  std::vector<std::string> env;        // image Env ("K=V"), layer 2 of docs/api.md#sandboxexec
  std::string workdir;                 // "" = "/"
  std::string user;                    // "" = root
  std::vector<ImageService> services;  // what a create may start (docs/images.md#services)
  // Held for the sandbox's lifetime: gc and `skiff image rm` (in any
  // process) leave the entry alone while it exists. Null for `host`.
  std::shared_ptr<const images::ImageLease> lease;
};

class Catalog {
 public:
  explicit Catalog(images::ImagePolicy policy);
  // Presets first (python, node, base), then host, then custom by name.
  std::vector<CatalogEntry> List() const;
  bool Known(const std::string& name) const;
  bool Installed(const std::string& name) const;
  // Resolves an installed image (installing it first when auto_install).
  // S101 / S102 as the spec says. `block_image`: also build (once, cached)
  // the read-only block image the microVM backend boots from; the jail
  // never needs it, and for a large fresh image it is most of the cost.
  Result<ResolvedImage> Resolve(const std::string& name, bool block_image = true);

  // Extension: where auto-install progress lines go (mmdebstrap output,
  // layer steps). Default: none.
  void SetProgress(std::function<void(const std::string&)> fn) { progress_ = std::move(fn); }
  // The store digest of an installed preset or custom image (nullopt for
  // `host` and for images that are not installed).
  std::optional<std::string> InstalledDigest(const std::string& name) const;

 private:
  images::ImagePolicy policy_;
  std::function<void(const std::string&)> progress_;
};

// The `host` image: read-only views of the host's /usr, /bin, /sbin, /lib*
// plus a synthesized minimal /etc (never shadow, keys or machine secrets).
Result<ResolvedImage> HostImage();

}  // namespace skiff
