// envd's EntryInfo (docs/e2b.md#filesystem) of a skiff FsEntry, as
// Filesystem.Stat, ListDir, MakeDir, Move and WatchDir's events carry it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "protocol/fs_messages.h"

namespace skiff::e2b {

// `path` is the entry's absolute path in the sandbox.
nlohmann::json EntryInfo(const proto::FsEntry& entry, const std::string& path);

// `name` below `dir` ("/" joins without a second slash).
std::string JoinPath(const std::string& dir, const std::string& name);

}  // namespace skiff::e2b
