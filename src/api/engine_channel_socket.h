// One side of a data channel that lives on the iii engine (worker mode,
// docs/api.md#worker-mode): a WebSocket to
// <engine>/ws/channels/{channel_id}?key=…&dir=read|write over the same
// ws:// or wss:// link settings as the worker link, driven from a pool or
// producer thread with a deadline on every step (its own event loop, so
// nothing waits on the daemon's).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "api/engine_link_options.h"
#include "base/error.h"

namespace skiff::api {

class EngineChannelSocket {
 public:
  enum class Dir { kRead, kWrite };
  struct Message {
    bool binary = true;
    std::string data;
  };

  ~EngineChannelSocket();
  EngineChannelSocket(const EngineChannelSocket&) = delete;
  EngineChannelSocket& operator=(const EngineChannelSocket&) = delete;

  // Connects and upgrades within `deadline`. `channel_id` must be a UUID-like
  // token ([0-9A-Za-z-], at most 128), the key at most 1024 bytes (it is
  // percent-encoded). The engine answers an unknown channel or a wrong key
  // with 404: S001 "unknown channel or wrong access key". Not reaching the
  // engine: S218.
  static Result<std::unique_ptr<EngineChannelSocket>> Open(const EngineLinkOptions& link,
                                                           const std::string& channel_id,
                                                           const std::string& access_key, Dir dir,
                                                           std::chrono::milliseconds deadline);

  // Writer: one message (binary unless `binary` is false). S218 when it cannot be sent within
  // `deadline` (nobody reads: the engine holds a bounded queue) or the
  // engine dropped the channel (its reader went away).
  Status Write(const std::string& bytes, std::chrono::milliseconds deadline, bool binary = true);
  // Writer: whether the engine still has this side (false once it closed
  // it, e.g. because the reader left). Never blocks.
  bool Alive();
  // Writer: the end of the stream (a close frame); best effort.
  void Finish(std::chrono::milliseconds deadline);

  // Reader: the next message, nullopt at the end of the stream (the engine
  // closed it: the writer finished — or vanished, which the engine relays
  // the same way). S218 after `stall` without a message.
  Result<std::optional<Message>> Read(std::chrono::milliseconds stall);

 private:
  EngineChannelSocket();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace skiff::api
