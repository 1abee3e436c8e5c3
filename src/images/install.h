// Shared by archive import and registry pull: installs an OCI image whose
// config and (verified) layer blobs are local files.
#pragma once

#include <string>
#include <vector>

#include "images/build.h"

namespace skiff::images {

// The store key is SHA-256(config_text). Each layer must match the config's
// rootfs.diff_ids[i]; layers are applied in order with ApplyLayer. Builds
// once under the digest's lock, commits atomically, points current/<name>.
Result<ImageMeta> InstallImage(const Store& store, const std::string& name, const std::string& source,
                               const std::string& config_text, const std::vector<std::string>& layer_files,
                               const ProgressFn& progress);

}  // namespace skiff::images
