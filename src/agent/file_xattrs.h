// A file's metadata as its user.e2b.* extended attributes, or trusted.e2b.*
// where the filesystem keeps no user ones (protocol/file_metadata.h): set on
// a file being written, read for fs.stat and fs.ls. The sandbox's processes
// may set any attribute, so reading keeps only what the protocol allows:
// pairs that break its rules are left out, and reading stops at its limits.
#pragma once

#include <string>

#include "base/error.h"
#include "protocol/file_metadata.h"

namespace skiff::agent {

// Sets each pair as user.e2b.<key> on `fd`, or all of them as
// trusted.e2b.<key> when the filesystem refuses user attributes. One that
// keeps neither (or refuses this agent trusted ones: a jail's, in a user
// namespace) is S216 "... file metadata not supported ... (ENOTSUP)"; other
// failures are the fs errors of FsError. `path` names the file in messages.
Status WriteMetadata(int fd, const proto::FileMetadata& m, const std::string& path);

// The user.e2b.* and trusted.e2b.* attributes of `path` (not following a
// final symlink; a key under both shows its user value); empty when it has
// none or they cannot be read.
proto::FileMetadata ReadMetadata(const std::string& path);

}  // namespace skiff::agent
