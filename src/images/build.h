// Installing images into the store: preset builds (mmdebstrap from Debian
// packages), OCI archive import and registry pull.
#pragma once

#include <functional>
#include <string>

#include "base/error.h"
#include "images/store.h"

namespace skiff::images {

// Receives human-readable progress lines (mmdebstrap's output, steps).
using ProgressFn = std::function<void(const std::string&)>;

// Builds preset `name` (python | node | base) unless the store already has
// the build of its current recipe; either way points current/<name> at it
// and makes sure its block image exists (best effort). Concurrent callers
// build once (flock); a failed build leaves nothing behind. Needs root
// (rootfs files stay owned by uid 0, as mmdebstrap creates them).
Result<ImageMeta> BuildPreset(const Store& store, const std::string& name, const ProgressFn& progress = {});
// Same, in the default store (SKIFF_IMAGES_DIR, else <data dir>/images).
Result<ImageMeta> BuildPreset(const std::string& name, const ProgressFn& progress = {});

// Imports a `docker save` archive or an OCI image-layout tarball (any
// compression libarchive reads) as catalog name `name`. The store key is the
// SHA-256 of the image config; every layer is checked against the config's
// rootfs.diff_ids and every OCI blob against its digest. Hostile entries
// (absolute paths are made relative; `..`, paths through symlinks, hard
// links leaving the tree, device nodes) are refused or neutralised;
// setuid/setgid bits and extended attributes are dropped.
Result<ImageMeta> ImportArchive(const Store& store, const std::string& name, const std::string& path,
                                const ProgressFn& progress = {});
Result<ImageMeta> ImportArchive(const std::string& name, const std::string& path,
                                const ProgressFn& progress = {});

// Pulls `ref` ([registry/]repository[:tag|@sha256:…]; no registry means
// Docker Hub) with the distribution API v2: anonymous or bearer-token auth,
// manifest lists resolved to linux/amd64, every manifest fetched by digest
// and every blob checked against its digest, transient failures retried.
// Loopback registries (localhost, 127.0.0.1, [::1]) are spoken to over
// plain HTTP, every other over HTTPS. Installs like ImportArchive, so a
// pulled and an imported copy of one image share a store entry.
Result<ImageMeta> Pull(const Store& store, const std::string& name, const std::string& ref,
                       const ProgressFn& progress = {});

// A registry reference, normalised.
struct ImageRef {
  std::string host;       // registry host[:port] as contacted
  std::string repo;       // e.g. "library/debian"
  std::string reference;  // tag or "sha256:<hex>"
  std::string scheme;     // "http" for loopback registries, "https" otherwise
};
// S001 for malformed references (bad characters, `..`, non-sha256 digests).
Result<ImageRef> ParseImageRef(const std::string& ref);

// Whether a custom_images value names a local archive (an absolute or
// ./relative path, or a file ending in .tar/.tar.gz/.tgz/.tar.zst/.tar.xz)
// rather than a registry reference.
bool IsArchiveSource(const std::string& source);

}  // namespace skiff::images
