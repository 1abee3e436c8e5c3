// The image store: one unpacked rootfs per image, content-addressed.
//
//   <root>/store/<digest>/rootfs/        the unpacked root filesystem
//   <root>/store/<digest>/image.json     metadata (env, workdir, user, source)
//   <root>/store/<digest>/rootfs.erofs   read-only block image (microVM), cached
//   <root>/current/<name> -> ../store/<digest>   one pointer per catalog name
//   <root>/tmp/<digest>.<random>/        builds in progress (never used)
//   <root>/locks/<digest>.lock           flock: one builder per digest
//   <root>/locks/<digest>.lease          flock: shared by every running sandbox
//                                        of the entry, exclusive for gc / rm
//
// <digest> is the SHA-256 of a preset's recipe, or of an OCI image's config
// blob (the image id, which covers every layer through rootfs.diff_ids).
// An entry exists under store/ only once complete: it is built in tmp/ and
// renamed into place. `current` pointers are replaced by renaming a fresh
// symlink over the old one.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/fs_util.h"
#include "base/unique_fd.h"
#include "images/image_policy.h"
#include "images/image_service.h"

namespace skiff::images {

struct ImageMeta {
  std::string name;    // catalog name it was installed as
  std::string digest;  // store key
  std::string kind;    // "preset" | "oci"
  std::string source;  // preset OCI-style ref, archive path or registry ref
  std::vector<std::string> env;
  std::string workdir;
  std::string user;
  std::vector<ImageService> services;  // presets only (recipe `services`)
  int64_t created_ms = 0;
  uint64_t build_ms = 0;
};

// A running sandbox's hold on a store entry: a shared flock on
// locks/<digest>.lease, released when this object (every copy) is gone or
// the holding process dies, however it dies.
struct ImageLease {
  std::string digest;
  UniqueFd fd;
};

struct GcReport {
  std::vector<std::string> removed;      // digests and temp dirs removed
  std::vector<std::string> kept_in_use;  // unreferenced, but a sandbox runs from it
  uint64_t bytes_freed = 0;
};

class Store {
 public:
  explicit Store(std::string root) : root_(std::move(root)) {}
  // policy.images_dir, else DefaultRoot().
  static Store ForPolicy(const ImagePolicy& policy);
  static std::string DefaultRoot();

  const std::string& root() const { return root_; }
  std::string EntryDir(const std::string& digest) const;
  std::string RootfsDir(const std::string& digest) const;
  std::string BlockImagePath(const std::string& digest, const std::string& fstype) const;

  // Creates the directory skeleton (0711: traversable, not listable).
  Status Init() const;

  // The metadata of a complete entry; nullopt when absent or incomplete.
  std::optional<ImageMeta> Read(const std::string& digest) const;
  // The digest `current/<name>` points to, if any.
  std::optional<std::string> Current(const std::string& name) const;
  // Points current/<name> at a complete entry (atomic rename of a symlink).
  Status SetCurrent(const std::string& name, const std::string& digest) const;
  Status RemoveCurrent(const std::string& name) const;
  std::vector<std::string> CurrentNames() const;

  // Takes the exclusive build lock of `digest` (blocks until free).
  Result<UniqueFd> Lock(const std::string& digest) const;
  // A fresh private directory under tmp/ for building `digest`.
  Result<std::string> MakeTemp(const std::string& digest) const;
  // Writes image.json into `tmp_dir` and renames it to store/<digest>. The
  // caller holds Lock(digest). If the entry already exists, `tmp_dir` is
  // removed and the existing entry kept.
  Status Commit(const std::string& tmp_dir, const ImageMeta& meta) const;

  // The read-only block image of an entry, built once (under the digest's
  // lock) and cached. fstype: "erofs" (default) or "ext4".
  Result<std::string> EnsureBlockImage(const std::string& digest, const std::string& fstype = "erofs") const;

  // Takes a shared lease on a complete entry (blocks only while a gc or rm
  // is deleting it). S300 when the entry is not complete once the lease is
  // held (it was just deleted): the caller resolves the name again.
  Result<ImageLease> Lease(const std::string& digest) const;
  // Whether any process holds a lease on `digest` right now.
  bool InUse(const std::string& digest) const;

  // Removes every store entry no current/ pointer references and no running
  // sandbox holds a lease on, and every abandoned temp dir (its builder's
  // lock is free). Entries in use are listed in `kept_in_use`.
  Result<GcReport> Gc() const;

  // `skiff image rm`: forgets current/<name> and deletes its entry when no
  // other name points to it. Refused (S300, nothing changed) while a running
  // sandbox holds a lease on the entry.
  Result<GcReport> Remove(const std::string& name) const;

 private:
  // Opens locks/<digest>.lease and flocks it with `op` (LOCK_SH, or
  // LOCK_EX | LOCK_NB). With LOCK_NB, an empty fd means another holder.
  Result<UniqueFd> LeaseFd(const std::string& digest, int op) const;
  // Under Lock(digest) and an exclusive lease: renames the entry away and
  // deletes it. Returns the bytes freed.
  Result<uint64_t> DeleteEntry(const std::string& digest) const;

  std::string root_;
};

// Recursively removes `path` without following symlinks. Missing is fine.
// Size in bytes of a tree (st_blocks based), not following symlinks.
uint64_t TreeBytes(const std::string& path);

// Runs argv (argv[0] looked up in PATH) with stdout+stderr piped to
// `on_line`, one call per line. Returns S300 with the tail of the output
// when it exits non-zero. `extra_env` entries ("K=V") are added.
Status RunLogged(const std::vector<std::string>& argv, const std::function<void(const std::string&)>& on_line,
                 const std::vector<std::string>& extra_env = {});

}  // namespace skiff::images
