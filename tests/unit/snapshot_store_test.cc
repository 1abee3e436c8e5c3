// The snapshot store (sandbox/snapshot_store.h) and its records: caps,
// names, what a restart keeps and removes, hibernations, and records read
// back from disk as the hostile input they may be.
#include "sandbox/snapshot_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include "base/file_io.h"
#include "support/temp_dir.h"

namespace skiff {
namespace {

using nlohmann::json;

class SnapshotStoreTest : public ::testing::Test {
 protected:
  // A saved snapshot of `bytes` bytes; its record.
  Result<SnapshotRecord> Save(SnapshotStore& s, const std::string& name, bool internal = false,
                              uint64_t bytes = 100, std::optional<HibernatedSandbox> sandbox = std::nullopt) {
    SKIFF_ASSIGN_OR_RETURN(SnapshotStore::Pending p, s.Begin(name, internal));
    std::ofstream(p.dir + "/state") << std::string(bytes, 'x');
    SnapshotRecord r;
    r.name = name;
    r.source_sandbox_id = "00000000-0000-4000-8000-000000000001";
    r.image = "base";
    r.isolation = "microvm";
    r.memory = true;
    r.size_bytes = bytes;
    r.created_unix_ms = 1000;
    r.internal = internal;
    r.sandbox = std::move(sandbox);
    return s.Commit(p, std::move(r));
  }

  bool Exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
  }

  testing_support::TempDir tmp_{"snapstore"};
  std::string root_ = tmp_.path();
};

HibernatedSandbox Hib() {
  HibernatedSandbox h;
  h.sandbox_id = "00000000-0000-4000-8000-0000000000aa";
  h.name = "keeper";
  h.env = {{"K", "v"}, {"EMPTY", ""}};
  h.idle_timeout_secs = 60;
  h.hibernate_on_idle = true;
  h.pause_on_idle = true;
  h.auto_resume = true;
  h.created_unix_ms = 42;
  h.network = true;
  return h;
}

TEST_F(SnapshotStoreTest, NamesCapsAndDelete) {
  SnapshotStore s(root_, 1 << 20, 2);
  auto a = Save(s, "a");
  ASSERT_TRUE(a.ok()) << a.error().message();
  EXPECT_EQ(s.Get("a")->snapshot_id, a->snapshot_id);
  EXPECT_EQ(s.Get(a->snapshot_id)->name, "a");
  EXPECT_EQ(Save(s, "a").error().code(), Code::kS001) << "names are unique";
  ASSERT_TRUE(Save(s, "").ok());
  EXPECT_EQ(Save(s, "c").error().code(), Code::kS400) << "snapshot_max_count";
  EXPECT_TRUE(Save(s, "", true).ok()) << "internal ones are not counted";
  EXPECT_EQ(s.List().size(), 2u) << "nor listed";

  s.Use(a->snapshot_id, "sb-1");
  EXPECT_EQ(s.Delete("a").error().code(), Code::kS008);
  s.Unuse(a->snapshot_id, "sb-1");
  EXPECT_TRUE(s.Delete("a").ok());
  EXPECT_FALSE(Exists(s.Dir(a->snapshot_id)));
  EXPECT_EQ(s.Delete("a").error().code(), Code::kS007);
  EXPECT_EQ(s.Get("a").error().code(), Code::kS007);
}

TEST_F(SnapshotStoreTest, ASaveBeyondTheSizeCapIsRemoved) {
  SnapshotStore s(root_, 2000, 10);
  ASSERT_TRUE(Save(s, "big", false, 1000).ok());  // and its record, a few hundred bytes
  auto over = Save(s, "over", false, 900);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code(), Code::kS400);
  EXPECT_EQ(s.List().size(), 1u);
  int dirs = 0;
  for (const auto& r : s.List()) dirs += Exists(s.Dir(r.snapshot_id));
  EXPECT_EQ(dirs, 1);
}

TEST_F(SnapshotStoreTest, AnInternalSnapshotGoesWithItsLastUserUnlessClosed) {
  SnapshotStore s(root_, 1 << 20, 10);
  auto fork = Save(s, "", true);
  ASSERT_TRUE(fork.ok());
  s.Use(fork->snapshot_id, "x");
  s.Use(fork->snapshot_id, "y");
  s.Unuse(fork->snapshot_id, "x");
  EXPECT_TRUE(Exists(s.Dir(fork->snapshot_id)));
  s.Unuse(fork->snapshot_id, "y");
  EXPECT_FALSE(Exists(s.Dir(fork->snapshot_id)));

  auto hib = Save(s, "", true, 100, Hib());
  ASSERT_TRUE(hib.ok());
  auto fork2 = Save(s, "", true);
  ASSERT_TRUE(fork2.ok());
  s.Use(hib->snapshot_id, "z");
  s.Use(fork2->snapshot_id, "w");
  s.Close();  // shutdown: the next daemon takes the hibernation up
  s.Unuse(hib->snapshot_id, "z");
  s.Unuse(fork2->snapshot_id, "w");
  EXPECT_TRUE(Exists(s.Dir(hib->snapshot_id)));
  EXPECT_FALSE(Exists(s.Dir(fork2->snapshot_id))) << "a fork's snapshot leaves no trace on shutdown";
}

