// E2B's signed file URLs (docs/e2b.md#signed-urls): the SDK's
// downloadUrl()/uploadUrl() carry `signature=v1_<base64 sha256>` over the
// path, the operation, the user, the sandbox's access token and an optional
// expiry, and are fetched with no headers at all. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace skiff::e2b {

// "v1_" + unpadded base64 of sha256("path:operation:user:token[:expiry]").
// `operation` is "read" or "write"; `path` and `user` are the query values
// as the SDK put them in (unresolved).
std::string FileSignature(std::string_view path, std::string_view operation, std::string_view user,
                          std::string_view token, std::optional<int64_t> expiry);

}  // namespace skiff::e2b
