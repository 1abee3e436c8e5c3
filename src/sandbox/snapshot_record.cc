#include "sandbox/snapshot_record.h"

#include <stdexcept>

#include "base/text.h"

namespace skiff {
namespace {

using nlohmann::json;

// The canonical form skiff writes: lowercase, hyphenated.
bool IsUuid(const std::string& s) { return CanonicalUuid(s) == s; }

// Bounds on what a record may hold: it is read back from disk.
constexpr size_t kMaxEnv = 4096;
constexpr size_t kMaxText = size_t{64} * 1024;

json SandboxJson(const HibernatedSandbox& h) {
  json env = json::array();
  for (const auto& [k, v] : h.env) env.push_back(json::array({k, v}));
  return json{{"sandbox_id", h.sandbox_id},
              {"name", h.name ? json(*h.name) : json(nullptr)},
              {"env", std::move(env)},
              {"idle_timeout_secs", h.idle_timeout_secs},
              {"pause_on_idle", h.pause_on_idle},
              {"hibernate_on_idle", h.hibernate_on_idle},
              {"auto_resume", h.auto_resume},
              {"created_unix_ms", h.created_unix_ms},
              {"network", h.network}};
}

// Throws (nlohmann's type errors, or std::invalid_argument) on anything malformed.
HibernatedSandbox SandboxFromJson(const json& j) {
  HibernatedSandbox h;
  h.sandbox_id = j.at("sandbox_id").get<std::string>();
  if (!IsUuid(h.sandbox_id)) throw std::invalid_argument("sandbox_id is not a UUID");
  if (!j.at("name").is_null()) {
    h.name = j.at("name").get<std::string>();
    if (h.name->size() > kMaxText) throw std::invalid_argument("name too long");
  }
  const json& env = j.at("env");
  if (!env.is_array() || env.size() > kMaxEnv) throw std::invalid_argument("env");
  for (const auto& kv : env) {
    if (!kv.is_array() || kv.size() != 2) throw std::invalid_argument("env entry");
    auto k = kv[0].get<std::string>(), v = kv[1].get<std::string>();
    if (k.size() > kMaxText || v.size() > kMaxText) throw std::invalid_argument("env entry too long");
    h.env.emplace_back(std::move(k), std::move(v));
  }
  h.idle_timeout_secs = j.at("idle_timeout_secs").get<uint64_t>();
  h.pause_on_idle = j.at("pause_on_idle").get<bool>();
  h.hibernate_on_idle = j.at("hibernate_on_idle").get<bool>();
  h.auto_resume = j.at("auto_resume").get<bool>();
  h.created_unix_ms = j.at("created_unix_ms").get<int64_t>();
  // Absent in records from before networked sandboxes could hibernate.
  if (auto net = j.find("network"); net != j.end()) h.network = net->get<bool>();
  return h;
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
              {"network", network},
              {"size_bytes", size_bytes},
              {"created_at", created_unix_ms / 1000}};
}

json SnapshotRecord::ToRecordJson() const {
  json j = ToJson();
  j["created_unix_ms"] = created_unix_ms;
  j["tenant"] = tenant;
  j["internal"] = internal;
  if (sandbox) j["sandbox"] = SandboxJson(*sandbox);
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
    // Absent in records from before networked VMs could be saved.
    if (auto net = j.find("network"); net != j.end()) r.network = net->get<bool>();
    r.size_bytes = j.at("size_bytes").get<uint64_t>();
    r.created_unix_ms = j.at("created_unix_ms").get<int64_t>();
    r.tenant = j.at("tenant").get<std::string>();
    r.internal = j.at("internal").get<bool>();
    if (j.contains("sandbox")) r.sandbox = SandboxFromJson(j.at("sandbox"));
  } catch (const std::exception& e) {
    return Platform("snapshot", std::string("malformed snapshot record: ") + e.what());
  }
  if (!IsUuid(r.snapshot_id) || (r.isolation != "jail" && r.isolation != "microvm") ||
      (r.sandbox && !r.internal))
    return Platform("snapshot", "malformed snapshot record");
  return r;
}

}  // namespace skiff
