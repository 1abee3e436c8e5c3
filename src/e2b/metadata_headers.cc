#include "e2b/metadata_headers.h"

#include <cctype>

namespace skiff::e2b {

namespace {

constexpr std::string_view kPrefix = "x-metadata-";

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

Result<proto::FileMetadata> MetadataHeaders(const Headers& headers) {
  using L = proto::FileMetadataLimits;
  proto::FileMetadata out;
  for (const auto& [name, value] : headers) {
    if (name.size() < kPrefix.size() || Lower(name.substr(0, kPrefix.size())) != kPrefix) continue;
    std::string key = Lower(std::string_view(name).substr(kPrefix.size()));
    std::string shown = key.substr(0, L::kMaxKeyBytes);
    if (!proto::IsMetadataKey(key))
      return Error(Code::kS210, "metadata header X-Metadata-" + shown + ": the key must be 1 to " +
                                    std::to_string(L::kMaxKeyBytes) + " HTTP token characters");
    if (!proto::IsMetadataValue(value))
      return Error(Code::kS210, "metadata header X-Metadata-" + shown + ": the value must be at most " +
                                    std::to_string(L::kMaxValueBytes) + " bytes of printable ASCII");
    out[key] = value;
    if (out.size() > L::kMaxEntries)
      return Error(Code::kS210, "more than " + std::to_string(L::kMaxEntries) + " X-Metadata headers");
  }
  SKIFF_RETURN_IF_ERROR(proto::CheckMetadata(out));
  return out;
}

}  // namespace skiff::e2b
