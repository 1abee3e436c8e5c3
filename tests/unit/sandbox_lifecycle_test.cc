#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>

#include "sandbox/lifecycle.h"

namespace skiff {
namespace {

constexpr SandboxState kAll[] = {SandboxState::kStarting, SandboxState::kReady, SandboxState::kPaused,
                                 SandboxState::kStopping, SandboxState::kStopped};

TEST(SandboxLifecycle, TransitionTable) {
  const std::set<std::pair<SandboxState, SandboxState>> legal = {
      {SandboxState::kStarting, SandboxState::kReady},   {SandboxState::kStarting, SandboxState::kStopping},
      {SandboxState::kReady, SandboxState::kStopping},   {SandboxState::kReady, SandboxState::kPaused},
      {SandboxState::kPaused, SandboxState::kReady},     {SandboxState::kPaused, SandboxState::kStopping},
      {SandboxState::kStopping, SandboxState::kStopped},
  };
  for (auto from : kAll)
    for (auto to : kAll)
      EXPECT_EQ(CanTransition(from, to), legal.count({from, to}) == 1)
          << SandboxStateName(from) << " -> " << SandboxStateName(to);
}

TEST(SandboxLifecycle, NothingLeavesStopped) {
  for (auto to : kAll) EXPECT_FALSE(CanTransition(SandboxState::kStopped, to)) << SandboxStateName(to);
}

TEST(SandboxLifecycle, StoppingCoversStoppingAndStopped) {
  EXPECT_FALSE(IsStopping(SandboxState::kStarting));
  EXPECT_FALSE(IsStopping(SandboxState::kReady));
  EXPECT_FALSE(IsStopping(SandboxState::kPaused));
  EXPECT_TRUE(IsStopping(SandboxState::kStopping));
  EXPECT_TRUE(IsStopping(SandboxState::kStopped));
}

TEST(SandboxLifecycle, NamesAreDistinct) {
  std::set<std::string> names;
  for (auto s : kAll) names.insert(SandboxStateName(s));
  EXPECT_EQ(names.size(), 5u);
}

}  // namespace
}  // namespace skiff
