// WatchDirectory: fs.watch on one sandbox, spoken to its agent
// (protocol/fs_watch_messages.h): the changes below a directory, handed to
// a sink as they happen, for as long as the sink wants them.
//
// Deadlines: the agent must set the watch (its META) within `timeout`;
// after that a quiet watch is normal and has none. It ends when the sink
// says no (S216 "the reader went away"), when the watched directory goes
// away (OK), or with the sandbox. Events the agent sends count as the
// sandbox's activity, at most once a second; a quiet watch does not keep
// an idle sandbox alive.
#pragma once

#include <chrono>
#include <functional>

#include "base/error.h"
#include "protocol/fs_watch_messages.h"
#include "sandbox/sandbox.h"
#include "sandbox/types.h"

namespace skiff {

// `stopping` says whether a stop of the sandbox has begun (read under the
// registry's lock).
Status WatchDirectory(Sandbox& sandbox, const std::function<bool()>& stopping,
                      std::chrono::milliseconds timeout, const proto::FsWatchRequest& req, FsWatchSink& sink);

}  // namespace skiff
