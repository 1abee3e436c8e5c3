// The agent's FsPool (src/agent/fs_pool.h) with stand-in operations: every
// answer carries its own request's id and job, the queue is bounded (S003
// beyond it), a cancelled job is never reported (a queued one never runs),
// and the pool's end never waits for a running operation.
#include "agent/fs_pool.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

namespace skiff::agent {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// A gate the blocking operation waits at; FsOpFn is a plain function, so
// its state is global.
std::mutex gate_mu;
std::condition_variable gate_cv;
bool gate_open = false;
std::atomic<int> started{0};
std::atomic<int> ran{0};

void SetGate(bool open) {
  {
    std::lock_guard<std::mutex> lk(gate_mu);
    gate_open = open;
  }
  gate_cv.notify_all();
}

Result<json> Blocked(const json& req) {
  ++started;
  std::unique_lock<std::mutex> lk(gate_mu);
  gate_cv.wait(lk, [] { return gate_open; });
  ++ran;
  return json{{"n", req.at("n")}};
}

Result<json> Echo(const json& req) {
  ++ran;
  if (req.at("n").get<int>() % 3 == 0) return Error(Code::kS211, "file not found: " + req.dump());
  return json{{"n", req.at("n")}};
}

Result<json> Throws(const json& req) { return json{{"n", req.at("missing").get<int>()}}; }

class AgentFsPool : public ::testing::Test {
 protected:
  void SetUp() override {
    SetGate(false);
    started = 0;
    ran = 0;
  }
  void TearDown() override { SetGate(true); }

  // Waits until `n` answers came (or 10 s passed), as the loop does: poll
  // on fd(), then TakeFinished.
  static std::vector<FsPool::Finished> Collect(FsPool& pool, size_t n) {
    std::vector<FsPool::Finished> out;
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
      pollfd p{pool.fd(), POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      for (auto& f : pool.TakeFinished()) out.push_back(std::move(f));
    }
    return out;
  }

  static void WaitStarted(int n) {
    for (int i = 0; i < 1000 && started < n; ++i) std::this_thread::sleep_for(5ms);
    ASSERT_EQ(started, n);
  }
};

TEST_F(AgentFsPool, AnswersCarryTheirOwnIdsAndJobs) {
  FsPool pool;
  ASSERT_EQ(pool.workers(), FsPool::kWorkers);
  ASSERT_GE(pool.fd(), 0);
  std::map<uint64_t, uint32_t> id_of_job;
  constexpr uint32_t kN = FsPool::kWorkers + FsPool::kMaxQueued;
  for (uint32_t id = 1; id <= kN; ++id) {
    auto job = pool.Submit(id * 2 + 1, Echo, json{{"n", id}});
    ASSERT_TRUE(job.ok()) << job.error().ToString();
    id_of_job[*job] = id * 2 + 1;
  }
  auto got = Collect(pool, kN);
  ASSERT_EQ(got.size(), kN);
  for (const auto& f : got) {
    ASSERT_EQ(id_of_job.count(f.job), 1u);
    EXPECT_EQ(f.id, id_of_job[f.job]);
    uint32_t n = (f.id - 1) / 2;
    if (n % 3 == 0) {
      ASSERT_FALSE(f.answer.ok());
      EXPECT_EQ(f.answer.error().code(), Code::kS211);
      EXPECT_NE(f.answer.error().message().find("\"n\":" + std::to_string(n)), std::string::npos);
    } else {
      ASSERT_TRUE(f.answer.ok());
      EXPECT_EQ(*f.answer, json({{"n", n}}).dump());
    }
    id_of_job.erase(f.job);
  }
  EXPECT_TRUE(id_of_job.empty());
}

TEST_F(AgentFsPool, RefusesBeyondItsWorkersAndQueue) {
  FsPool pool;
  constexpr size_t kCap = FsPool::kWorkers + FsPool::kMaxQueued;
  for (size_t i = 0; i < kCap; ++i) ASSERT_TRUE(pool.Submit(1, Blocked, json{{"n", i}}).ok()) << i;
  auto refused = pool.Submit(1, Echo, json{{"n", 1}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Code::kS003);
  WaitStarted(FsPool::kWorkers);
  SetGate(true);
  EXPECT_EQ(Collect(pool, kCap).size(), kCap);
  EXPECT_EQ(ran, static_cast<int>(kCap));
  EXPECT_TRUE(pool.Submit(1, Echo, json{{"n", 1}}).ok());  // room again
}

TEST_F(AgentFsPool, CancelledJobsAreNeverReportedAndQueuedOnesNeverRun) {
  FsPool pool;
  std::vector<uint64_t> jobs;
  for (size_t i = 0; i < FsPool::kWorkers + 2; ++i) {
    auto j = pool.Submit(static_cast<uint32_t>(i), Blocked, json{{"n", i}});
    ASSERT_TRUE(j.ok());
    jobs.push_back(*j);
  }
  WaitStarted(FsPool::kWorkers);
  pool.Cancel(jobs[0]);                 // running
  pool.Cancel(jobs[FsPool::kWorkers]);  // queued
  pool.Cancel(12345);                   // unknown: ignored
  SetGate(true);
  auto got = Collect(pool, jobs.size() - 2);
  std::this_thread::sleep_for(100ms);  // a stray answer would come by now
  for (auto& f : pool.TakeFinished()) got.push_back(std::move(f));
  ASSERT_EQ(got.size(), jobs.size() - 2);
  for (const auto& f : got) {
    EXPECT_NE(f.job, jobs[0]);
    EXPECT_NE(f.job, jobs[FsPool::kWorkers]);
  }
  EXPECT_EQ(ran, static_cast<int>(jobs.size()) - 1) << "the cancelled queued job ran";
}

TEST_F(AgentFsPool, AnExceptionIsAMalformedRequest) {
  FsPool pool;
  ASSERT_TRUE(pool.Submit(7, Throws, json::object()).ok());
  auto got = Collect(pool, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, 7u);
  ASSERT_FALSE(got[0].answer.ok());
  EXPECT_EQ(got[0].answer.error().code(), Code::kS001);
  EXPECT_NE(got[0].answer.error().message().find("malformed request"), std::string::npos);
}

TEST_F(AgentFsPool, ItsEndNeverWaitsForARunningOperation) {
  auto t0 = std::chrono::steady_clock::now();
  {
    FsPool pool;
    for (uint32_t i = 0; i < FsPool::kWorkers; ++i) ASSERT_TRUE(pool.Submit(i, Blocked, json{{"n", i}}).ok());
    WaitStarted(FsPool::kWorkers);
    for (size_t i = 0; i < 10; ++i) ASSERT_TRUE(pool.Submit(3, Echo, json{{"n", 1}}).ok());
    pool.Stop();
    EXPECT_FALSE(pool.Submit(4, Echo, json{{"n", 1}}).ok());
  }  // the operations are still blocked at the gate
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(ran, 0) << "a queued operation ran after Stop";
  SetGate(true);  // the detached workers finish and end
  for (int i = 0; i < 200 && ran < static_cast<int>(FsPool::kWorkers); ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(ran, static_cast<int>(FsPool::kWorkers));
}

}  // namespace
}  // namespace skiff::agent
