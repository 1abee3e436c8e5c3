// LaneExecutor: runs tasks on per-key lanes, so work that waits on one key
// (one sandbox's agent) can only ever hold that key's threads. Each lane
// takes threads on demand up to `threads_per_lane`, queues at most
// `queue_per_lane` tasks behind them and refuses beyond. A thread leaves
// its lane when the lane's queue is empty and parks, where any lane may be
// handed it (a sandbox's first call then costs no thread start); a parked
// thread ends after `idle` without work. `max_threads` bounds the threads
// of all lanes together, parked ones included, so keys a caller makes up
// cannot grow the daemon's thread count without bound.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"

namespace skiff {

class LaneExecutor {
 public:
  struct Limits {
    size_t threads_per_lane = 8;
    size_t queue_per_lane = 64;
    size_t max_threads = 512;
    std::chrono::milliseconds idle{2000};
  };
  struct Stats {
    size_t lanes = 0;
    size_t threads = 0;
    size_t running = 0;  // tasks being run now
    size_t parked = 0;   // threads waiting for a lane
    size_t queued = 0;
  };

  explicit LaneExecutor(std::string name, Limits limits);
  // Refuses new tasks, waits for running and queued ones to finish. Not
  // to be run by a task.
  ~LaneExecutor();
  LaneExecutor(const LaneExecutor&) = delete;
  LaneExecutor& operator=(const LaneExecutor&) = delete;

  // Runs `task` on `key`'s lane. S003 when the lane's queue is full or no
  // thread can be started within max_threads; S300 when the executor is
  // shutting down or the host cannot start a thread. A task's exception is
  // logged and ends only that task.
  //
  // `then`, if set, runs on the same thread right after `task` (also one
  // that threw), once the
  // task's slot is free again: the place to hand a call's answer to its
  // caller, so a caller who has the answer and sends the next call at once
  // never finds the slot of the call it already got answered still taken.
  Status Post(const std::string& key, std::function<void()> task, std::function<void()> then = {});
  Stats stats() const;

 private:
  struct Lane {
    struct Task {
      std::function<void()> run, then;
    };
    std::deque<Task> queue;
    size_t running = 0;  // tasks being run
    size_t threads = 0;  // serving the lane: running a task, its `then`, or about to look at the queue
  };
  // A thread waiting for a lane, on its own stack.
  struct Parked {
    std::condition_variable cv;  // handed a lane, or shutdown
    std::string key;
    bool assigned = false;
  };
  void Work(std::string key);
  void JoinFinished(std::unique_lock<std::mutex>& lk);

  const std::string name_;
  const Limits limits_;
  mutable std::mutex mu_;
  std::condition_variable done_cv_;  // a thread ended
  std::map<std::string, Lane> lanes_;
  std::vector<Parked*> parked_;  // most recently parked last
  std::list<std::thread> threads_;
  std::vector<std::thread::id> finished_;  // ended threads not yet joined
  size_t live_threads_ = 0;
  bool shutting_down_ = false;
};

}  // namespace skiff
