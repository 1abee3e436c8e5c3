// Path and name helpers of the jail backend: checks for what becomes a path
// or a mount option, and a tree removal that stays on one mount (mkdir -p
// is base/file_io.h's MakeDirs).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "base/error.h"

namespace skiff::jail {

// Non-empty, at most `max` characters of [A-Za-z0-9._-], not "." or "..".
bool SafeName(const std::string& s, size_t max);

// Absolute, without "." or ".." components, and without ',' or ':' (which
// would split an overlay mount option).
bool CleanAbsolute(const std::string& p);

// rm -rf that never crosses into another mount.
void RemoveTree(const std::string& path);

}  // namespace skiff::jail
