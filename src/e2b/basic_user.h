// The user an envd request of the E2B API acts as: envd's user selection
// by a Basic authorization header (docs/e2b.md#authentication).
#pragma once

#include <string>
#include <string_view>

#include "base/error.h"

namespace skiff::e2b {

// The user an `Authorization: Basic base64("user:")` header names, "" when
// there is none; an error message for a malformed one.
Result<std::string> BasicUser(const std::string& authorization);

// A user name envd accepts ("" for the default): at most 32 of
// [A-Za-z0-9_.-], so nothing in it can mean more than a name.
bool IsUserName(std::string_view user);

}  // namespace skiff::e2b
