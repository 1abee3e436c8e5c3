// What the image side needs to know from the daemon's configuration: where
// the store lives, which catalog names may be used, which custom images
// exist and whether a missing image is installed on first use. The sandbox
// side builds it from its Config (ImagePolicyFor in sandbox/config.h).
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace skiff::images {

struct ImagePolicy {
  std::string images_dir;  // "" = Store::DefaultRoot()
  bool auto_install = true;
  bool allow_all = false;                            // every catalog name is allowed
  std::vector<std::string> allowlist;                // otherwise: exactly these names
  std::map<std::string, std::string> custom_images;  // name -> OCI ref or archive path

  bool Allowed(const std::string& name) const {
    return allow_all || std::find(allowlist.begin(), allowlist.end(), name) != allowlist.end();
  }
};

}  // namespace skiff::images
