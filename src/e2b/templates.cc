// What an E2B template ID names (docs/e2b.md#snapshots-and-fork). In order:
// an alias of the template table (its image), an image the catalog knows
// (itself), one of the caller's snapshots by id or name, and otherwise the
// name as an image name (the create then says whether it is one). An image
// wins over a snapshot of the same name; E2B's snapshot create refuses such
// names, so only a snapshot named through the native API can be shadowed.
#include "e2b/api.h"

namespace skiff::e2b {

bool Api::NamesImage(SandboxService& svc, const std::string& name) const {
  if (options_.templates.count(name)) return true;
  for (const CatalogEntry& e : svc.CatalogList())
    if (e.name == name) return true;
  return false;
}

Api::Template Api::TemplateOf(SandboxService& svc, const std::string& tpl) const {
  if (auto alias = options_.templates.find(tpl); alias != options_.templates.end())
    return {alias->second, {}};
  // The snapshots first: they are in memory, while listing the catalog
  // reads the image store.
  for (const SnapshotRecord& r : svc.ListSnapshots()) {
    if (r.snapshot_id != tpl && (r.name.empty() || r.name != tpl)) continue;
    if (NamesImage(svc, tpl)) break;
    return {{}, r.snapshot_id};
  }
  return {tpl, {}};
}

}  // namespace skiff::e2b
