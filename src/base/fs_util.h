// Small host filesystem helpers shared by the backends and the image store.
#pragma once

#include <string>

#include "base/error.h"

namespace skiff {

// rm -rf that never follows a symlink (a link is removed, not its target).
// A missing path is not an error.
Status RemoveTree(const std::string& path);

}  // namespace skiff
