// Data channels (docs/api.md#enginechannelscreate): a bounded, ordered frame queue between one
// writer and one reader, either of which may be a WebSocket (driven by the
// event loop through one-shot callbacks) or an in-process thread (blocking
// calls). Frames are never dropped: a full queue makes the writer wait.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "base/error.h"
#include "functions/function_def.h"

namespace skiff::api {

inline constexpr size_t kChannelChunk = size_t{64} * 1024;
inline constexpr auto kChannelAttachDeadline = std::chrono::minutes(5);
inline constexpr auto kChannelStall = std::chrono::seconds(5);

struct Frame {
  bool binary = true;
  std::string data;
};

class Channel {
 public:
  explicit Channel(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  // --- writer side ---
  enum class Push { kOk, kFull, kClosed };
  // Queues `f` (kOk). On kFull and kClosed `f` is left as it was, so a
  // writer can hold on to it and retry when OnWritable fires.
  Push TryPush(Frame&& f);
  // Blocks while the queue is full. Error when the reader went away or the
  // channel was aborted, or (if `stall` > 0) no space came within `stall`.
  Status PushBlocking(Frame f, std::chrono::milliseconds stall = std::chrono::milliseconds(0));
  void CloseWrite();  // normal end of stream

  // --- reader side ---
  enum class Pop { kFrame, kEmpty, kEof, kAborted };
  Pop TryPop(Frame* out);
  // nullopt at end of stream; S218 after `stall` without a frame or on abort.
  Result<std::optional<Frame>> PopBlocking(std::chrono::milliseconds stall);
  void ReaderGone();  // the reader will not read any more

  // Either side: abnormal end (a writer that vanished without a close).
  void Abort(std::string why);

  // One-shot notifications (called from whichever thread changed the state,
  // outside the lock): when a frame, EOF or abort is available to read...
  void OnReadable(std::function<void()> cb);
  // ...and when there is room to push, or pushing became pointless.
  void OnWritable(std::function<void()> cb);

  bool Finished();  // nothing more will flow
  size_t capacity() const { return capacity_; }

 private:
  void NotifyLocked(std::unique_lock<std::mutex>& lock, bool readable, bool writable);

  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Frame> q_;
  bool eof_ = false;
  bool aborted_ = false;
  bool reader_gone_ = false;
  bool eof_delivered_ = false;
  std::string abort_reason_;
  std::function<void()> on_readable_, on_writable_;
};

// Runs blocking work off the event loop.
using BlockingRunner = std::function<void(std::function<void()>)>;

class Broker : public ChannelBroker {
 public:
  explicit Broker(BlockingRunner run_blocking) : run_blocking_(std::move(run_blocking)) {}

  Result<nlohmann::json> CreateReadChannel(Producer producer) override;
  Result<ByteSource> AttachReader(const nlohmann::json& ref) override;
  Result<nlohmann::json> CreateChannelPair(uint32_t buffer_size) override;

  // A WebSocket side attaching: 404 unknown id / wrong key, 409 taken,
  // 400 bad dir. On success the channel (and, for a reader of an fs::read
  // channel, its producer is started).
  struct Attached {
    std::shared_ptr<Channel> channel;
    int http_status = 200;
  };
  Attached Attach(const std::string& id, const std::string& key, const std::string& dir);

  // Deletes a channel (its sides see an abort).
  void Remove(const std::string& id);
  // Expires channels not attached within 5 minutes; forgets finished ones.
  void Sweep();
  size_t size();

 private:
  struct Entry {
    std::shared_ptr<Channel> channel;
    std::string key;
    std::chrono::steady_clock::time_point created;
    bool reader = false, writer = false;
    Producer producer;  // set for fs::read channels (skiffd is the writer)
  };
  nlohmann::json NewEntry(uint32_t buffer, Producer producer, std::string* id_out);
  void StartProducer(std::shared_ptr<Channel> ch, Producer producer);

  BlockingRunner run_blocking_;
  std::mutex mu_;
  std::map<std::string, Entry> channels_;
};

// A per-connection view of the broker: channels created through it by
// engine::channels::create die with the connection (docs/architecture.md#transports-and-their-limits).
class ScopedBroker : public ChannelBroker {
 public:
  explicit ScopedBroker(Broker& broker) : broker_(broker) {}
  ~ScopedBroker() override { Release(); }
  Result<nlohmann::json> CreateReadChannel(Producer producer) override {
    return broker_.CreateReadChannel(std::move(producer));
  }
  Result<ByteSource> AttachReader(const nlohmann::json& ref) override { return broker_.AttachReader(ref); }
  Result<nlohmann::json> CreateChannelPair(uint32_t buffer_size) override;
  void Release();

 private:
  Broker& broker_;
  std::mutex mu_;
  std::set<std::string> owned_;
};

}  // namespace skiff::api
