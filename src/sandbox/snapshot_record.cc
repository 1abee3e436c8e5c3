#include "sandbox/snapshot_record.h"

namespace skiff {
namespace {

using nlohmann::json;

bool IsUuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

json SnapshotRecord::ToJson() const {
  return json{{"snapshot_id", snapshot_id},
              {"name", name.empty() ? json(nullptr) : json(name)},
              {"source_sandbox_id", source_sandbox_id},
              {"image", image},
              {"isolation", isolation},
              {"cpus", cpus},
              {"memory_mb", memory_mb},
              {"contents", memory ? "memory+disk" : "disk"},
              {"size_bytes", size_bytes},
              {"created_at", created_unix_ms / 1000}};
}

json SnapshotRecord::ToRecordJson() const {
  json j = ToJson();
  j["created_unix_ms"] = created_unix_ms;
  j["tenant"] = tenant;
  j["internal"] = internal;
  return j;
}

Result<SnapshotRecord> SnapshotRecord::FromRecordJson(const json& j) {
  SnapshotRecord r;
  try {
    r.snapshot_id = j.at("snapshot_id").get<std::string>();
    if (j.at("name").is_string()) r.name = j.at("name").get<std::string>();
    r.source_sandbox_id = j.at("source_sandbox_id").get<std::string>();
    r.image = j.at("image").get<std::string>();
    r.isolation = j.at("isolation").get<std::string>();
    r.cpus = j.at("cpus").get<uint32_t>();
    r.memory_mb = j.at("memory_mb").get<uint32_t>();
    r.memory = j.at("contents").get<std::string>() == "memory+disk";
    r.size_bytes = j.at("size_bytes").get<uint64_t>();
    r.created_unix_ms = j.at("created_unix_ms").get<int64_t>();
    r.tenant = j.at("tenant").get<std::string>();
    r.internal = j.at("internal").get<bool>();
  } catch (const std::exception& e) {
    return Platform("snapshot", std::string("malformed snapshot record: ") + e.what());
  }
  if (!IsUuid(r.snapshot_id) || (r.isolation != "jail" && r.isolation != "microvm"))
    return Platform("snapshot", "malformed snapshot record");
  return r;
}

}  // namespace skiff
