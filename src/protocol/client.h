// Host side of the agent protocol: one Client per sandbox channel.
//
// A reader thread decodes frames and routes them to Streams; callers block
// on their own Stream. Flow control is credit based in both directions:
// Send() blocks until the agent has granted credit, and credit for received
// DATA is returned only when the caller consumes it through Next(), so a slow
// consumer slows the agent instead of growing a queue. Nothing is dropped.
//
// The agent is untrusted (a microVM guest's root controls it), so the host
// enforces the window it grants: DATA beyond the credit granted and not yet
// used, DATA or END on a channel the agent does not write, anything after an
// END on that channel, a frame on a stream the host never opened, or more
// than kMaxQueuedControl unconsumed META/END events on one stream is a
// protocol violation that closes the connection (CloseReason::kProtocolError).
// Control payloads are queued raw and parsed by Next(), on the caller's
// thread. Over kMaxQueuedBytes queued per client, the reader stops reading
// until callers consume (back pressure, never a violation: a well-behaved
// agent reaches it only through many streams nobody reads).
#pragma once

#include <chrono>
#include <concepts>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "base/error.h"
#include "base/unique_fd.h"
#include "protocol/frame.h"

namespace skiff::proto {

class Client;

// Why a connection ended (Client::close_reason()).
// At most this many META / END events wait unconsumed on one stream (a
// well-behaved stream has one META and two ENDs); more is a violation.
inline constexpr uint32_t kMaxQueuedControl = 8;
// Queued bytes (DATA plus raw control payloads) per client above which the
// reader pauses until callers consume.
inline constexpr size_t kMaxQueuedBytes = size_t{64} << 20;
// Streams the host abandoned (destroyed before their final frame) whose
// windows are remembered, so their remaining DATA is checked and credited
// back; beyond this the oldest is forgotten and its DATA dropped.
inline constexpr size_t kMaxAbandonedStreams = 1024;
// A write to the agent that makes no progress for this long fails the
// connection (see Client::SetWriteStall).
inline constexpr std::chrono::milliseconds kWriteStall{60000};

enum class CloseReason {
  kOpen,           // still alive
  kClosedByHost,   // Close(): a stop or teardown on this side
  kAgentHungUp,    // EOF or reset: the agent exited (the sandbox died or was stopped)
  kProtocolError,  // the agent sent a corrupt frame or broke the protocol (e.g. the credit window)
  kIoError,        // reading or polling the channel failed
};
// "open", "closed by host", "agent hung up", "protocol error", "i/o error".
std::string_view CloseReasonName(CloseReason r);

// A request type of messages.h: it names its op and encodes itself.
template <typename T>
concept Request = requires(const T& r) {
  { T::kOp } -> std::convertible_to<std::string_view>;
  { r.ToJson() } -> std::same_as<nlohmann::json>;
};

// NOLINTNEXTLINE(bugprone-exception-escape): a default (null) nlohmann::json cannot throw
struct Event {
  enum class Kind { kMeta, kData, kEnd, kResult, kError, kClosed };
  Kind kind = Kind::kClosed;
  uint8_t channel = 0;                            // kData / kEnd
  std::string data;                               // kData bytes
  nlohmann::json json;                            // kMeta / kResult / kError; kClosed: {"message":...}
  CloseReason close_reason = CloseReason::kOpen;  // kClosed: why
};

class Stream {
 public:
  using Clock = std::chrono::steady_clock;
  ~Stream();  // sends CANCEL if the stream is still open
  uint32_t id() const { return id_; }

  // The next event; nullopt when `deadline` passes first. After kResult,
  // kError or kClosed the stream is finished and Next() keeps returning that.
  std::optional<Event> Next(std::optional<Clock::time_point> deadline = std::nullopt);
  // Sends bytes on `channel`, chunked, blocking while the agent grants no
  // credit. Fails (S300) when the connection is gone or the stream finished.
  Status Send(uint8_t channel, std::string_view bytes,
              std::optional<Clock::time_point> deadline = std::nullopt);
  Status End(uint8_t channel);
  void Cancel();
  bool finished() const;

 private:
  friend class Client;
  Stream(std::shared_ptr<Client> c, uint32_t id) : client_(std::move(c)), id_(id) {}
  // Called by the reader with client->mu_ held: checks `e` against the
  // window and the queue limits, queues it; an error names the violation.
  Status Deliver(Event e);
  void DeliverClosed(Event e);  // the connection's end; mu_ held

  std::shared_ptr<Client> client_;
  uint32_t id_;
  // Guarded by client_->mu_.
  std::deque<Event> events_;
  uint64_t send_credit_[kChannels] = {kInitialWindow, kInitialWindow, kInitialWindow};
  // DATA bytes the host granted the agent and has not yet seen, per channel
  // (the agent writes only stdout and stderr).
  uint64_t recv_window_[kChannels] = {0, kInitialWindow, kInitialWindow};
  bool ended_[kChannels] = {false, false, false};  // END seen
  uint32_t queued_control_ = 0;                    // META / END events in events_
  bool done_ = false;                              // final event queued
  bool consumed_final_ = false;
  Event final_;
};

class Client : public std::enable_shared_from_this<Client> {
 public:
  // Takes the channel and waits up to `timeout` for the agent's HELLO.
  static Result<std::shared_ptr<Client>> Connect(UniqueFd fd, std::chrono::milliseconds timeout);
  ~Client();

