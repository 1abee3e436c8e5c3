// envd's FilesystemEvent (docs/e2b.md#filesystem) of one fs.watch change,
// as WatchDir streams it and GetWatcherEvents answers it: the name
// relative to the watched directory, the type, and with `include_entry`
// the entry as it is now (none for a remove or a rename, or for an entry
// already gone again).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "protocol/fs_watch_messages.h"
#include "sandbox/service.h"

namespace skiff::e2b {

nlohmann::json FilesystemEvent(SandboxService& svc, const std::string& sandbox_id, const std::string& dir,
                               bool include_entry, const proto::FsWatchEvent& e);

}  // namespace skiff::e2b
