#include "protocol/message_fields.h"

namespace skiff::proto::field {

using nlohmann::json;

namespace {

Error Bad(const char* key, std::string_view what) {
  return InvalidRequest(std::string(key) + ": " + std::string(what));
}

}  // namespace

Status RequireObject(const json& j, std::string_view what) {
  if (!j.is_object()) return InvalidRequest(std::string(what) + " is not a JSON object");
  return OkStatus();
}

Status RequireOp(const json& j, std::string_view op) {
  SKIFF_RETURN_IF_ERROR(RequireObject(j, "request"));
  auto it = j.find("op");
  if (it == j.end() || !it->is_string()) return InvalidRequest("op: expected a string");
  if (it->get_ref<const std::string&>() != op)
    return InvalidRequest("op: expected \"" + std::string(op) + "\", got " + it->dump());
  return OkStatus();
}

bool Missing(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null();
}

Result<std::string> Path(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return Bad(key, "expected a string");
  std::string p = it->get<std::string>();
  if (p.empty()) return Bad(key, "must not be empty");
  if (p.find('\0') != std::string::npos) return Bad(key, "contains NUL");
  return p;
}

Result<std::string> String(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return Bad(key, "expected a string");
  return it->get<std::string>();
}

Result<std::optional<std::string>> OptString(const json& obj, const char* key) {
  if (Missing(obj, key)) return std::optional<std::string>();
  const json& v = obj.at(key);
  if (!v.is_string()) return Bad(key, "expected a string");
  return std::optional<std::string>(v.get<std::string>());
}

Result<bool> Bool(const json& obj, const char* key, bool def) {
  if (Missing(obj, key)) return def;
  const json& v = obj.at(key);
  if (!v.is_boolean()) return Bad(key, "expected a boolean");
  return v.get<bool>();
}

Result<bool> RequiredBool(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_boolean()) return Bad(key, "expected a boolean");
  return it->get<bool>();
}

Result<int64_t> Int(const json& obj, const char* key, int64_t def) {
  if (Missing(obj, key)) return def;
  const json& v = obj.at(key);
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    return u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
  }
  if (!v.is_number_integer()) return Bad(key, "expected an integer");
  return v.get<int64_t>();
}

Result<std::optional<int64_t>> OptInt(const json& obj, const char* key) {
  if (Missing(obj, key)) return std::optional<int64_t>();
  SKIFF_ASSIGN_OR_RETURN(int64_t v, Int(obj, key, 0));
  return std::optional<int64_t>(v);
}

Result<int64_t> IntIn(const json& obj, const char* key, int64_t lo, int64_t hi) {
  auto it = obj.find(key);
  auto bad = [&] {
    return Bad(key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  };
  if (it == obj.end() || it->is_null()) return bad();
  auto v = Int(obj, key, 0);
  if (!v.ok() || *v < lo || *v > hi) return bad();
  return *v;
}

Result<std::vector<std::string>> Strings(const json& obj, const char* key) {
  if (Missing(obj, key)) return std::vector<std::string>();
  return RequiredStrings(obj, key);
}

Result<std::vector<std::string>> RequiredStrings(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_array()) return Bad(key, "expected an array of strings");
  std::vector<std::string> out;
  out.reserve(it->size());
  for (const auto& v : *it) {
    if (!v.is_string()) return Bad(key, "expected an array of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

Result<const json*> Array(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_array()) return Bad(key, "expected an array");
  return &*it;
}

std::optional<uint32_t> ModeFromJson(const json& v) {
  if (v.is_number_unsigned() || v.is_number_integer()) {
    int64_t m = v.get<int64_t>();
    if (m >= 0 && m <= 07777) return static_cast<uint32_t>(m);
  }
  return std::nullopt;
}

Result<uint32_t> Mode(const json& obj, const char* key, std::optional<uint32_t> def) {
  if (Missing(obj, key)) {
    if (def) return *def;
    return Bad(key, "required");
  }
  const json& v = obj.at(key);
  auto m = ModeFromJson(v);
  if (!m) return Error(Code::kS210, "invalid octal mode: " + v.dump());
  return *m;
}

Result<std::string> ModeText(const json& obj, const char* key) {
  SKIFF_ASSIGN_OR_RETURN(std::string m, String(obj, key));
  bool ok = m.size() == 4;
  for (char c : m) ok = ok && c >= '0' && c <= '7';
  if (!ok) return Bad(key, "expected four octal digits");
  return m;
}

Error AnswerError(std::string_view what, const Error& detail) {
  return Platform("sandbox", "agent sent a malformed " + std::string(what) + " (" + detail.message() + ")");
}

}  // namespace skiff::proto::field
