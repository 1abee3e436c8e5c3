// The E2B control plane (docs/e2b.md#control-plane): create, connect, info,
// list, kill, pause and timeout, and the registration of each sandbox made
// for E2B (create, fork), over skiff's SandboxService and the E2B records
// of the SandboxBook. Error bodies are E2B's ({"code": <status>, ...}): the
// SDK reads the body's code.
#include <algorithm>
#include <set>

#include "base/text.h"
#include "e2b/api.h"
#include "e2b/control_wire.h"

namespace skiff::e2b {

using nlohmann::json;

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

  // network.allowPublicTraffic false: a port's traffic needs the traffic
  // token (docs/e2b.md#ports).
  bool private_traffic = false;
  if (auto it = b.find("network"); it != b.end() && !it->is_null()) {
    if (!it->is_object()) return Reply::Error(400, "network: expected an object");
    if (auto pt = it->find("allowPublicTraffic"); pt != it->end() && !pt->is_null()) {
      if (!pt->is_boolean()) return Reply::Error(400, "network.allowPublicTraffic: expected true or false");
      private_traffic = !pt->get<bool>();
    }
  }

  CreateSpec spec;
  // An image, or a snapshot (its image, isolation and shape are the
  // snapshot's): the rule of templates.cc.
  Template target = TemplateOf(svc, tpl);
  if (target.snapshot_id) {
    spec.snapshot = *target.snapshot_id;
  } else {
    spec.image = target.image;
    spec.isolation = options_.isolation;
  }
  spec.network = internet;
  // The lifetime is E2B's timeout, enforced by ExpireOnce; skiff's idle
  // reaper must not end the sandbox before it.
  spec.idle_timeout_secs = options_.max_timeout_secs + 60;
  spec.auto_resume = auto_resume;
  for (const auto& [k, v] : *env) spec.env.emplace_back(k, v);
  auto created = svc.Create(spec);
  if (!created.ok()) {
    Code code = created.error().code();
    if (code == Code::kS100) {
      std::string what = spec.snapshot ? "snapshot '" + *spec.snapshot : "image '" + spec.image;
      return Reply::Error(400, "template '" + tpl + "' (" + what + "'): " + created.error().message());
    }
    // The snapshot went between the lookup and the create: an unknown
    // template, as any other.
    if (code == Code::kS007) return Reply::Error(400, "template '" + tpl + "': " + created.error().message());
    return Failed(created.error());
  }
  // The image's services (docs/images.md#services), e.g. the code
  // interpreter's server: started and ready before the SDK gets the id, or
  // the sandbox is stopped and the create fails saying which and why.
  if (Status st = StartServices(svc, *created); !st.ok()) {
    (void)svc.Stop(created->sandbox_id, false);
    return Failed(st.error());
  }
  SandboxRecord r;
  r.sandbox_id = created->sandbox_id;
  r.template_id = tpl;
  r.alias = tpl;
  r.metadata = std::move(*metadata);
  r.env_vars = std::move(*env);
  r.internet = internet;
  r.auto_pause = auto_pause;
  r.auto_resume = auto_resume;
  if (private_traffic) r.traffic_token = RandomHex(32);
  return Reply::Json(201, SandboxJson(Register(svc, std::move(r), secs)));
}

Status Api::StartServices(SandboxService& svc, const CreateResult& created) {
  for (const ImageService& service : created.services) {
    proto::ProcStartRequest start;
    start.argv = service.command;
    start.tag = "service:" + service.name;
    auto started = svc.Process(created.sandbox_id, start);
    if (!started.ok())
      return Platform("e2b",
                      "image service '" + service.name + "' did not start: " + started.error().message());
    if (service.ready.empty()) continue;
    ExecSpec probe;
    probe.sandbox_id = created.sandbox_id;
    probe.argv = service.ready;
    probe.timeout_ms = uint64_t{service.ready_timeout_secs} * 1000;
    auto ready = svc.Exec(probe);
    if (!ready.ok() || ready->exit_code != 0) {
      std::string why = !ready.ok() ? ready.error().message()
                                    : "exit " + std::to_string(ready->exit_code) + ": " + ready->stderr_text;
      while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
      return Platform("e2b", "image service '" + service.name + "' was not ready within " +
                                 std::to_string(service.ready_timeout_secs) + " s (" + why + ")");
    }
  }
  return OkStatus();
}

SandboxRecord Api::Register(SandboxService& svc, SandboxRecord r, uint64_t secs) {
  r.access_token = RandomHex(32);
  r.started_ms = NowUnixMillis();
  r.end_ms = r.started_ms + static_cast<int64_t>(secs) * 1000;
  for (const ListEntry& le : svc.List()) {
    if (le.sandbox_id != r.sandbox_id) continue;
    r.cpus = le.cpus;
    r.memory_mb = le.memory_mb;
  }
  book_.Add(r);
  return r;
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

Reply Api::Pause(SandboxService& svc, const std::string& id, const std::string& raw) {
  // {memory?: bool}: E2B may drop a paused sandbox's memory when false;
  // skiff keeps it either way (docs/e2b.md#differences).
  auto body = Body(raw);
  if (!body.ok()) return Failed(body.error());
  if (auto it = body->find("memory"); it != body->end() && !it->is_null() && !it->is_boolean())
    return Reply::Error(400, "memory: expected true or false");
  if (!Live(svc, id)) return Reply::Error(404, "sandbox " + id + " not found");
  Status st = svc.Pause(id);
  if (st.ok()) return Reply::Empty(204);
  // The SDK reads 409 as "already paused" (pause() then returns false).
  if (st.error().code() == Code::kS006) return Reply::Error(409, "sandbox " + id + " is already paused");
  if (st.error().code() == Code::kS002 || st.error().code() == Code::kS004)
    return Reply::Error(404, "sandbox " + id + " not found");
  return Failed(st.error());
}

Reply Api::Metrics(SandboxService& svc, const std::string& id) {
  if (!Live(svc, id)) return Reply::Error(404, "sandbox " + id + " not found");
  Result<SandboxMetrics> m = svc.Metrics(id);
  if (!m.ok()) {
    if (m.error().code() == Code::kS002 || m.error().code() == Code::kS004)
      return Reply::Error(404, "sandbox " + id + " not found");
    return Failed(m.error());
  }
  const ResourceUsage& u = m->usage;
  // E2B's SandboxMetric; skiff keeps no history, so the array holds the one
  // sample of now whatever start and end ask (docs/e2b.md#differences).
  json sample = {{"timestamp", Rfc3339Millis(m->timestamp_unix_ms)},
                 {"timestampUnix", m->timestamp_unix_ms / 1000},
                 {"cpuCount", u.cpu_count},
                 {"cpuUsedPct", u.cpu_used_pct},
                 {"memUsed", u.mem_used_bytes},
                 {"memTotal", u.mem_total_bytes},
                 {"memCache", 0},
                 {"diskUsed", u.disk_used_bytes},
                 {"diskTotal", u.disk_total_bytes}};
  return Reply::Json(200, json::array({std::move(sample)}));
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
  watchers_.RemoveSandbox(id);
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
  auto limit = PageLimit(req);
  if (!limit.ok()) return Failed(limit.error());
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
  size_t to = v2 ? std::min(match.size(), from + *limit) : match.size();
  for (size_t i = from; i < to; ++i)
    out.push_back(ListedJson(match[i], paused.count(match[i].sandbox_id) > 0));
  Reply r = Reply::Json(200, out);
  if (to < match.size()) r.headers.emplace_back("x-next-token", match[to].sandbox_id);
  return r;
}

}  // namespace skiff::e2b
