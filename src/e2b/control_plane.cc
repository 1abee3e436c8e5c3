// The E2B control plane (docs/e2b.md#control-plane): create, connect, info,
// list, kill and timeout, over skiff's SandboxService and the E2B records
// of the SandboxBook. Error bodies are E2B's ({"code": <status>, ...}): the
// SDK reads the body's code.
#include <algorithm>
#include <set>

#include "base/text.h"
#include "e2b/api.h"

namespace skiff::e2b {

namespace {

using nlohmann::json;

constexpr const char* kEnvdVersion = "0.6.13";

// A string -> string map field, or an error naming it.
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

// An optional non-negative integer number of seconds.
Result<std::optional<uint64_t>> Seconds(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::optional<uint64_t>();
  if (!it->is_number_integer() || it->get<int64_t>() < 0)
    return InvalidRequest(std::string(key) + ": expected a whole number of seconds >= 0");
  return std::optional<uint64_t>(it->get<uint64_t>());
}

Result<json> Body(const std::string& body) {
  if (body.empty()) return json::object();
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidRequest("the body is not a JSON object");
  return j;
}

Reply Failed(const Error& e) {
  switch (e.code()) {
    case Code::kS002:
      return Reply::Error(404, e.message());
    case Code::kS001:
    case Code::kS100:
    case Code::kS101:
      return Reply::Error(400, e.message());
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
          {"trafficAccessToken", nullptr},
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

}  // namespace

std::optional<SandboxRecord> Api::Live(SandboxService& svc, const std::string& id) {
  auto rec = book_.Get(id);
  if (!rec) return std::nullopt;
  if (!svc.TenantOf(id)) {
    // Gone (stopped through another interface or reaped), or another
    // tenant's: either way not this caller's.
    if (!all_.TenantOf(id)) book_.Remove(id);
    return std::nullopt;
  }
  return rec;
}

Reply Api::Create(SandboxService& svc, const std::string& raw) {
  auto body = Body(raw);
  if (!body.ok()) return Failed(body.error());
  const json& b = *body;
  std::string tpl = "base";
  if (auto it = b.find("templateID"); it != b.end() && !it->is_null()) {
    if (!it->is_string() || it->get_ref<const std::string&>().empty())
      return Reply::Error(400, "templateID: expected a template name");
    tpl = it->get<std::string>();
  }
  auto metadata = StringMap(b, "metadata");
  if (!metadata.ok()) return Failed(metadata.error());
  auto env = StringMap(b, "envVars");
  if (!env.ok()) return Failed(env.error());
  auto timeout = Seconds(b, "timeout");
  if (!timeout.ok()) return Failed(timeout.error());
  uint64_t secs = timeout->value_or(options_.default_timeout_secs);
  if (secs > options_.max_timeout_secs)
    return Reply::Error(400, "timeout: at most " + std::to_string(options_.max_timeout_secs) + " seconds");
  bool internet = false;
  if (auto it = b.find("allow_internet_access"); it != b.end() && !it->is_null()) {
    if (!it->is_boolean()) return Reply::Error(400, "allow_internet_access: expected true or false");
    internet = it->get<bool>();
  }
  bool auto_pause = false;
  if (auto it = b.find("autoPause"); it != b.end() && !it->is_null()) {
    if (!it->is_boolean()) return Reply::Error(400, "autoPause: expected true or false");
    auto_pause = it->get<bool>();
  }
  // autoResume: {"enabled": bool}; a call through envd to a paused sandbox
  // then resumes it.
  bool auto_resume = false;
  if (auto it = b.find("autoResume"); it != b.end() && !it->is_null()) {
    if (!it->is_object()) return Reply::Error(400, "autoResume: expected an object {enabled}");
    auto en = it->find("enabled");
    if (en != it->end() && !en->is_null() && !en->is_boolean())
      return Reply::Error(400, "autoResume.enabled: expected true or false");
    auto_resume = en != it->end() && en->is_boolean() && en->get<bool>();
  }

  CreateSpec spec;
  auto alias = options_.templates.find(tpl);
  spec.image = alias == options_.templates.end() ? tpl : alias->second;
  spec.network = internet;
  spec.isolation = options_.isolation;
  // The lifetime is E2B's timeout, enforced by ExpireOnce; skiff's idle
  // reaper must not end the sandbox before it.
  spec.idle_timeout_secs = options_.max_timeout_secs + 60;
  spec.auto_resume = auto_resume;
  for (const auto& [k, v] : *env) spec.env.emplace_back(k, v);
  auto created = svc.Create(spec);
  if (!created.ok()) {
    if (created.error().code() == Code::kS100)
      return Reply::Error(
          400, "template '" + tpl + "' (image '" + spec.image + "'): " + created.error().message());
    return Failed(created.error());
  }
  SandboxRecord r;
  r.sandbox_id = created->sandbox_id;
  r.template_id = tpl;
  r.alias = tpl;
  r.metadata = std::move(*metadata);
  r.env_vars = std::move(*env);
  r.access_token = RandomHex(32);
  r.started_ms = NowUnixMillis();
  r.end_ms = r.started_ms + static_cast<int64_t>(secs) * 1000;
  r.internet = internet;
  r.auto_pause = auto_pause;
  r.auto_resume = auto_resume;
  for (const ListEntry& le : svc.List()) {
    if (le.sandbox_id != r.sandbox_id) continue;
    r.cpus = le.cpus;
    r.memory_mb = le.memory_mb;
  }
  json out = SandboxJson(r);
  book_.Add(std::move(r));
  return Reply::Json(201, out);
}

Reply Api::Connect(SandboxService& svc, const std::string& id, const std::string& raw) {
  auto body = Body(raw);
  if (!body.ok()) return Failed(body.error());
  auto timeout = Seconds(*body, "timeout");
  if (!timeout.ok()) return Failed(timeout.error());
  auto rec = Live(svc, id);
  if (!rec) return Reply::Error(404, "sandbox " + id + " not found");
  uint64_t secs = std::min(timeout->value_or(options_.default_timeout_secs), options_.max_timeout_secs);
  // A paused sandbox is resumed (201), with its processes, files, env vars
  // and access token as they were.
  int status = 200;
  if (IsPaused(svc, id)) {
    Status st = svc.Resume(id);
    if (!st.ok() && st.error().code() != Code::kS006) return Failed(st.error());
    if (st.ok()) status = 201;
  }
  // Connecting only ever extends the lifetime (a resume counts from now).
  book_.SetEnd(id, NowUnixMillis() + static_cast<int64_t>(secs) * 1000, status == 200);
  return Reply::Json(status, SandboxJson(*rec));
}

bool Api::IsPaused(SandboxService& svc, const std::string& id) {
  for (const ListEntry& e : svc.List())
    if (e.sandbox_id == id) return e.state == "paused";
  return false;
}

Reply Api::Pause(SandboxService& svc, const std::string& id) {
  if (!Live(svc, id)) return Reply::Error(404, "sandbox " + id + " not found");
  Status st = svc.Pause(id);
  if (st.ok()) return Reply::Empty(204);
  // The SDK reads 409 as "already paused" (pause() then returns false).
  if (st.error().code() == Code::kS006) return Reply::Error(409, "sandbox " + id + " is already paused");
  if (st.error().code() == Code::kS002 || st.error().code() == Code::kS004)
    return Reply::Error(404, "sandbox " + id + " not found");
  return Failed(st.error());
}

Reply Api::Info(SandboxService& svc, const std::string& id) {
  auto rec = Live(svc, id);
  if (!rec) return Reply::Error(404, "sandbox " + id + " not found");
  json d = ListedJson(*rec, IsPaused(svc, id));
  d["domain"] = nullptr;
  d["lifecycle"] = {{"onTimeout", rec->auto_pause ? "pause" : "kill"}, {"autoResume", rec->auto_resume}};
  return Reply::Json(200, d);
}

Reply Api::Kill(SandboxService& svc, const std::string& id) {
  if (!Live(svc, id)) return Reply::Error(404, "sandbox " + id + " not found");
  Status st = svc.Stop(id, true);
  book_.Remove(id);
  if (!st.ok() && st.error().code() != Code::kS002) return Failed(st.error());
  return Reply::Empty(204);
}

Reply Api::SetTimeout(SandboxService& svc, const std::string& id, const std::string& raw) {
  auto body = Body(raw);
  if (!body.ok()) return Failed(body.error());
  auto timeout = Seconds(*body, "timeout");
  if (!timeout.ok()) return Failed(timeout.error());
  if (!*timeout) return Reply::Error(400, "timeout: required");
  if (**timeout > options_.max_timeout_secs)
    return Reply::Error(400, "timeout: at most " + std::to_string(options_.max_timeout_secs) + " seconds");
  if (!Live(svc, id)) return Reply::Error(404, "sandbox " + id + " not found");
  // Unlike connect, this may shorten the lifetime.
  book_.SetEnd(id, NowUnixMillis() + static_cast<int64_t>(**timeout) * 1000, false);
  return Reply::Empty(204);
}

Reply Api::List(SandboxService& svc, const Request& req, bool v2) {
  // Filters: metadata (URL-encoded k=v pairs joined by &), state, limit,
  // nextToken (the id to continue from).
  std::map<std::string, std::string> want_meta;
  if (std::string m = req.Query("metadata"); !m.empty()) {
    size_t pos = 0;
    while (pos <= m.size()) {
      size_t amp = m.find('&', pos);
      std::string pair = m.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
      size_t eq = pair.find('=');
      if (!pair.empty()) {
        auto k = PercentDecode(pair.substr(0, eq));
        auto v = PercentDecode(eq == std::string::npos ? std::string() : pair.substr(eq + 1));
        if (!k || !v) return Reply::Error(400, "metadata: not URL-encoded key=value pairs");
        want_meta[*k] = *v;
      }
      if (amp == std::string::npos) break;
      pos = amp + 1;
    }
  }
  bool want_running = true, want_paused = true;
  if (std::string s = req.Query("state"); !s.empty()) {
    want_running = false;
    want_paused = false;
    size_t pos = 0;
    while (true) {
      size_t comma = s.find(',', pos);
      std::string st = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      if (st == "running") {
        want_running = true;
      } else if (st == "paused") {
        want_paused = true;
      } else {
        return Reply::Error(400, "state: expected running and/or paused, got '" + st + "'");
      }
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  size_t limit = 100;
  if (std::string l = req.Query("limit"); !l.empty()) {
    char* end = nullptr;
    unsigned long v = std::strtoul(l.c_str(), &end, 10);
    if (end == l.c_str() || *end != '\0' || v == 0 || v > 1000)
      return Reply::Error(400, "limit: expected 1..1000");
    limit = v;
  }
  std::set<std::string> paused;
  for (const ListEntry& e : svc.List())
    if (e.state == "paused") paused.insert(e.sandbox_id);
  std::vector<SandboxRecord> match;
  {
    for (SandboxRecord& r : book_.All()) {
      if (!Live(svc, r.sandbox_id)) continue;
      if (!(paused.count(r.sandbox_id) ? want_paused : want_running)) continue;
      bool ok = true;
      for (const auto& [k, v] : want_meta) {
        auto it = r.metadata.find(k);
        ok = ok && it != r.metadata.end() && it->second == v;
      }
      if (ok) match.push_back(std::move(r));
    }
  }
  size_t from = 0;
  if (std::string tok = req.Query("nextToken"); !tok.empty()) {
    auto it =
        std::find_if(match.begin(), match.end(), [&](const SandboxRecord& r) { return r.sandbox_id == tok; });
    if (it == match.end()) return Reply::Error(400, "nextToken: unknown or expired");
    from = static_cast<size_t>(it - match.begin());
  }
  json out = json::array();
  size_t to = v2 ? std::min(match.size(), from + limit) : match.size();
  for (size_t i = from; i < to; ++i)
    out.push_back(ListedJson(match[i], paused.count(match[i].sandbox_id) > 0));
  Reply r = Reply::Json(200, out);
  if (to < match.size()) r.headers.emplace_back("x-next-token", match[to].sandbox_id);
  return r;
}

}  // namespace skiff::e2b
