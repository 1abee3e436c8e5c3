#include "agent/fs_pool.h"

#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <unordered_set>
#include <utility>

#include "base/log.h"
#include "base/thread.h"
#include "base/unique_fd.h"

namespace skiff::agent {

using nlohmann::json;

Result<std::string> RunFsOp(FsOpFn op, const json& req) {
  try {
    Result<json> r = op(req);
    if (!r.ok()) return std::move(r).error();
    return r->dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (const std::exception& e) {
    // nlohmann::json type errors on hostile input, std::bad_alloc, ...
    return InvalidRequest(std::string("malformed request: ") + e.what());
  }
}

// Shared by the pool and its workers: a worker that outlives the pool
// (detached by ~FsPool) still holds it.
struct FsPool::State {
  struct Job {
    uint32_t id = 0;
    uint64_t job = 0;
    FsOpFn op = nullptr;
    json req;
  };

  std::mutex mu;
  std::condition_variable work_cv;  // a job was queued, or Stop
  std::deque<Job> queue;
  std::unordered_set<uint64_t> running;  // jobs running and still wanted
  size_t busy = 0;                       // workers running a job, wanted or not
  size_t capacity = 0;                   // workers + kMaxQueued
  uint64_t next_job = 1;
  bool stopping = false;
  std::vector<Finished> finished;
  UniqueFd efd;  // eventfd: a count of finished jobs not yet taken

  void Work() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      work_cv.wait(lk, [&] { return stopping || !queue.empty(); });
      if (stopping) return;
      Job j = std::move(queue.front());
      queue.pop_front();
      ++busy;
      running.insert(j.job);
      lk.unlock();
      Result<std::string> answer = RunFsOp(j.op, j.req);
      j.req = nullptr;  // a big request is freed outside the lock
      lk.lock();
      --busy;
      if (running.erase(j.job) == 0 || stopping) continue;  // cancelled, or the pool is ending
      finished.push_back(Finished{j.id, j.job, std::move(answer)});
      uint64_t one = 1;
      // Cannot fail short of a counter at 2^64 - 1: the loop drains it.
      (void)!::write(efd.get(), &one, sizeof one);
    }
  }
};

FsPool::FsPool() : state_(std::make_shared<State>()) {
  state_->efd.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!state_->efd) {
    SKIFF_LOG(Warn) << "fs pool: eventfd: " << ErrnoName(errno) << "; filesystem operations run on the loop";
    return;
  }
  // The workers start with every signal blocked (a thread inherits its
  // creator's mask): a process-directed signal goes to a thread that does
  // not block it, and a SIGCHLD taken by a worker (default action: ignore)
  // would never reach the loop's signalfd, so a child's exit would go
  // unnoticed.
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  for (size_t i = 0; i < kWorkers; ++i) {
    Result<std::thread> t = StartThread("skiff-agent fs worker", [s = state_] { s->Work(); });
    if (!t.ok()) {
      SKIFF_LOG(Warn) << "fs pool: " << t.error().ToString() << "; " << threads_.size() << " workers";
      break;
    }
    threads_.push_back(std::move(t).value());
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  state_->capacity = threads_.size() + kMaxQueued;
}

FsPool::~FsPool() {
  Stop();
  bool idle;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    idle = state_->busy == 0;  // and stays so: the queue is empty for good
  }
  for (std::thread& t : threads_) {
    if (idle) {
      t.join();  // returns at once: stopping, and nothing to run
    } else {
      t.detach();
    }
  }
}

Result<uint64_t> FsPool::Submit(uint32_t id, FsOpFn op, json req) {
  std::lock_guard<std::mutex> lk(state_->mu);
  if (threads_.empty() || state_->stopping) return Platform("sandbox", "the agent's fs workers have stopped");
  if (state_->busy + state_->queue.size() >= state_->capacity)
    return Error(Code::kS003, "the sandbox's agent is busy: " + std::to_string(state_->capacity) +
                                  " filesystem operations are running or queued, its limit; retry once "
                                  "some have answered");
  uint64_t job = state_->next_job++;
  state_->queue.push_back(State::Job{id, job, op, std::move(req)});
  state_->work_cv.notify_one();
  return job;
}

void FsPool::Cancel(uint64_t job) {
  std::lock_guard<std::mutex> lk(state_->mu);
  if (state_->running.erase(job) > 0) return;
  for (auto it = state_->queue.begin(); it != state_->queue.end(); ++it) {
    if (it->job == job) {
      state_->queue.erase(it);
      return;
    }
  }
  // Finished but not yet taken: dropped here.
  std::erase_if(state_->finished, [&](const Finished& f) { return f.job == job; });
}

int FsPool::fd() const { return threads_.empty() ? -1 : state_->efd.get(); }

std::vector<FsPool::Finished> FsPool::TakeFinished() {
  uint64_t n = 0;
  (void)!::read(state_->efd.get(), &n, sizeof n);  // EAGAIN when nothing was counted
  std::vector<Finished> out;
  std::lock_guard<std::mutex> lk(state_->mu);
  out.swap(state_->finished);
  return out;
}

void FsPool::Stop() {
  std::deque<State::Job> dropped;  // freed outside the lock
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->stopping = true;
    dropped.swap(state_->queue);
    state_->running.clear();
    state_->finished.clear();
  }
  state_->work_cv.notify_all();
}

}  // namespace skiff::agent
