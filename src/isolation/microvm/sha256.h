// SHA-256 (FIPS 180-4) of a file, for the microVM backend's cache keys
// (initramfs by agent binary). Kept here because isolation/ may not depend
// on images/.
#pragma once

#include <string>

#include "base/error.h"

namespace skiff::microvm {

// Lowercase hex digest of the bytes.
std::string Sha256Hex(std::string_view bytes);
// Lowercase hex digest of a file's content.
Result<std::string> Sha256File(const std::string& path);

}  // namespace skiff::microvm
