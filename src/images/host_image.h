// The `host` image's skeleton stamp. Building the skeleton reads some
// thousand /etc entries; a stamp file next to the skeletons names the last
// one built together with what every host path it was built from looked
// like (lstat: device, inode, mode, size, mtime, ctime). A later process
// whose paths all look the same uses that skeleton without reading /etc.
// Symlinks inside a copied directory are not listed: replacing or removing
// one changes the directory's own mtime and ctime.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace skiff::host_image {

// "<path>\t<dev>:<ino>:<mode>:<size>:<mtime ns>:<ctime ns>", or "<path>\t-"
// when lstat fails.
std::string StatLine(const std::string& path);

// The stamp for skeleton `hash` built from `watched`. Empty (write none)
// when a path cannot be represented or changed (ctime) at or after
// `changed_since_ns` (CLOCK_REALTIME ns): the scan may have read it before
// the change.
std::string MakeStamp(const std::string& hash, const std::vector<std::string>& watched,
                      int64_t changed_since_ns);

// The skeleton hash a stamp names when every listed path still looks as
// recorded; nullopt otherwise (malformed, stale, or listing nothing).
std::optional<std::string> StampedHash(const std::string& stamp);

}  // namespace skiff::host_image
