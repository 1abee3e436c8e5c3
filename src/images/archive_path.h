// The path of an archive member, made relative to the archive's root.
#pragma once

#include <string>

namespace skiff::images {

// Resolves `path` ("./a//b/../c", "/etc/x") to its components below the
// archive's root, joined by '/' ("a/c", "etc/x"): a leading '/' and empty
// and "." components are dropped, ".." removes the component before it.
// The result is never absolute and has no "..", "." or empty component
// ("" is the root itself). A ".." that would leave the root sets *ok to
// false and returns "". Every other byte, NUL included, is part of a
// component, and there is no length limit: callers bound their input.
std::string NormalizeArchivePath(const std::string& path, bool* ok);

}  // namespace skiff::images
