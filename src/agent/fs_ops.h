// The synchronous filesystem operations of the agent (docs/api.md#filesystem-rules-sandboxfs). Each takes
// the OPEN request and returns the RESULT JSON or a typed Error. fs.write and
// fs.read are streaming and live in the agent loop; their open/commit steps
// (atomic_write.h, OpenForRead) are here so they can be tested without the
// loop. ls/stat/mkdir/rm/mv/chmod and fs.read's open are in fs_ops.cc, grep in
// fs_grep.cc, sed in fs_sed.cc; the tree walks they share in fs_walk.h.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "agent/atomic_write.h"
#include "agent/fs_request.h"
#include "base/error.h"
#include "base/unique_fd.h"
#include "protocol/fs_messages.h"

namespace skiff::agent {

Result<nlohmann::json> FsLs(const nlohmann::json& req);
Result<nlohmann::json> FsStat(const nlohmann::json& req);
Result<nlohmann::json> FsMkdir(const nlohmann::json& req);
Result<nlohmann::json> FsRm(const nlohmann::json& req);
Result<nlohmann::json> FsMv(const nlohmann::json& req);
Result<nlohmann::json> FsChmod(const nlohmann::json& req);
Result<nlohmann::json> FsGrep(const nlohmann::json& req);
Result<nlohmann::json> FsSed(const nlohmann::json& req);

// The synchronous operation named `op` (the fs.* names of protocol/ops.h
// above), or nullptr: fs.write and fs.read are not among them.
using FsOpFn = Result<nlohmann::json> (*)(const nlohmann::json& req);
FsOpFn FindFsOp(std::string_view op);

// Opens a file for fs.read: follows links; a directory is S212
// "is a directory", anything but a regular file S212 "not a regular file".
struct ReadHandle {
  UniqueFd fd;
  proto::FsReadMeta meta;
};
Result<ReadHandle> OpenForRead(const std::string& path);

}  // namespace skiff::agent
