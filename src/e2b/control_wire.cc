#include "e2b/control_wire.h"

#include <cstdlib>

#include "base/text.h"

namespace skiff::e2b {

using nlohmann::json;

namespace {

constexpr const char* kEnvdVersion = "0.6.13";

}  // namespace

Result<json> Body(const std::string& body) {
  if (body.empty()) return json::object();
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidRequest("the body is not a JSON object");
  return j;
}

Result<std::map<std::string, std::string>> StringMap(const json& body, const char* key) {
  std::map<std::string, std::string> out;
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return out;
  if (!it->is_object()) return InvalidRequest(std::string(key) + ": expected an object of strings");
  if (it->size() > 256) return InvalidRequest(std::string(key) + ": at most 256 entries");
  for (auto& [k, v] : it->items()) {
    if (!v.is_string()) return InvalidRequest(std::string(key) + "." + k + ": expected a string");
    if (k.empty() || k.size() > 1024 || v.get_ref<const std::string&>().size() > 65536)
      return InvalidRequest(std::string(key) + "." + k + ": key or value too long");
    out[k] = v.get<std::string>();
  }
  return out;
}

Result<std::optional<uint64_t>> Seconds(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::optional<uint64_t>();
  if (!it->is_number_integer() || it->get<int64_t>() < 0)
    return InvalidRequest(std::string(key) + ": expected a whole number of seconds >= 0");
  return std::optional<uint64_t>(it->get<uint64_t>());
}

Result<size_t> PageLimit(const Request& req) {
  std::string l = req.Query("limit");
  if (l.empty()) return size_t{100};
  char* end = nullptr;
  unsigned long v = std::strtoul(l.c_str(), &end, 10);
  if (l[0] < '0' || l[0] > '9' || end == l.c_str() || *end != '\0' || v == 0 || v > 1000)
    return InvalidRequest("limit: expected 1..1000");
  return static_cast<size_t>(v);
}

Reply Failed(const Error& e) {
  switch (e.code()) {
    case Code::kS002:
    case Code::kS007:
      return Reply::Error(404, e.message());
    case Code::kS001:
    case Code::kS100:
    case Code::kS101:
      return Reply::Error(400, e.message());
    case Code::kS008:
      // A snapshot in use: a conflict, which the SDK raises as a
      // SandboxError with that status (401, 404, 429 and 503 mean other
      // things to it).
      return Reply::Error(409, e.message());
    case Code::kS003:
    case Code::kS400:
      return Reply::Error(429, e.message());
    default:
      return Reply::Error(500, e.message());
  }
}

json SandboxJson(const SandboxRecord& r) {
  return {{"sandboxID", r.sandbox_id},
          {"templateID", r.template_id},
          {"alias", r.alias},
          {"clientID", "skiff"},
          {"envdVersion", kEnvdVersion},
          {"envdAccessToken", r.access_token},
          {"trafficAccessToken", r.traffic_token.empty() ? json(nullptr) : json(r.traffic_token)},
          {"domain", nullptr}};
}

json ListedJson(const SandboxRecord& r, bool paused) {
  return {{"sandboxID", r.sandbox_id},
          {"templateID", r.template_id},
          {"alias", r.alias},
          {"clientID", "skiff"},
          {"metadata", r.metadata},
          {"startedAt", Rfc3339Millis(r.started_ms)},
          {"endAt", Rfc3339Millis(r.end_ms)},
          {"state", paused ? "paused" : "running"},
          {"cpuCount", r.cpus},
          {"memoryMB", r.memory_mb},
          {"diskSizeMB", 0},
          {"envdVersion", kEnvdVersion},
          {"allowInternetAccess", r.internet},
          {"volumeMounts", json::array()}};
}

}  // namespace skiff::e2b
