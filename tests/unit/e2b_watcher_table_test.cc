// The polled watchers' bookkeeping (e2b/watcher_table.h) with a clock of
// the test's own: caps, bounded buffers whose overflow is an error on the
// next poll, the end of a watch, ids scoped to their sandbox, idle expiry.
#include "e2b/watcher_table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace skiff::e2b {
namespace {

using nlohmann::json;

json Ev(const std::string& name) { return {{"name", name}, {"type", "EVENT_TYPE_CREATE"}}; }

TEST(E2bWatcherTable, EventsWaitUntilPolledInOrder) {
  WatcherTable t;
  auto id = t.Add("sb", 0);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->size(), 32u);
  auto none = t.Take("sb", *id, 1);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_TRUE(t.Push(*id, Ev("a")));
  EXPECT_TRUE(t.Push(*id, Ev("b")));
  auto got = t.Take("sb", *id, 2);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0]["name"], "a");
  EXPECT_EQ((*got)[1]["name"], "b");
  EXPECT_TRUE(t.Take("sb", *id, 3)->empty()) << "taken once";
}

TEST(E2bWatcherTable, IdsAreScopedToTheirSandboxAndUnknownOnesAreNotFound) {
  WatcherTable t;
  auto id = *t.Add("a", 0);
  auto other = t.Take("b", id, 0);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code(), Code::kS211);
  EXPECT_FALSE(t.Remove("b", id));
  EXPECT_EQ(t.Take("a", "nope", 0).error().code(), Code::kS211);
  EXPECT_TRUE(t.Remove("a", id));
  EXPECT_FALSE(t.Wanted(id)) << "a removed watcher's watch ends";
  EXPECT_FALSE(t.Push(id, Ev("late")));
  EXPECT_EQ(t.Take("a", id, 0).error().code(), Code::kS211);
  EXPECT_FALSE(t.Remove("a", id));
}

TEST(E2bWatcherTable, CapsPerSandboxAndInAll) {
  WatcherLimits l;
  l.max_per_sandbox = 2;
  l.max_total = 3;
  WatcherTable t(l);
  std::set<std::string> ids;
  ids.insert(*t.Add("a", 0));
  ids.insert(*t.Add("a", 0));
  EXPECT_EQ(ids.size(), 2u) << "ids are distinct";
  auto third = t.Add("a", 0);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.error().code(), Code::kS400);
  ASSERT_TRUE(t.Add("b", 0).ok());
  EXPECT_EQ(t.Add("c", 0).error().code(), Code::kS400);
  EXPECT_EQ(t.RemoveSandbox("a").size(), 2u);
  EXPECT_TRUE(t.Add("c", 0).ok()) << "room again";
  EXPECT_EQ(t.size(), 2u);
}

TEST(E2bWatcherTable, AFullBufferIsAnErrorOnTheNextPollNeverAGap) {
  WatcherLimits l;
  l.max_events = 3;
  WatcherTable t(l);
  auto id = *t.Add("sb", 0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(t.Push(id, Ev(std::to_string(i))));
  EXPECT_FALSE(t.Push(id, Ev("one too many"))) << "the watch should end";
  EXPECT_FALSE(t.Wanted(id));
  auto r = t.Take("sb", id, 1);
  ASSERT_FALSE(r.ok()) << "not the three events without the fourth";
  EXPECT_EQ(r.error().code(), Code::kS400);
  EXPECT_NE(r.error().message().find("lost"), std::string::npos);
  EXPECT_EQ(t.Take("sb", id, 2).error().code(), Code::kS211) << "removed with the error";

  WatcherLimits b;
  b.max_bytes = 100;
  WatcherTable bytes(b);
  auto big = *bytes.Add("sb", 0);
  EXPECT_FALSE(bytes.Push(big, Ev(std::string(200, 'x'))));
  EXPECT_EQ(bytes.Take("sb", big, 0).error().code(), Code::kS400);
}

TEST(E2bWatcherTable, AnEndedWatchAnswersItsEventsThenItsEnd) {
  WatcherTable t;
  auto gone = *t.Add("sb", 0);
  EXPECT_TRUE(t.Push(gone, Ev("last")));
  t.End(gone, OkStatus());
  EXPECT_FALSE(t.Push(gone, Ev("after the end")));
  auto last = t.Take("sb", gone, 1);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->size(), 1u);
  auto end = t.Take("sb", gone, 2);
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.error().code(), Code::kS211);
  EXPECT_NE(end.error().message().find("went away"), std::string::npos);
  EXPECT_EQ(t.size(), 0u);

  auto failed = *t.Add("sb", 0);
  t.End(failed, Error(Code::kS004, "the sandbox stopped"));
  EXPECT_EQ(t.Take("sb", failed, 3).error().code(), Code::kS004);
  EXPECT_EQ(t.size(), 0u);
}

TEST(E2bWatcherTable, WatchersNotPolledForLongExpire) {
  WatcherLimits l;
  l.idle_ms = 1000;
  WatcherTable t(l);
  auto polled = *t.Add("sb", 0);
  auto idle = *t.Add("sb", 0);
  ASSERT_TRUE(t.Take("sb", polled, 900).ok());
  EXPECT_TRUE(t.Expire(999).empty());
  auto gone = t.Expire(1000);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0], idle);
  EXPECT_TRUE(t.Wanted(polled));
  EXPECT_FALSE(t.Wanted(idle));
  EXPECT_EQ(t.Expire(1900).size(), 1u);
  EXPECT_EQ(t.RemoveAll().size(), 0u);
}

}  // namespace
}  // namespace skiff::e2b
