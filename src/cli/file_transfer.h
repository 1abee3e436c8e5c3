// Copying one file between this host and a sandbox through the daemon
// (`GET`/`PUT /v1/sandboxes/ID/files`), for `skiff cp` and `skiff fs
// read|write`. Both return skiff's exit status, having reported any error.
#pragma once

#include <string>

#include "cli/daemon_call.h"

namespace skiff::cli {

// Sandbox `id`'s `path` to `local` ("-" = stdout). A local file is written
// to LOCAL.skiff-part and renamed into place only when the copy succeeded.
int Download(const ClientFlags& flags, const std::string& id, const std::string& path,
             const std::string& local);
// `local` ("-" = stdin) to sandbox `id`'s `path`; `parents` creates missing
// directories, `mode` ("" = the daemon's default) is the file's octal mode.
int Upload(const ClientFlags& flags, const std::string& local, const std::string& id, const std::string& path,
           bool parents, const std::string& mode);

}  // namespace skiff::cli
