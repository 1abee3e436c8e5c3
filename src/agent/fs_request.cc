#include "agent/fs_request.h"

#include "agent/text_util.h"
#include "base/text.h"

namespace skiff::agent {
namespace {

using nlohmann::json;

Status CheckPath(const std::string& p, const char* key) {
  if (p.empty()) return InvalidRequest(std::string(key) + ": must not be empty");
  if (p.find('\0') != std::string::npos) return InvalidRequest(std::string(key) + ": contains NUL");
  return OkStatus();
}

}  // namespace

Error FsError(int err, std::string_view what) {
  Code c = CodeForErrno(err);
  std::string m(FsPrefix(c));
  m.append(what);
  if (c == Code::kS216) m.append(": ").append(ErrnoName(err));
  return Error(c, std::move(m));
}

Result<std::string> ReqPath(const json& req, const char* key) {
  if (!req.contains(key) || !req[key].is_string())
    return InvalidRequest(std::string(key) + ": expected a string");
  std::string p = req[key].get<std::string>();
  SKIFF_RETURN_IF_ERROR(CheckPath(p, key));
  return p;
}

Result<bool> ReqBool(const json& req, const char* key, bool def) {
  if (!req.contains(key) || req[key].is_null()) return def;
  if (!req[key].is_boolean()) return InvalidRequest(std::string(key) + ": expected a boolean");
  return req[key].get<bool>();
}

Result<int64_t> ReqInt(const json& req, const char* key, int64_t def) {
  if (!req.contains(key) || req[key].is_null()) return def;
  const auto& v = req[key];
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    return u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
  }
  if (!v.is_number_integer()) return InvalidRequest(std::string(key) + ": expected an integer");
  return v.get<int64_t>();
}

Result<std::vector<std::string>> ReqStrings(const json& req, const char* key) {
  std::vector<std::string> out;
  if (!req.contains(key) || req[key].is_null()) return out;
  if (!req[key].is_array()) return InvalidRequest(std::string(key) + ": expected an array of strings");
  for (const auto& v : req[key]) {
    if (!v.is_string()) return InvalidRequest(std::string(key) + ": expected an array of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

Result<uint32_t> ReqMode(const json& req, const char* key, std::optional<uint32_t> def) {
  if (!req.contains(key) || req[key].is_null()) {
    if (def) return *def;
    return InvalidRequest(std::string(key) + ": required");
  }
  auto m = ModeFromJson(req[key]);
  if (!m) return Error(Code::kS210, "invalid octal mode: " + req[key].dump());
  return *m;
}

}  // namespace skiff::agent
