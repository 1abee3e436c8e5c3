// FsClient: the fs operations of one sandbox, spoken to its agent (spec
// docs/api.md#sandboxstop): plain ops, streamed writes and streamed reads. Each call marks the
// sandbox active when it starts and ends, and every second of a long
// transfer. Agent and transport failures map through agent_errors.h.
//
// No call waits on an agent without a deadline (docs/configuration.md, fs_timeout_ms): a
// one-shot op must be answered within `timeout`, a streamed transfer must
// make progress (an event from the agent, or credit for the next chunk)
// within it. Past it the call fails with S200 and the stream is cancelled;
// the sandbox goes on.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "protocol/fs_call.h"
#include "sandbox/sandbox.h"
#include "sandbox/types.h"

namespace skiff {

class FsClient {
 public:
  // `stopping` says whether a stop of the sandbox has begun (read under the
  // registry's lock).
  FsClient(Sandbox& sandbox, std::function<bool()> stopping, std::chrono::milliseconds timeout);

  // A one-shot op; returns the agent's RESULT, checked against the op's
  // answer type.
  Result<nlohmann::json> Call(const proto::FsCall& call);
  // fs::write of the bytes `source` yields, with `metadata` as the new
  // file's user.e2b.* attributes.
  Result<nlohmann::json> Write(const std::string& path, uint32_t mode, bool parents, const ByteSource& source,
                               const proto::FileMetadata& metadata);
  // fs::read: `on_meta` once before any byte, then the bytes to `sink`.
  Status Read(const std::string& path, const std::function<void(const FsReadMeta&)>& on_meta,
              const ByteSink& sink);

 private:
  // An Open that failed: the connection's end, mapped (agent_errors.h).
  Error OpenFailed(const Error& e) const;
  // S200 for `op` past the deadline.
  Error TimedOut(std::string_view op) const;
  std::chrono::steady_clock::time_point Deadline() const;

  Sandbox& sb_;
  std::function<bool()> stopping_;
  std::chrono::milliseconds timeout_;
};

}  // namespace skiff
