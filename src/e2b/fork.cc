// E2B's fork (POST /sandboxes/{id}/fork, docs/e2b.md#snapshots-and-fork)
// over skiff's Fork (docs/snapshots.md#fork): `count` copies of a sandbox's
// current state, each booked as an E2B sandbox of its own (access token,
// envd routing, lifetime) with the source's template, metadata, env vars
// and lifecycle. skiff's fork is all or nothing, so a failure is the
// request's error, never a per-fork entry.
#include "e2b/api.h"
#include "e2b/control_wire.h"

namespace skiff::e2b {

namespace {

using nlohmann::json;

constexpr int64_t kMaxForks = 16;

}  // namespace

Reply Api::Fork(SandboxService& svc, const std::string& id, const std::string& raw) {
  auto body = Body(raw);
  if (!body.ok()) return Failed(body.error());
  auto timeout = Seconds(*body, "timeout");
  if (!timeout.ok()) return Failed(timeout.error());
  uint64_t secs = timeout->value_or(options_.fork_default_timeout_secs);
  if (secs > options_.max_timeout_secs)
    return Reply::Error(400, "timeout: at most " + std::to_string(options_.max_timeout_secs) + " seconds");
  uint32_t count = 1;
  if (auto it = body->find("count"); it != body->end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > kMaxForks)
      return Reply::Error(400, "count: expected a whole number from 1 to " + std::to_string(kMaxForks));
    count = static_cast<uint32_t>(it->get<int64_t>());
  }
  // E2B's SDK reads this 404 from the HTTP status, not the body.
  auto source = Live(svc, id);
  if (!source) return Reply::Error(404, "sandbox " + id + " not found");
  auto made = svc.Fork(id, count);
  if (!made.ok()) {
    Code code = made.error().code();
    if (code == Code::kS002 || code == Code::kS004) return Reply::Error(404, "sandbox " + id + " not found");
    return Failed(made.error());
  }
  json out = json::array();
  for (const CreateResult& c : *made) {
    SandboxRecord r;
    r.sandbox_id = c.sandbox_id;
    r.template_id = source->template_id;
    r.alias = source->alias;
    r.metadata = source->metadata;
    r.env_vars = source->env_vars;
    r.internet = source->internet;
    r.auto_pause = source->auto_pause;
    r.auto_resume = source->auto_resume;
    out.push_back({{"sandbox", SandboxJson(Register(svc, std::move(r), secs))}});
  }
  return Reply::Json(201, out);
}

}  // namespace skiff::e2b