  // Opens a stream with a JSON request ({"op": ...}).
  Result<std::shared_ptr<Stream>> Open(const nlohmann::json& request);
  // Opens a stream with a typed request of messages.h.
  template <Request R>
  Result<std::shared_ptr<Stream>> Open(const R& request) {
    return Open(request.ToJson());
  }
  // Convenience: open, end stdin, wait for the final event. Returns the
  // RESULT json, or the agent's ERROR as an Error with its code.
  Result<nlohmann::json> Call(const nlohmann::json& request,
                              std::optional<Stream::Clock::time_point> deadline = std::nullopt);
  template <Request R>
  Result<nlohmann::json> Call(const R& request,
                              std::optional<Stream::Clock::time_point> deadline = std::nullopt) {
    return Call(request.ToJson(), deadline);
  }

  const nlohmann::json& hello() const { return hello_; }
  bool alive() const;
  // Why the connection died ("" while alive), as text for messages.
  std::string failure() const;
  // Why the connection died, as a value to decide on (kOpen while alive).
  CloseReason close_reason() const;
  // Called once, from the reader thread, when the connection dies.
  void SetOnDeath(std::function<void(const std::string&)> cb);
  // Shuts the connection down; streams get kClosed.
  void Close();
  // Bytes queued for callers (DATA plus raw control payloads), across streams.
  size_t queued_bytes() const;

  // The channel at rest for a snapshot (messages.h, quiesce): opens a
  // quiesce stream and, in the same step, holds every later write of this
  // client (callers' frames, credit) in memory, in order, so nothing more
  // reaches the agent. Returns once the agent's META says its side is at
  // rest too; on failure (no META by `deadline`) the hold is released.
  Result<std::shared_ptr<Stream>> Quiesce(Stream::Clock::time_point deadline);
  // Writes what was held, then ends the quiesce stream: the agent talks
  // again. Returns once the agent has answered.
  Status Release(const std::shared_ptr<Stream>& quiesce, Stream::Clock::time_point deadline);

  // Hibernation: the agent's VM was saved while quiesced and its VMM has
  // gone. Stops reading without counting it a death (no death callback):
  // the streams open now end (kClosed, kClosedByHost, "the sandbox
  // hibernated"), and writes are held until Rebind. Call after Quiesce.
  Status Suspend();
  // Continues on `fd`, the channel of the VM restored from that save, once
  // its agent's HELLO has come (within `timeout`); what was held is dropped
  // (the restored agent dropped those streams too). On failure the
  // connection is dead, as after any failure, and the death callback runs.
  Status Rebind(UniqueFd fd, std::chrono::milliseconds timeout);
  bool suspended() const;
  // A client in Suspend()'s state with no channel yet: for a sandbox an
  // earlier daemon hibernated; Rebind gives it the channel of its wake.
  static Result<std::shared_ptr<Client>> Dormant();
  // How long a write may wait on a full channel without progress before the
  // connection is failed (kIoError): an agent that stops reading cannot
  // hold a host thread. Default kWriteStall; tests shorten it.
  void SetWriteStall(std::chrono::milliseconds stall);

 private:
  friend class Stream;
  explicit Client(UniqueFd fd) : fd_(std::move(fd)) {}
  void ReaderLoop();
  // Close() in two halves: marking the connection dead (streams get kClosed;
  // allocates, so it can throw) and waking the agent and the reader (system
  // calls only).
  void MarkClosed();
  void HangUp() noexcept;
  void Fail(CloseReason reason, const std::string& why);  // mu_ held
  Status WriteRaw(const std::string& bytes);
  // One frame written straight from `payload` (header and body gathered by
  // one sendmsg, no copy into a frame buffer).
  Status WriteFrame(uint32_t stream, Type type, uint8_t flags, std::string_view payload);
  void ForgetStream(uint32_t id);
  // One frame from the agent (reader thread): routes it, or returns the
  // protocol violation that ends the connection.
  Status OnFrame(Frame f);
  // Returns DATA credit to the agent from the reader thread.
  void GrantFromReader(uint32_t stream, uint8_t channel, uint32_t bytes);

  UniqueFd fd_;
  nlohmann::json hello_;
  std::thread reader_;
  // A write failed (or stalled): fails the connection and wakes everyone.
  void FailWrite(const Error& e);

  std::mutex write_mu_;
  std::chrono::milliseconds write_stall_{kWriteStall};  // guarded by write_mu_
  bool holding_ = false;                                // guarded by write_mu_ (Quiesce)
  bool suspending_ = false;                             // guarded by mu_: the reader ends quietly
  bool suspended_ = false;                              // guarded by mu_: no reader until Rebind
  std::string held_;                                    // guarded by write_mu_
  // Writes `bytes` (whole frames), or holds them while quiesced; write_mu_ held.
  Status WriteLocked(const char* p, size_t n);
  // Writes what was held and stops holding.
  Status ReleaseHeld();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint32_t, Stream*> streams_;
  // Streams destroyed before their final frame: id -> recv windows.
  struct Abandoned {
    uint64_t window[kChannels];
  };
  std::map<uint32_t, Abandoned> abandoned_;
  size_t queued_bytes_ = 0;
  bool reader_paused_ = false;  // the reader waits for callers to consume
  bool warned_unexpected_ = false;
  uint32_t next_id_ = 1;
  bool dead_ = false;
  std::string failure_;
  CloseReason close_reason_ = CloseReason::kOpen;
  std::function<void(const std::string&)> on_death_;
  int wake_[2] = {-1, -1};  // pipe to interrupt the reader on Close()
};

}  // namespace skiff::proto
