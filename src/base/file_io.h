// Whole-file host I/O, written once: read a bounded file, write one, write
// one atomically, create a directory path. Used by the daemon side only for
// files it owns (state, caches, cgroup and /proc knobs); a sandbox's files are
// only ever reached through its agent.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "base/error.h"

namespace skiff {

enum class Links { kRefuse, kFollow };

// The whole file, refusing anything longer than `max` bytes (S300
// "read(path): EFBIG") and, unless `links` is kFollow, a symlink as the last
// component (O_NOFOLLOW: ELOOP). kFollow is for the daemon's own files that
// an installation may link (the agent binary).
Result<std::string> ReadFile(const std::string& path, size_t max = size_t{8} << 20,
                             Links links = Links::kRefuse);

// The last `max` bytes of a file (all of it when shorter): the end of a log
// for an error message. Like ReadFile, a symlink as the last component is
// refused (ELOOP).
Result<std::string> ReadFileTail(const std::string& path, size_t max);

// Writes `data` to an existing file, or creates it with `mode`, truncating
// it first (cgroup and /proc knobs, whose write is the whole operation).
Status WriteFile(const std::string& path, std::string_view data, mode_t mode = 0644);

// Writes `value` to an existing kernel control file (a cgroup knob,
// uid_map, a /proc setting) in one write(2): such a file takes a value whole
// or refuses it, so a short write is an error (EIO). Never creates the file.
// The error names the file and the value.
Status WriteKnob(const std::string& path, std::string_view value);

// Writes through a temporary file in the same directory, fsyncs it and
// renames it over `path`: a reader sees the old content or the new, never a
// part. The temporary is removed on failure.
Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode = 0644);

// Writes all of `data` to `fd`, retrying short writes and EINTR; `what`
// names the object in the error.
Status WriteAll(int fd, std::string_view data, std::string_view what);

// mkdir -p: creates each missing component with `mode` (existing ones are
// left as they are). A component that exists as a non-directory is S300
// ENOTDIR; with Links::kRefuse so is one that is a symlink (a path inside a
// tree someone else shaped, where a link could point the caller elsewhere).
Status MakeDirs(const std::string& path, mode_t mode = 0755, Links links = Links::kFollow);

// MakeDirs, then the last component gets exactly `mode` (whatever the umask,
// and also when it existed): a directory whose mode is a decision (a store
// root others may traverse but not list).
Status MakeDirsWithMode(const std::string& path, mode_t mode);

}  // namespace skiff
