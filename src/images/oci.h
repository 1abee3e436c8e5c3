// OCI / docker image layers: safe application of one layer tarball onto a
// root filesystem directory. Used by ImportArchive (build.h) and Pull.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"

namespace skiff::images {

struct LayerReport {
  uint64_t entries = 0;
  uint64_t whiteouts = 0;
  uint64_t skipped_devices = 0;  // device nodes and sockets, not created
  uint64_t stripped_setid = 0;   // setuid/setgid bits removed
  uint64_t absolute_paths = 0;   // leading '/' removed
};

// Applies the layer tarball `layer_path` (any compression) onto
// `rootfs_dir`: whiteouts (.wh.<name>) and opaque markers (.wh..wh..opq)
// first remove what lower layers put there, then entries are created.
//
// Every entry is resolved component by component from a directory fd of
// `rootfs_dir` with O_NOFOLLOW, so no symlink is ever followed: a path whose
// parent is a symlink, a `..` component, or a hard link whose target is not
// a non-directory inside the tree makes the whole layer fail (S001).
// Absolute paths are made relative. Device nodes and sockets are skipped;
// setuid/setgid bits and extended attributes (file capabilities) dropped.
// Owners are kept when running as root (ids above 65535 become 65534).
Result<LayerReport> ApplyLayer(const std::string& rootfs_dir, const std::string& layer_path);

// "sha256:<hex>" of the uncompressed layer stream (its OCI diff id).
Result<std::string> LayerDiffId(const std::string& layer_path);

}  // namespace skiff::images
