#include "functions/snapshot_handlers.h"

#include "functions/decode.h"

namespace skiff::fn {

using nlohmann::json;

Result<json> HandleSnapshot(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(std::string id, ReadSandboxId(f));
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> name, f.OptString("name"));
  if (name) {
    SKIFF_RETURN_IF_ERROR(CheckSnapshotRef(*name, f.Path("name")));
    // A name that could be taken for an id would make lookups ambiguous.
    if (ParseSandboxId(*name).ok()) return InvalidRequest("field 'name': must not be a UUID");
  }
  SKIFF_ASSIGN_OR_RETURN(SnapshotRecord r, ctx.manager.Snapshot(id, name.value_or("")));
  return r.ToJson();
}

Result<json> HandleSnapshotList(const json&, CallContext& ctx) {
  json arr = json::array();
  for (const SnapshotRecord& r : ctx.manager.ListSnapshots()) arr.push_back(r.ToJson());
  return json{{"snapshots", std::move(arr)}};
}

Result<json> HandleSnapshotDelete(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(std::string ref, f.RequiredString("snapshot"));
  SKIFF_RETURN_IF_ERROR(CheckSnapshotRef(ref, f.Path("snapshot")));
  SKIFF_RETURN_IF_ERROR(ctx.manager.DeleteSnapshot(ref));
  return json{{"snapshot", ref}, {"deleted", true}};
}

Result<json> HandleFork(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(std::string id, ReadSandboxId(f));
  SKIFF_ASSIGN_OR_RETURN(std::optional<uint64_t> count, f.OptUint("count", 16));
  if (count && *count == 0) return InvalidRequest("field 'count': must be between 1 and 16");
  SKIFF_ASSIGN_OR_RETURN(std::vector<CreateResult> made,
                         ctx.manager.Fork(id, static_cast<uint32_t>(count.value_or(1))));
  json arr = json::array();
  for (const CreateResult& c : made)
    arr.push_back({{"sandbox_id", c.sandbox_id}, {"image", c.image}, {"isolation", c.isolation}});
  return json{{"sandbox_id", id}, {"sandboxes", std::move(arr)}};
}

}  // namespace skiff::fn
