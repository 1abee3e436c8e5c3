// The agent's exec engine: starting a request's process (spawn.h, in its own
// process group), feeding it the stdin the host streams, collecting its
// stdout/stderr under the host's credit and the output cap, enforcing its
// deadline, killing it on cancel, and recording its exit (the loop reaps
// every child, as PID 1, and hands the engine the pids it knows). The
// event loop (agent.cc) owns the channel and the streams; it hands the engine
// the frames of an exec stream and the engine answers through an ExecSink.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "agent/spawn.h"
#include "base/error.h"
#include "base/unique_fd.h"
#include "confine/confine.h"
#include "protocol/exec_messages.h"
#include "protocol/frame.h"

namespace skiff::agent {

// Output cap per channel when the request names none.
inline constexpr uint64_t kDefaultOutputLimit = proto::kDefaultOutputLimit;

// Milliseconds of CLOCK_MONOTONIC (exec durations and deadlines).
int64_t NowMs();

// Where an exec's frames go: the event loop's channel.
class ExecSink {
 public:
  virtual void Send(uint32_t stream, proto::Type t, uint8_t flags, std::string_view payload) = 0;
  virtual void SendJson(uint32_t stream, proto::Type t, const nlohmann::json& j) = 0;
  virtual void GrantCredit(uint32_t stream, uint8_t ch, uint64_t n) = 0;
  // False while the channel's queue is above its high-water mark: no more
  // output is produced until the host drains it.
  virtual bool OutputRoom() const = 0;

 protected:
  ~ExecSink() = default;
};

// One running exec. `credit` is the stream's window per channel, kept by the
// loop (CREDIT frames) and spent here.
struct Exec {
  uint32_t id = 0;
  uint64_t* credit = nullptr;  // [proto::kChannels]
  pid_t pid = -1;
  bool exited = false;
  int wstatus = 0;
  UniqueFd stdin_w;
  std::string stdin_buf;
  bool stdin_end = false;
  UniqueFd out[proto::kChannels];  // [kStdout], [kStderr]
  uint64_t limit = kDefaultOutputLimit;
  uint64_t sent[proto::kChannels] = {0, 0, 0};
  bool truncated[proto::kChannels] = {false, false, false};
  int64_t start_ms = 0;
  int64_t deadline_ms = -1;
  bool timed_out = false;
  bool cancelled = false;
  bool killed = false;
};

// What starting an exec gave: a running Exec, or a program that could not be
// started, reported as a normal result (stderr text, exit 127/126).
// NOLINTNEXTLINE(bugprone-exception-escape): a default (null) nlohmann::json cannot throw
struct ExecStart {
  std::unique_ptr<Exec> exec;  // null when not started
  std::string stderr_text;     // !exec
  nlohmann::json result;       // !exec: the RESULT
};

// The pollfd slots one exec registered for a round (-1: none).
struct ExecPollSlots {
  uint32_t id = 0;
  int out = -1, err = -1, in = -1;
};

class ExecEngine {
 public:
  // `policy` confines every child (nullptr: unconfined); it must outlive
  // the engine.
  ExecEngine(const confine::ChildPolicy* policy, ExecSink& sink) : policy_(policy), sink_(sink) {}

  // Validates the exec request and spawns it on stream `id` (META {pid}
  // sent). Errors are the request's: the loop answers them with ERROR.
  Result<ExecStart> Start(uint32_t id, const nlohmann::json& req, uint64_t* credit);

  // DATA on stdin; a host that ignores its credit has the excess dropped.
  void OnStdin(Exec& e, std::string_view bytes);
  // END on stdin: the child sees EOF once everything was delivered.
  void OnStdinEnd(Exec& e) { e.stdin_end = true; }
  // CANCEL: the process group is killed; the RESULT says cancelled.
  void Cancel(Exec& e);

  // Once per loop round: closes stdin when delivered, enforces the
  // deadline, and sends the ENDs and RESULT once the exec is complete.
  // Returns whether it is complete (the stream is finished).
  bool Tick(Exec& e, int64_t now);

  // Registers the exec's pipes that can make progress this round (output
  // under credit and channel room, stdin with bytes to write) and lowers
  // `timeout` to its deadline.
  ExecPollSlots AddPollFds(const Exec& e, std::vector<pollfd>& pfds, int& timeout, int64_t now) const;
  // Moves bytes for the pollfds of `slots` that are ready.
  void Pump(Exec& e, const ExecPollSlots& slots, const std::vector<pollfd>& pfds);

  // A child the loop reaped (it waits for every child: it is PID 1): when
  // `pid` leads one of the engine's execs, records its status and returns
  // true; false for a pid the engine does not know. `find` maps a stream id
  // to its Exec, or nullptr when it is gone.
  bool OnChildExit(pid_t pid, int status, const std::function<Exec*(uint32_t id)>& find);

  // Kills the process group of every exec in `execs`, then, as PID 1,
  // every other process.
  void KillAll(const std::vector<Exec*>& execs);

 private:
  void Kill(Exec& e);
  void Finish(Exec& e);
  static bool Done(const Exec& e);

  const confine::ChildPolicy* policy_;
  ExecSink& sink_;
  std::map<pid_t, uint32_t> pids_;  // running exec leader -> stream id
};

}  // namespace skiff::agent
