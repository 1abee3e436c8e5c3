// Parent directories of a path being created (fs.mkdir, fs.write):
// checking that one exists, or creating the missing ones. Paths are
// followed (docs/api.md#filesystem-rules-sandboxfs); errors are the spec's typed fs errors.
#pragma once

#include <cstdint>
#include <string>

#include "base/error.h"

namespace skiff::agent {

// Creates every missing directory of `path` (0755), the leaf with leaf_mode.
// Returns whether the leaf was created.
Result<bool> MkdirAll(const std::string& path, uint32_t leaf_mode);

// S211 "parent directory not found", with the fix {"parents": true}.
Error MissingParent(const std::string& parent);

// Checks the parent of `path` for mkdir/write with parents:false.
Status CheckParent(const std::string& path);

}  // namespace skiff::agent
