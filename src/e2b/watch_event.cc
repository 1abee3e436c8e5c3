#include "e2b/watch_event.h"

#include "e2b/entry_info.h"

namespace skiff::e2b {

namespace {

const char* EventType(proto::FsWatchChange c) {
  switch (c) {
    case proto::FsWatchChange::kCreate:
      return "EVENT_TYPE_CREATE";
    case proto::FsWatchChange::kWrite:
      return "EVENT_TYPE_WRITE";
    case proto::FsWatchChange::kRemove:
      return "EVENT_TYPE_REMOVE";
    case proto::FsWatchChange::kRename:
      return "EVENT_TYPE_RENAME";
    case proto::FsWatchChange::kChmod:
      return "EVENT_TYPE_CHMOD";
  }
  return "EVENT_TYPE_UNSPECIFIED";
}

}  // namespace

nlohmann::json FilesystemEvent(SandboxService& svc, const std::string& sandbox_id, const std::string& dir,
                               bool include_entry, const proto::FsWatchEvent& e) {
  nlohmann::json fs = {{"name", e.name}, {"type", EventType(e.change)}};
  if (include_entry && e.change != proto::FsWatchChange::kRemove &&
      e.change != proto::FsWatchChange::kRename) {
    std::string path = JoinPath(dir, e.name);
    if (auto st = svc.Fs(sandbox_id, proto::FsStatRequest{path}); st.ok())
      if (auto entry = proto::FsEntry::FromJson(*st); entry.ok()) fs["entry"] = EntryInfo(*entry, path);
  }
  return fs;
}

}  // namespace skiff::e2b
