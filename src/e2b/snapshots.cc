// E2B's snapshot endpoints (docs/e2b.md#snapshots-and-fork) over skiff's
// snapshots (docs/snapshots.md): create from a sandbox
// (POST /sandboxes/{id}/snapshots), list (GET /snapshots) and delete
// (DELETE /templates/{templateID}, E2B's snapshots being templates). The
// caller's service scopes them to its tenant. A snapshot's E2B id is
// skiff's snapshot id; its name, when it has one, is its only entry in
// `names`; both work as a create's templateID.
#include <algorithm>

#include "base/text.h"
#include "e2b/api.h"
#include "e2b/control_wire.h"

namespace skiff::e2b {

namespace {

using nlohmann::json;

json SnapshotInfo(const SnapshotRecord& r) {
  json names = json::array();
  if (!r.name.empty()) names.push_back(r.name);
  return {{"snapshotID", r.snapshot_id}, {"names", std::move(names)}};
}

bool Names(const SnapshotRecord& r, const std::string& ref) {
  return r.snapshot_id == ref || (!r.name.empty() && r.name == ref);
}

}  // namespace

Reply Api::CreateSnapshot(SandboxService& svc, const std::string& id, const std::string& raw) {
  auto body = Body(raw);
  if (!body.ok()) return Failed(body.error());
  std::string name;
  if (auto it = body->find("name"); it != body->end() && !it->is_null()) {
    if (!it->is_string()) return Reply::Error(400, "name: expected a string");
    name = it->get<std::string>();
    if (!IsSnapshotRef(name))
      return Reply::Error(400, "name: 1 to " + std::to_string(kMaxSnapshotRef) +
                                   " letters, digits, '-', '_' and '.' (no team or tag qualifiers)");
    // A name that could be taken for an id, or that a create would read as
    // an image, would never reach the snapshot.
    if (CanonicalUuid(name)) return Reply::Error(400, "name: must not be a UUID");
    if (NamesImage(svc, name))
      return Reply::Error(400, "name: '" + name + "' names an image (a template); choose another name");
  }
  if (!Live(svc, id)) return Reply::Error(404, "sandbox " + id + " not found");
  auto saved = svc.Snapshot(id, name);
  if (!saved.ok()) {
    Code code = saved.error().code();
    if (code == Code::kS002 || code == Code::kS004) return Reply::Error(404, "sandbox " + id + " not found");
    return Failed(saved.error());
  }
  return Reply::Json(201, SnapshotInfo(*saved));
}

Reply Api::ListSnapshots(SandboxService& svc, const Request& req) {
  auto limit = PageLimit(req);
  if (!limit.ok()) return Failed(limit.error());
  std::string source = req.Query("sandboxID");
  std::string name = req.Query("name");
  if (!name.empty() && !IsSnapshotRef(name))
    return Reply::Error(400, "name: a snapshot's id or name (no team or tag qualifiers)");
  // By creation time, then id (the store's order), so pages follow on.
  std::vector<SnapshotRecord> match = svc.ListSnapshots();
  std::erase_if(match, [&](const SnapshotRecord& r) {
    return (!source.empty() && r.source_sandbox_id != source) || (!name.empty() && !Names(r, name));
  });
  size_t from = 0;
  if (std::string tok = req.Query("nextToken"); !tok.empty()) {
    auto it = std::find_if(match.begin(), match.end(),
                           [&](const SnapshotRecord& r) { return r.snapshot_id == tok; });
    if (it == match.end()) return Reply::Error(400, "nextToken: unknown or expired");
    from = static_cast<size_t>(it - match.begin());
  }
  size_t to = std::min(match.size(), from + *limit);
  json out = json::array();
  for (size_t i = from; i < to; ++i) out.push_back(SnapshotInfo(match[i]));
  Reply r = Reply::Json(200, out);
  if (to < match.size()) r.headers.emplace_back("x-next-token", match[to].snapshot_id);
  return r;
}

Reply Api::DeleteSnapshot(SandboxService& svc, const std::string& ref) {
  // What cannot be a snapshot's id or name names none (the SDK's
  // deleteSnapshot then answers false).
  if (!IsSnapshotRef(ref)) return Reply::Error(404, "no snapshot has that id or name");
  // As a create would read it: an image's name is not a snapshot's.
  if (NamesImage(svc, ref))
    return Reply::Error(400,
                        "template '" + ref + "' is an image: only snapshots are deleted through this API");
  // Unknown (S007): 404, which the SDK reads as false. In use (S008: a
  // jail created from it reads its files for its whole life): 409.
  Status st = svc.DeleteSnapshot(ref);
  return st.ok() ? Reply::Empty(204) : Failed(st.error());
}

}  // namespace skiff::e2b