TEST_F(SnapshotStoreTest, ARestartKeepsSnapshotsAndHibernationsOnly) {
  std::string listed, hib, fork;
  {
    SnapshotStore s(root_, 1 << 20, 10);
    listed = Save(s, "kept")->snapshot_id;
    hib = Save(s, "", true, 100, Hib())->snapshot_id;
    fork = Save(s, "", true)->snapshot_id;
    // A save cut short: a directory without its record.
    ASSERT_TRUE(s.Begin("cut", false).ok());
  }
  // Hostile or broken records.
  ASSERT_EQ(::mkdir((root_ + "/00000000-0000-4000-8000-00000000000b").c_str(), 0700), 0);
  ASSERT_TRUE(
      WriteFileAtomic(root_ + "/00000000-0000-4000-8000-00000000000b/record.json", "{not json", 0600).ok());
  ASSERT_EQ(::mkdir((root_ + "/00000000-0000-4000-8000-00000000000c").c_str(), 0700), 0);
  {
    // Another snapshot's record copied in: its id is not its directory's.
    std::ifstream in(root_ + "/" + listed + "/record.json");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    ASSERT_TRUE(
        WriteFileAtomic(root_ + "/00000000-0000-4000-8000-00000000000c/record.json", text, 0600).ok());
  }

  SnapshotStore s(root_, 1 << 20, 10);
  s.Load();
  ASSERT_EQ(s.List().size(), 1u);
  EXPECT_EQ(s.List()[0].snapshot_id, listed);
  auto hibs = s.Hibernations();
  ASSERT_EQ(hibs.size(), 1u);
  EXPECT_EQ(hibs[0].snapshot_id, hib);
  ASSERT_TRUE(hibs[0].sandbox.has_value());
  const HibernatedSandbox& h = *hibs[0].sandbox;
  EXPECT_EQ(h.sandbox_id, Hib().sandbox_id);
  EXPECT_EQ(h.name, "keeper");
  EXPECT_EQ(h.env, Hib().env);
  EXPECT_EQ(h.idle_timeout_secs, 60u);
  EXPECT_TRUE(h.pause_on_idle && h.hibernate_on_idle && h.auto_resume);
  EXPECT_EQ(h.created_unix_ms, 42);
  EXPECT_TRUE(h.network);
  EXPECT_FALSE(Exists(s.Dir(fork))) << "a fork's snapshot outlives no daemon";
  EXPECT_FALSE(Exists(root_ + "/00000000-0000-4000-8000-00000000000b"));
  EXPECT_FALSE(Exists(root_ + "/00000000-0000-4000-8000-00000000000c"));
  EXPECT_EQ(std::system(("test $(ls '" + root_ + "' | wc -l) -eq 2").c_str()), 0)
      << "only the listed one and the hibernation are left";
}

TEST_F(SnapshotStoreTest, PublishMakesAHibernationAnOrdinarySnapshot) {
  SnapshotStore s(root_, 1 << 20, 10);
  auto hib = Save(s, "", true, 100, Hib());
  ASSERT_TRUE(hib.ok());
  auto pub = s.Publish(hib->snapshot_id, "hibernated-x");
  ASSERT_TRUE(pub.ok());
  EXPECT_FALSE(pub->internal);
  EXPECT_FALSE(pub->sandbox.has_value());
  EXPECT_EQ(s.List().size(), 1u);
  EXPECT_TRUE(s.Hibernations().empty());
  // And so it stays across a restart.
  SnapshotStore again(root_, 1 << 20, 10);
  again.Load();
  ASSERT_EQ(again.List().size(), 1u);
  EXPECT_EQ(again.List()[0].name, "hibernated-x");
  // A name already taken: it is published without one.
  auto other = Save(again, "", true, 100, Hib());
  ASSERT_TRUE(other.ok());
  auto unnamed = again.Publish(other->snapshot_id, "hibernated-x");
  ASSERT_TRUE(unnamed.ok());
  EXPECT_EQ(unnamed->name, "");
}

TEST(SnapshotRecordTest, MalformedSandboxesAreRefused) {
  SnapshotRecord r;
  r.snapshot_id = "00000000-0000-4000-8000-000000000001";
  r.source_sandbox_id = "x";
  r.image = "base";
  r.isolation = "microvm";
  r.internal = true;
  r.sandbox = Hib();
  json good = r.ToRecordJson();
  ASSERT_TRUE(SnapshotRecord::FromRecordJson(good).ok());
  auto bad = [&](const std::function<void(json&)>& edit) {
    json j = good;
    edit(j);
    return !SnapshotRecord::FromRecordJson(j).ok();
  };
  EXPECT_TRUE(bad([](json& j) { j["sandbox"]["sandbox_id"] = "../../etc"; }));
  EXPECT_TRUE(bad([](json& j) { j["sandbox"]["env"] = "K=v"; }));
  EXPECT_TRUE(bad([](json& j) { j["sandbox"]["env"] = json::array({json::array({"K"})}); }));
  EXPECT_TRUE(bad([](json& j) { j["sandbox"]["env"] = json::array({json::array({"K", 5})}); }));
  EXPECT_TRUE(bad([](json& j) { j["sandbox"]["auto_resume"] = "yes"; }));
  EXPECT_TRUE(bad([](json& j) { j["sandbox"]["name"] = std::string(70000, 'n'); }));
  EXPECT_TRUE(bad([](json& j) { j["sandbox"].erase("created_unix_ms"); }));
  EXPECT_TRUE(bad([](json& j) { j["internal"] = false; })) << "a listed snapshot holds no sandbox";
  EXPECT_TRUE(bad([](json& j) { j["snapshot_id"] = "not-a-uuid"; }));
  EXPECT_TRUE(bad([](json& j) { j["isolation"] = "docker"; }));
  EXPECT_TRUE(bad([](json& j) { j = json::array(); }));
}

}  // namespace
}  // namespace skiff
