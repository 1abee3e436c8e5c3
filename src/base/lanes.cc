#include "base/lanes.h"

#include <algorithm>
#include <utility>

#include "base/thread.h"

namespace skiff {

LaneExecutor::LaneExecutor(std::string name, Limits limits) : name_(std::move(name)), limits_(limits) {}

LaneExecutor::~LaneExecutor() {
  std::unique_lock<std::mutex> lk(mu_);
  shutting_down_ = true;
  for (Parked* p : parked_) p->cv.notify_one();
  done_cv_.wait(lk, [&] { return live_threads_ == 0; });
  JoinFinished(lk);
}

Status LaneExecutor::Post(const std::string& key, std::function<void()> task, std::function<void()> then) {
  std::unique_lock<std::mutex> lk(mu_);
  if (shutting_down_) return Error(Code::kS300, name_ + ": shutting down");
  JoinFinished(lk);
  auto [it, inserted] = lanes_.try_emplace(key);
  Lane& lane = it->second;
  if (lane.running + lane.queue.size() >= limits_.threads_per_lane + limits_.queue_per_lane)
    return Error(Code::kS003, name_ + ": " + key + " has " +
                                  std::to_string(limits_.threads_per_lane + limits_.queue_per_lane) +
                                  " calls in flight, its limit");
  lane.queue.push_back({std::move(task), std::move(then)});
  // A thread of the lane that is not running a task takes it when it looks
  // at the queue again (each does, under mu_, before it leaves the lane).
  if (lane.queue.size() <= lane.threads - lane.running) return OkStatus();
  if (lane.threads < limits_.threads_per_lane) {
    // A parked thread (the most recently parked: its stack is warm) is
    // handed the lane; only without one is a thread started.
    if (!parked_.empty()) {
      Parked* p = parked_.back();
      parked_.pop_back();
      p->key = key;
      p->assigned = true;
      ++lane.threads;
      p->cv.notify_one();
      return OkStatus();
    }
    if (live_threads_ < limits_.max_threads) {
      auto t = StartThread(name_, [this, key] { Work(key); });
      if (t.ok()) {
        ++lane.threads;
        ++live_threads_;
        threads_.push_back(std::move(t).value());
        return OkStatus();
      }
      if (lane.threads > 0) return OkStatus();  // one of its threads will take it
      lane.queue.pop_back();
      if (lane.queue.empty() && lane.running == 0) lanes_.erase(it);
      return std::move(t).error();
    }
  }
  if (lane.threads > 0) return OkStatus();  // queued behind the lane's own threads
  // No thread of its own and none can be had.
  lane.queue.pop_back();
  if (lane.queue.empty() && lane.running == 0) lanes_.erase(it);
  return Error(Code::kS003,
               name_ + ": every one of its " + std::to_string(limits_.max_threads) + " threads is busy");
}

void LaneExecutor::Work(std::string key) {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    // Serve the lane until its queue is empty, then leave it.
    Lane& lane = lanes_.at(key);  // erased only once its last thread leaves
    while (!lane.queue.empty()) {
      Lane::Task task = std::move(lane.queue.front());
      lane.queue.pop_front();
      ++lane.running;
      lk.unlock();
      RunGuarded(name_, task.run);
      task.run = nullptr;  // its captures are released outside the lock
      lk.lock();
      --lane.running;
      if (task.then) {
        lk.unlock();
        RunGuarded(name_, task.then);
        task.then = nullptr;
        lk.lock();
      }
    }
    if (--lane.threads == 0) lanes_.erase(key);
    if (shutting_down_) break;
    // Parked: any lane may be handed this thread within `idle`; after that
    // it ends.
    Parked self;
    parked_.push_back(&self);
    self.cv.wait_for(lk, limits_.idle, [&] { return self.assigned || shutting_down_; });
    if (!self.assigned) {
      parked_.erase(std::find(parked_.begin(), parked_.end(), &self));
      break;
    }
    key = std::move(self.key);  // Post counted this thread in the lane
  }
  --live_threads_;
  finished_.push_back(std::this_thread::get_id());
  done_cv_.notify_all();
}

void LaneExecutor::JoinFinished(std::unique_lock<std::mutex>& lk) {
  (void)lk;  // held: a finished thread only returns once it released mu_
  for (const auto& id : finished_) {
    for (auto it = threads_.begin(); it != threads_.end(); ++it) {
      if (it->get_id() != id) continue;
      it->join();
      threads_.erase(it);
      break;
    }
  }
  finished_.clear();
}

LaneExecutor::Stats LaneExecutor::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  Stats s;
  s.lanes = lanes_.size();
  s.threads = live_threads_;
  s.parked = parked_.size();
  for (const auto& [key, lane] : lanes_) {
    s.running += lane.running;
    s.queued += lane.queue.size();
  }
  return s;
}

}  // namespace skiff
