#include "base/lanes.h"

#include <utility>

#include "base/thread.h"

namespace skiff {

LaneExecutor::LaneExecutor(std::string name, Limits limits) : name_(std::move(name)), limits_(limits) {}

LaneExecutor::~LaneExecutor() {
  std::unique_lock<std::mutex> lk(mu_);
  shutting_down_ = true;
  for (auto& [key, lane] : lanes_) lane.cv.notify_all();
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
  // A waiting thread of this lane takes it.
  if (lane.idle >= lane.queue.size()) {
    lane.cv.notify_one();
    return OkStatus();
  }
  if (lane.threads < limits_.threads_per_lane && live_threads_ < limits_.max_threads) {
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
  if (lane.threads > 0) return OkStatus();  // queued behind the lane's own threads
  // No thread of its own and none can be started.
  lane.queue.pop_back();
  if (lane.queue.empty() && lane.running == 0) lanes_.erase(it);
  return Error(Code::kS003,
               name_ + ": every one of its " + std::to_string(limits_.max_threads) + " threads is busy");
}

void LaneExecutor::Work(const std::string& key) {
  std::unique_lock<std::mutex> lk(mu_);
  Lane& lane = lanes_.at(key);  // erased only once its last thread leaves
  for (;;) {
    if (!lane.queue.empty()) {
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
      continue;
    }
    if (shutting_down_) break;
    ++lane.idle;
    bool work = lane.cv.wait_for(lk, limits_.idle, [&] { return !lane.queue.empty() || shutting_down_; });
    --lane.idle;
    if (!work) break;
  }
  if (--lane.threads == 0) lanes_.erase(key);
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
  for (const auto& [key, lane] : lanes_) {
    s.running += lane.running;
    s.queued += lane.queue.size();
  }
  return s;
}

}  // namespace skiff
