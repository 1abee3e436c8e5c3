// LaneExecutor: a lane that blocks holds only its own threads; limits are
// refused with S003; idle threads end; the destructor drains.
#include "base/lanes.h"

#include <gtest/gtest.h>

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
