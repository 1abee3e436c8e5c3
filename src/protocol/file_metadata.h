// A file's metadata: short key/value pairs kept as the extended attributes
// `user.e2b.<key>` of the file inside the sandbox, or `trusted.e2b.<key>`
// where its filesystem keeps no user attributes (docs/e2b.md#file-metadata).
// fs.write carries the pairs to set; fs.stat and fs.ls answer them in each
// FsEntry. Both sides check them with the same rules, since a caller and
// the sandbox's own processes (which may set any attribute) are both
// untrusted: at most kMaxEntries pairs, keys 1..kMaxKeyBytes of HTTP token
// characters, values 0..kMaxValueBytes of printable ASCII, and all keys and
// values of one file together at most kMaxTotalBytes.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/error.h"

namespace skiff::proto {

using FileMetadata = std::map<std::string, std::string>;

struct FileMetadataLimits {
  static constexpr size_t kMaxEntries = 32;
  static constexpr size_t kMaxKeyBytes = 128;
  static constexpr size_t kMaxValueBytes = 1024;
  static constexpr size_t kMaxTotalBytes = 4096;
};

// The prefix of the extended attributes that hold metadata.
inline constexpr std::string_view kMetadataXattrPrefix = "user.e2b.";
// The same pairs on a filesystem that keeps no user attributes (tmpfs before
// Linux 6.6: a microVM guest's). They need CAP_SYS_ADMIN, which only the
// agent has: the sandbox's processes can neither see nor set them.
inline constexpr std::string_view kMetadataTrustedXattrPrefix = "trusted.e2b.";

// An HTTP token (RFC 9110 tchar): 1..kMaxKeyBytes of letters, digits and
// !#$%&'*+-.^_`|~.
bool IsMetadataKey(std::string_view key);
// 0..kMaxValueBytes of printable ASCII (0x20..0x7e).
bool IsMetadataValue(std::string_view value);
// Every key and value valid, and the counts and total within the limits;
// the error (S210) names the first offence.
Status CheckMetadata(const FileMetadata& m);

// {"key": "value", ...}.
nlohmann::json MetadataToJson(const FileMetadata& m);
// obj[key]: absent or null give an empty map; otherwise an object of
// strings that passes CheckMetadata (S210 when it does not, S001 for a
// wrong type).
Result<FileMetadata> MetadataFromJson(const nlohmann::json& obj, const char* key);

}  // namespace skiff::proto
