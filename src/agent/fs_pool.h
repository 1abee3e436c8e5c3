// The agent's pool of worker threads for the synchronous filesystem
// operations (fs_ops.h: ls, stat, mkdir, rm, mv, chmod, grep, sed). The
// event loop hands each request to the pool and goes on serving the channel;
// a worker runs the operation and builds its answer, and the loop, woken
// through fd(), takes the answers and writes the frames itself (the channel
// is only ever written by the loop's thread). A long grep or a deep rm thus
// delays nothing but the operations queued behind the busy workers.
//
// Bounds: kWorkers threads, started once with every signal blocked (SIGCHLD
// must reach the loop's signalfd, never a worker), and at most kWorkers +
// kMaxQueued operations running or queued; beyond that Submit refuses
// (S003). The operations themselves touch no process-wide state that
// changes (cwd and umask are set once at start-up, every descriptor is
// O_CLOEXEC and per call), so they may run side by side.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agent/fs_ops.h"
#include "base/error.h"

namespace skiff::agent {

// Runs op(req) and serialises its RESULT payload; an exception out of the
// operation (a type error on hostile JSON, std::bad_alloc) is its S001
// "malformed request" answer. What a worker runs; the loop runs it itself
// when the pool has no workers.
Result<std::string> RunFsOp(FsOpFn op, const nlohmann::json& req);

class FsPool {
 public:
  // Operations that run at once. grep (up to 10 s and 1 GiB read) and sed
  // (files up to 64 MiB, read whole) are the long and memory-hungry ones:
  // four of them side by side still leave the agent's memory and the
  // sandbox's disk bandwidth bounded, and more than the host ever sends at
  // once (its lanes run at most 8 calls per sandbox, execs included).
  static constexpr size_t kWorkers = 4;
  // Operations that may wait for a worker; beyond them Submit answers S003
  // at once, so a flood of requests costs the agent a bounded queue.
  static constexpr size_t kMaxQueued = 64;

  // One finished operation: the RESULT payload (JSON text) or its error.
  struct Finished {
    uint32_t id = 0;   // the request's stream
    uint64_t job = 0;  // Submit's number for it
    Result<std::string> answer = std::string();
  };

  // Starts the workers. Fewer (down to none) when threads cannot be had
  // (a pids limit already reached): workers() tells, and the caller runs
  // operations itself when there are none.
  FsPool();
  // Stop(), then the workers are joined when none is running an operation,
  // else detached: the agent's exit never waits for an operation. None is
  // interrupted half-way (an rm or mv stopped in the middle would leave a
  // half-done tree) and not all are bounded in time (a recursive rm of a
  // huge tree), so joining could hold the exit for ever. A detached worker
  // owns the pool's shared state, so it touches no freed memory; the
  // operations use only the heap, their stack and system calls (no object
  // of static storage duration that exit() destroys), and the process's
  // exit ends them.
  ~FsPool();
  FsPool(const FsPool&) = delete;
  FsPool& operator=(const FsPool&) = delete;

  size_t workers() const { return threads_.size(); }

  // Queues op(req) for stream `id`. The job's number (for Cancel and to
  // match its Finished), or S003 when kWorkers + kMaxQueued operations are
  // running or queued.
  Result<uint64_t> Submit(uint32_t id, FsOpFn op, nlohmann::json req);

  // Forgets a job: a queued one never runs; a running one runs to its end
  // but is not reported. Unknown or finished jobs are ignored.
  void Cancel(uint64_t job);

  // Readable (POLLIN) when finished operations wait for TakeFinished; -1
  // when the pool has no workers.
  int fd() const;

  // The operations finished since the last call, oldest first.
  std::vector<Finished> TakeFinished();

  // No more operations start: queued ones are dropped, running ones are not
  // reported. Submit refuses from now on.
  void Stop();

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::vector<std::thread> threads_;
};

}  // namespace skiff::agent
