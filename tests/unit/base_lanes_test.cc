// LaneExecutor: a lane that blocks holds only its own threads; limits are
// refused with S003; a thread that finished one lane serves the next; idle
// threads end; the destructor drains.
#include "base/lanes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace skiff {
namespace {

using namespace std::chrono_literals;

// A latch the blocked tasks wait on.
struct Gate {
  std::promise<void> p;
  std::shared_future<void> f = p.get_future().share();
  void Open() { p.set_value(); }
};

TEST(LaneExecutorTest, BlockedLaneDoesNotDelayAnother) {
  // What the tasks use outlives the executor, whose destructor drains them.
  Gate gate;
  std::atomic<int> started{0};
  LaneExecutor ex("test lanes",
                  {.threads_per_lane = 2, .queue_per_lane = 2, .max_threads = 16, .idle = 100ms});
  for (int i = 0; i < 4; ++i) {  // two run and block, two queue behind them
    ASSERT_TRUE(ex.Post("stuck", [&] {
                    ++started;
                    gate.f.wait();
                  }).ok());
  }
  // Another lane is served at once.
  std::promise<void> ran;
  ASSERT_TRUE(ex.Post("other", [&] { ran.set_value(); }).ok());
  EXPECT_EQ(ran.get_future().wait_for(5s), std::future_status::ready);
  // The stuck lane is full: threads and queue.
  auto refused = ex.Post("stuck", [] {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Code::kS003);
  EXPECT_NE(refused.error().message().find("stuck"), std::string::npos);
  // Both of the lane's threads start; the queued two do not. The second
  // thread may still be on its way in, so wait for it rather than race it.
  for (int i = 0; i < 500 && started.load() < 2; ++i) std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(started.load(), 2);
  EXPECT_EQ(ex.stats().running, 2u);
  EXPECT_EQ(ex.stats().queued, 2u);
  gate.Open();
}

TEST(LaneExecutorTest, TotalThreadCapRefusesNewLanes) {
  Gate gate;
  LaneExecutor ex("test lanes",
                  {.threads_per_lane = 4, .queue_per_lane = 0, .max_threads = 3, .idle = 100ms});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(ex.Post("k" + std::to_string(i), [&] { gate.f.wait(); }).ok());
  auto r = ex.Post("k9", [] {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS003);
  EXPECT_EQ(ex.stats().lanes, 3u);  // the refused key left no lane behind
  gate.Open();
}

TEST(LaneExecutorTest, IdleThreadsEndAndLanesAreForgotten) {
  std::atomic<int> n{0};
  LaneExecutor ex("test lanes", {.threads_per_lane = 2, .queue_per_lane = 8, .max_threads = 8, .idle = 50ms});
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(ex.Post("k" + std::to_string(i % 3), [&] { ++n; }).ok());
  for (int i = 0; i < 200 && (n.load() < 20 || ex.stats().threads > 0); ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(n.load(), 20);
  auto s = ex.stats();
  EXPECT_EQ(s.threads, 0u);
  EXPECT_EQ(s.lanes, 0u);
  EXPECT_EQ(s.queued, 0u);
}

// A sandbox's first call must not pay for a thread start: the thread that
// served another lane (now empty) is handed the new one.
TEST(LaneExecutorTest, AThreadThatFinishedOneLaneServesTheNext) {
  LaneExecutor ex("test lanes", {.threads_per_lane = 2, .queue_per_lane = 8, .max_threads = 8, .idle = 5s});
  std::promise<std::thread::id> first, second;
  ASSERT_TRUE(ex.Post("sandbox:a", [&] { first.set_value(std::this_thread::get_id()); }).ok());
  std::thread::id a = first.get_future().get();
  for (int i = 0; i < 500 && ex.stats().parked != 1; ++i) std::this_thread::sleep_for(2ms);
  ASSERT_EQ(ex.stats().parked, 1u);
  EXPECT_EQ(ex.stats().lanes, 0u);  // it left the lane, and the lane is forgotten
  ASSERT_TRUE(ex.Post("sandbox:b", [&] { second.set_value(std::this_thread::get_id()); }).ok());
  EXPECT_EQ(second.get_future().get(), a);
  EXPECT_EQ(ex.stats().threads, 1u);
}

// A parked thread still counts against max_threads, and a busy lane's
// limit holds while parked threads wait.
TEST(LaneExecutorTest, ParkedThreadsRespectTheLaneLimit) {
  LaneExecutor ex("test lanes", {.threads_per_lane = 1, .queue_per_lane = 4, .max_threads = 4, .idle = 5s});
  // Two lanes run at once, then both threads park.
  Gate g0;
  std::atomic<int> n{0};
  ASSERT_TRUE(ex.Post("a", [&] {
                  g0.f.wait();
                  ++n;
                }).ok());
  ASSERT_TRUE(ex.Post("b", [&] {
                  g0.f.wait();
                  ++n;
                }).ok());
  g0.Open();
  for (int i = 0; i < 500 && ex.stats().parked != 2; ++i) std::this_thread::sleep_for(2ms);
  ASSERT_EQ(ex.stats().parked, 2u);
  // Lane "c" may have one thread: its second task waits behind the first
  // although a parked thread is free.
  Gate g1;
  std::atomic<int> running{0}, most{0};
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(ex.Post("c", [&] {
                    int now = ++running;
                    most = std::max(most.load(), now);
                    g1.f.wait();
                    --running;
                    ++n;
                  }).ok());
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(ex.stats().parked, 1u);
  g1.Open();
  for (int i = 0; i < 500 && n.load() < 5; ++i) std::this_thread::sleep_for(2ms);
  EXPECT_EQ(n.load(), 5);
  EXPECT_EQ(most.load(), 1);
  EXPECT_LE(ex.stats().threads, 2u);
}

TEST(LaneExecutorTest, AThrowingTaskEndsOnlyItself) {
  LaneExecutor ex("test lanes",
                  {.threads_per_lane = 1, .queue_per_lane = 4, .max_threads = 4, .idle = 100ms});
  std::promise<void> after;
  ASSERT_TRUE(ex.Post("k", [] { throw std::runtime_error("boom"); }).ok());
  ASSERT_TRUE(ex.Post("k", [&] { after.set_value(); }).ok());
  EXPECT_EQ(after.get_future().wait_for(5s), std::future_status::ready);
}

// A caller that has its answer and sends the next call at once finds the
// slot free: `then` runs after the task's slot is given back (here the
// lane's only slot, so posting from `then` fails if it is still taken).
TEST(LaneExecutorTest, ThenRunsOnceTheSlotIsFree) {
  LaneExecutor ex("test lanes",
                  {.threads_per_lane = 1, .queue_per_lane = 0, .max_threads = 4, .idle = 100ms});
  std::promise<Status> next;
  std::promise<void> ran_next;
  ASSERT_TRUE(ex.Post(
                    "k", [] {}, [&] { next.set_value(ex.Post("k", [&] { ran_next.set_value(); })); })
                  .ok());
  Status st = next.get_future().get();
  EXPECT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(ran_next.get_future().wait_for(5s), std::future_status::ready);
}

TEST(LaneExecutorTest, ThenRunsAfterATaskThatThrew) {
  LaneExecutor ex("test lanes",
                  {.threads_per_lane = 1, .queue_per_lane = 0, .max_threads = 4, .idle = 100ms});
  std::promise<void> answered;
  ASSERT_TRUE(ex.Post(
                    "k", [] { throw std::runtime_error("boom"); }, [&] { answered.set_value(); })
                  .ok());
  EXPECT_EQ(answered.get_future().wait_for(5s), std::future_status::ready);
}

TEST(LaneExecutorTest, DestructorRunsQueuedTasksAndRefusesAfter) {
  std::atomic<int> n{0};
  {
    LaneExecutor ex("test lanes",
                    {.threads_per_lane = 1, .queue_per_lane = 16, .max_threads = 4, .idle = 1000ms});
    for (int i = 0; i < 10; ++i)
      ASSERT_TRUE(ex.Post("k", [&] {
                      std::this_thread::sleep_for(1ms);
                      ++n;
                    }).ok());
  }
  EXPECT_EQ(n.load(), 10);
}

}  // namespace
}  // namespace skiff
