// envd's filesystem.Filesystem service (docs/e2b.md#filesystem) over
// skiff's fs operations: Stat, ListDir (to a depth, in full-path order),
// MakeDir, Move and Remove, answering E2B's EntryInfo; the Python SDK's
// polled watchers (CreateWatcher, GetWatcherEvents, RemoveWatcher) over
// polled_watchers.h. WatchDir streams (envd_watch.cc).
#include <algorithm>

#include "base/text.h"
#include "e2b/api.h"
#include "e2b/connect_envelope.h"
#include "e2b/entry_info.h"
#include "e2b/proto_json.h"

namespace skiff::e2b {

namespace {

using nlohmann::json;

// ListDir's bound: entries across every level walked.
constexpr size_t kMaxListed = 100000;

Reply UnaryError(const Error& e) {
  ConnectCode c = ConnectCodeOf(e);
  return Reply::Json(ConnectHttpStatus(c), ConnectErrorBody(c, e.message()));
}

Result<proto::FsEntry> Stat(SandboxService& svc, const std::string& id, const std::string& path) {
  auto r = svc.Fs(id, proto::FsStatRequest{path});
  if (!r.ok()) return r.error();
  return proto::FsEntry::FromJson(*r);
}

Result<std::string> PathOf(const Api::Envd& e, const json& msg, std::string_view field) {
  auto p = OptString(msg, field);
  if (!p.ok()) return p.error();
  if (!*p || (*p)->empty()) return InvalidRequest(std::string(field) + ": required");
  return e.Resolve(**p);
}

}  // namespace

Reply Api::FilesystemRpc(const Envd& e, const std::string& method, const std::string& body) {
  const std::string& id = e.record.sandbox_id;
  auto msg = ParseMessage(body);
  if (!msg.ok()) return UnaryError(msg.error());

  if (method == "Stat") {
    auto path = PathOf(e, *msg, "path");
    if (!path.ok()) return UnaryError(path.error());
    auto st = Stat(all_, id, *path);
    if (!st.ok()) return UnaryError(st.error());
    return Reply::Json(200, {{"entry", EntryInfo(*st, *path)}});
  }

  if (method == "ListDir") {
    auto path = PathOf(e, *msg, "path");
    if (!path.ok()) return UnaryError(path.error());
    auto depth = OptUint(*msg, "depth", 1u << 20);
    if (!depth.ok()) return UnaryError(depth.error());
    uint64_t max_depth = depth->value_or(1) == 0 ? 1 : depth->value_or(1);
    auto st = Stat(all_, id, *path);
    if (!st.ok()) return UnaryError(st.error());
    if (!st->is_dir) return UnaryError(InvalidRequest("path is not a directory: " + *path));
    std::vector<std::pair<std::string, json>> found;
    std::vector<std::pair<std::string, uint64_t>> dirs = {{*path, 1}};
    while (!dirs.empty()) {
      auto [dir, level] = dirs.back();
      dirs.pop_back();
      auto ls = all_.Fs(id, proto::FsLsRequest{dir});
      if (!ls.ok()) {
        if (dir == *path) return UnaryError(ls.error());
        continue;  // vanished or unreadable below the top: skipped, as a walk does
      }
      auto list = proto::FsLsResult::FromJson(*ls);
      if (!list.ok()) return UnaryError(list.error());
      for (const proto::FsEntry& f : list->entries) {
        std::string full = JoinPath(dir, f.name);
        found.emplace_back(full, EntryInfo(f, full));
        if (found.size() > kMaxListed)
          return UnaryError(
              Error(Code::kS400, "more than " + std::to_string(kMaxListed) + " entries; list less deep"));
        // Symlinks are listed, never followed.
        if (f.is_dir && !f.is_symlink && level < max_depth) dirs.emplace_back(full, level + 1);
      }
    }
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    json entries = json::array();
    for (auto& [p, entry] : found) entries.push_back(std::move(entry));
    return Reply::Json(200, {{"entries", entries}});
  }

  if (method == "MakeDir") {
    auto path = PathOf(e, *msg, "path");
    if (!path.ok()) return UnaryError(path.error());
    proto::FsMkdirRequest mk;
    mk.path = *path;
    mk.parents = true;
    auto r = all_.Fs(id, mk);
    if (!r.ok()) return UnaryError(r.error());
    if (!r->value("created", false))
      return UnaryError(Error(Code::kS213, "directory already exists: " + *path));
    auto st = Stat(all_, id, *path);
    if (!st.ok()) return UnaryError(st.error());
    return Reply::Json(200, {{"entry", EntryInfo(*st, *path)}});
  }

  if (method == "Move") {
    auto src = PathOf(e, *msg, "source");
    if (!src.ok()) return UnaryError(src.error());
    auto dst = PathOf(e, *msg, "destination");
    if (!dst.ok()) return UnaryError(dst.error());
    // Like a rename: an existing destination is replaced.
    auto r = all_.Fs(id, proto::FsMvRequest{*src, *dst, true});
    if (!r.ok()) return UnaryError(r.error());
    auto st = Stat(all_, id, *dst);
    if (!st.ok()) return UnaryError(st.error());
    return Reply::Json(200, {{"entry", EntryInfo(*st, *dst)}});
  }

  // The Python SDK's polled watchers (polled_watchers.h).
  if (method == "CreateWatcher") {
    auto path = PathOf(e, *msg, "path");
    if (!path.ok()) return UnaryError(path.error());
    auto recursive = OptBool(*msg, "recursive");
    if (!recursive.ok()) return UnaryError(recursive.error());
    auto include_entry = OptBool(*msg, "includeEntry", "include_entry");
    if (!include_entry.ok()) return UnaryError(include_entry.error());
    // allowNetworkMounts: a sandbox has no network mounts to refuse.
    if (auto nm = OptBool(*msg, "allowNetworkMounts", "allow_network_mounts"); !nm.ok())
      return UnaryError(nm.error());
    proto::FsWatchRequest watch;
    watch.path = *path;
    watch.recursive = recursive->value_or(false);
    auto wid = watchers_.Create(id, watch, include_entry->value_or(false), MonotonicMillis());
    if (!wid.ok()) return UnaryError(wid.error());
    return Reply::Json(200, {{"watcherId", *wid}});
  }
  if (method == "GetWatcherEvents" || method == "RemoveWatcher") {
    auto wid = OptString(*msg, "watcherId", "watcher_id");
    if (!wid.ok()) return UnaryError(wid.error());
    if (!*wid || (*wid)->empty()) return UnaryError(InvalidRequest("watcherId: required"));
    if (method == "RemoveWatcher") {
      Status st = watchers_.Remove(id, **wid);
      if (!st.ok()) return UnaryError(st.error());
      return Reply::Json(200, json::object());
    }
    auto events = watchers_.Events(id, **wid, MonotonicMillis());
    if (!events.ok()) return UnaryError(events.error());
    json list = json::array();
    for (auto& ev : *events) list.push_back(std::move(ev));
    return Reply::Json(200, {{"events", list}});
  }

  if (method == "Remove") {
    auto path = PathOf(e, *msg, "path");
    if (!path.ok()) return UnaryError(path.error());
    auto r = all_.Fs(id, proto::FsRmRequest{*path, true});
    // Like RemoveAll: a path that is not there is already removed.
    if (!r.ok() && r.error().code() != Code::kS211) return UnaryError(r.error());
    return Reply::Json(200, json::object());
  }

  return UnaryError(Error(
      Code::kS219, "filesystem." + method + " is not supported by skiff yet (docs/e2b.md#differences)"));
}

}  // namespace skiff::e2b
