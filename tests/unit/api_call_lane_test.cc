// Which lane a call runs on: sandbox-scoped calls by their sandbox, a stop
// on a lane of its own, everything else (and anything malformed) on the pool.
#include "api/call_lane.h"

#include <gtest/gtest.h>

namespace skiff::api {
namespace {

using nlohmann::json;

TEST(CallLane, SandboxScopedCallsShareTheirSandboxsLane) {
  const std::string id = "0b7c1a3e-51d2-4f0a-9c6e-2d4b8f1a7e90";
  for (const char* fn : {"sandbox::exec", "sandbox::fs::ls", "sandbox::fs::grep", "sandbox::fs::write"}) {
    auto t = CallTargetOf(fn, json{{"sandbox_id", id}, {"path", "/"}});
    ASSERT_TRUE(t) << fn;
    EXPECT_EQ(t->sandbox_id, id);
    EXPECT_FALSE(t->stop);
    EXPECT_EQ(t->LaneKey(), "sandbox:" + id);
  }
}

TEST(CallLane, AStopHasALaneOfItsOwn) {
  auto t = CallTargetOf("sandbox::stop", json{{"sandbox_id", "abc"}});
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->stop);
  EXPECT_EQ(t->LaneKey(), "stop:abc");
  EXPECT_NE(t->LaneKey(), (CallTarget{"abc", false}).LaneKey());
}

TEST(CallLane, CallsThatReachNoExistingSandboxRunOnThePool) {
  for (const char* fn : {"sandbox::create", "sandbox::run", "sandbox::list", "sandbox::catalog::list",
                         "engine::functions::list", "engine::channels::create"}) {
    EXPECT_FALSE(CallTargetOf(fn, json{{"sandbox_id", "abc"}})) << fn;
  }
}

TEST(CallLane, MalformedTargetsRunOnThePool) {
  EXPECT_FALSE(CallTargetOf("sandbox::exec", json::array()));
  EXPECT_FALSE(CallTargetOf("sandbox::exec", json{{"sandbox_id", 7}}));
  EXPECT_FALSE(CallTargetOf("sandbox::exec", json{{"sandbox_id", ""}}));
  EXPECT_FALSE(CallTargetOf("sandbox::exec", json{{"id", "abc"}}));
  EXPECT_FALSE(CallTargetOf("sandbox::exec", json{{"sandbox_id", std::string(65, 'a')}}));
  EXPECT_TRUE(CallTargetOf("sandbox::exec", json{{"sandbox_id", std::string(64, 'a')}}));
}

}  // namespace
}  // namespace skiff::api
