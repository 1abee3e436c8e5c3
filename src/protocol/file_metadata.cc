#include "protocol/file_metadata.h"

#include "protocol/message_fields.h"

namespace skiff::proto {

namespace {

bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

}  // namespace

bool IsMetadataKey(std::string_view key) {
  if (key.empty() || key.size() > FileMetadataLimits::kMaxKeyBytes) return false;
  for (char c : key)
    if (!IsTokenChar(c)) return false;
  return true;
}

bool IsMetadataValue(std::string_view value) {
  if (value.size() > FileMetadataLimits::kMaxValueBytes) return false;
  for (char c : value)
    if (c < 0x20 || c > 0x7e) return false;
  return true;
}

Status CheckMetadata(const FileMetadata& m) {
  using L = FileMetadataLimits;
  if (m.size() > L::kMaxEntries)
    return Error(Code::kS210, "metadata: more than " + std::to_string(L::kMaxEntries) + " entries");
  size_t total = 0;
  for (const auto& [k, v] : m) {
    if (!IsMetadataKey(k))
      return Error(Code::kS210, "metadata: a key must be 1 to " + std::to_string(L::kMaxKeyBytes) +
                                    " HTTP token characters: " + k.substr(0, L::kMaxKeyBytes));
    if (!IsMetadataValue(v))
      return Error(Code::kS210, "metadata: the value of " + k + " must be at most " +
                                    std::to_string(L::kMaxValueBytes) + " bytes of printable ASCII");
    total += k.size() + v.size();
  }
  if (total > L::kMaxTotalBytes)
    return Error(Code::kS210,
                 "metadata: keys and values together exceed " + std::to_string(L::kMaxTotalBytes) + " bytes");
  return OkStatus();
}

nlohmann::json MetadataToJson(const FileMetadata& m) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

Result<FileMetadata> MetadataFromJson(const nlohmann::json& obj, const char* key) {
  FileMetadata m;
  if (field::Missing(obj, key)) return m;
  const nlohmann::json& v = obj.at(key);
  if (!v.is_object()) return InvalidRequest(std::string(key) + ": expected an object");
  // Checked before copying, so a hostile peer cannot make us build a big map.
  if (v.size() > FileMetadataLimits::kMaxEntries)
    return Error(Code::kS210,
                 "metadata: more than " + std::to_string(FileMetadataLimits::kMaxEntries) + " entries");
  for (const auto& [k, val] : v.items()) {
    if (!val.is_string()) return InvalidRequest(std::string(key) + "." + k + ": expected a string");
    m.emplace(k, val.get<std::string>());
  }
  SKIFF_RETURN_IF_ERROR(CheckMetadata(m));
  return m;
}

}  // namespace skiff::proto
