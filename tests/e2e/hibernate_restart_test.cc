// Hibernated microVM sandboxes outlive their daemon (docs/snapshots.md): a
// daemon stopped (SIGTERM) or killed (SIGKILL) with a hibernated sandbox
// leaves its saved state, and the next daemon lists that sandbox again —
// same id, name, env and settings, paused and hibernated — and wakes it
// with its processes and files. One the next daemon may not run becomes an
// ordinary snapshot. Nothing stays once it is stopped or deleted.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "daemon_harness.h"
#include "support/temp_dir.h"

namespace skiff::e2e {
namespace {

// The running test's snapshot directory (HibernateRestart makes it), which
// each of its daemons in turn is configured with.
std::string& DirPath() {
  static std::string path;
  return path;
}
std::string Dir() { return DirPath(); }

std::string Config(const std::string& images) {
  return "snapshot_dir: " + Dir() + "\nimage_allowlist: [" + images + "]\nisolation: microvm\n";
}

// Entries of the snapshot directory (each snapshot is one).
int SnapshotDirs() {
  int n = 0;
  if (DIR* d = ::opendir(Dir().c_str())) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') n++;
    ::closedir(d);
  }
  return n;
}

json Ok(Daemon& d, const std::string& fn, const json& payload) {
  Http r = d.Call(fn, payload);
  EXPECT_EQ(r.status, 200) << fn << ": " << r.body;
  return r.Json();
}

json Entry(Daemon& d, const std::string& id) {
  const json listed = Ok(d, "sandbox::list", json::object());
  for (const auto& e : listed["sandboxes"])
    if (e["sandbox_id"] == id) return e;
  return nullptr;
}

std::string Sh(Daemon& d, const std::string& id, const std::string& script) {
  return Ok(d, "sandbox::exec", {{"sandbox_id", id}, {"argv", {"sh", "-c", script}}}).value("stdout", "");
}

class HibernateRestart : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.emplace("hib-restart");
    DirPath() = dir_->path();
  }
  // Removes it with what the daemons left, failing the test if it cannot.
  void TearDown() override { dir_.reset(); }

 private:
  std::optional<testing_support::TempDir> dir_;
};

const char* kTicks = "a=$(cat /tmp/n); sleep 1; b=$(cat /tmp/n); test $b -gt $a && echo ticking";

TEST_F(HibernateRestart, AHibernatedSandboxWakesUnderTheNextDaemon) {
  std::string id;
  {
    Daemon d(Config("base"));
    ASSERT_TRUE(d.ready()) << d.Log();
    json c = Ok(d, "sandbox::create",
                {{"image", "base"}, {"name", "keeper"}, {"env", {{"K", "v"}}}, {"auto_resume", true}});
    id = c["sandbox_id"];
    ASSERT_FALSE(id.empty());
    Sh(d, id,
       "echo saved > /root/state; (i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.2; done) "
       ">/dev/null 2>&1 &");
    EXPECT_EQ(Ok(d, "sandbox::pause", {{"sandbox_id", id}, {"mode", "disk"}})["hibernated"], true);
    EXPECT_EQ(d.Terminate(), 0) << d.Log();
  }
  EXPECT_EQ(SnapshotDirs(), 1) << "the hibernation outlives the daemon";

  {
    Daemon d(Config("base"));
    ASSERT_TRUE(d.ready()) << d.Log();
    json e = Entry(d, id);
    ASSERT_FALSE(e.is_null()) << "not listed again";
    EXPECT_EQ(e["state"], "paused");
    EXPECT_EQ(e["hibernated"], true);
    EXPECT_EQ(e["name"], "keeper");
    EXPECT_EQ(e["isolation"], "microvm");
    EXPECT_TRUE(Ok(d, "sandbox::snapshot::list", json::object())["snapshots"].empty())
        << "a hibernation is not a listed snapshot";
    // auto_resume: the call wakes it; its processes, files and env are back.
    EXPECT_EQ(Sh(d, id, "cat /root/state; echo $K"), "saved\nv\n");
    EXPECT_EQ(Sh(d, id, kTicks), "ticking\n");
    EXPECT_EQ(Entry(d, id)["hibernated"], false);
    EXPECT_EQ(SnapshotDirs(), 0) << "a woken sandbox's saved state goes";
    // Again, and this time the daemon is killed.
    EXPECT_EQ(Ok(d, "sandbox::pause", {{"sandbox_id", id}, {"mode", "disk"}})["hibernated"], true);
    ::kill(d.pid(), SIGKILL);
    d.WaitExit(std::chrono::seconds(30));
  }
  EXPECT_EQ(SnapshotDirs(), 1);

  {
    Daemon d(Config("base"));
    ASSERT_TRUE(d.ready()) << d.Log();
    ASSERT_EQ(Entry(d, id)["hibernated"], true);
    Ok(d, "sandbox::resume", {{"sandbox_id", id}});
    EXPECT_EQ(Sh(d, id, "cat /root/state"), "saved\n");
    EXPECT_EQ(Ok(d, "sandbox::pause", {{"sandbox_id", id}, {"mode", "disk"}})["hibernated"], true);
    // Stopped while hibernated: its saved state goes with it.
    Ok(d, "sandbox::stop", {{"sandbox_id", id}, {"wait", true}});
    EXPECT_EQ(SnapshotDirs(), 0);
    EXPECT_EQ(d.Terminate(), 0);
  }
}

// The guest's NIC once its link is up (the guest sets it up as it starts).
const char* kLinkUp =
    "for i in $(seq 100); do [ \"$(cat /sys/class/net/eth0/operstate)\" = up ] && break; sleep 0.1; done; "
    "cat /sys/class/net/eth0/operstate";

// network: true survives too: the record says so, and the next daemon's
// wake gives the VM a network of its own again, behind the same address.
TEST_F(HibernateRestart, ANetworkedSandboxWakesUnderTheNextDaemonWithItsNetwork) {
  std::string id;
  {
    Daemon d(Config("base"));
    ASSERT_TRUE(d.ready()) << d.Log();
    id = Ok(d, "sandbox::create", {{"image", "base"}, {"network", true}})["sandbox_id"];
    ASSERT_FALSE(id.empty());
    EXPECT_EQ(Sh(d, id, std::string("echo kept > /root/state; ") + kLinkUp), "up\n");
    EXPECT_EQ(Ok(d, "sandbox::pause", {{"sandbox_id", id}, {"mode", "disk"}})["hibernated"], true);
    EXPECT_EQ(d.Terminate(), 0) << d.Log();
  }
  {
    Daemon d(Config("base"));
    ASSERT_TRUE(d.ready()) << d.Log();
    json e = Entry(d, id);
    ASSERT_FALSE(e.is_null()) << "not listed again";
    EXPECT_EQ(e["network"], true) << e.dump();
    EXPECT_EQ(e["hibernated"], true);
    Ok(d, "sandbox::resume", {{"sandbox_id", id}});
    EXPECT_EQ(Sh(d, id, std::string("cat /root/state; ") + kLinkUp), "kept\nup\n");
    Ok(d, "sandbox::stop", {{"sandbox_id", id}, {"wait", true}});
    EXPECT_EQ(SnapshotDirs(), 0);
    EXPECT_EQ(d.Terminate(), 0);
  }
}

TEST_F(HibernateRestart, OneTheNextDaemonMayNotRunIsKeptAsASnapshot) {
  std::string id;
  {
    Daemon d(Config("base"));
    ASSERT_TRUE(d.ready()) << d.Log();
    id = Ok(d, "sandbox::create", {{"image", "base"}})["sandbox_id"];
    Sh(d, id, "echo kept > /root/state");
    EXPECT_EQ(Ok(d, "sandbox::pause", {{"sandbox_id", id}, {"mode", "disk"}})["hibernated"], true);
    EXPECT_EQ(d.Terminate(), 0);
  }
  {
    // base is no longer allowed: the sandbox cannot come back, its state can.
    Daemon d(Config("python"));
    ASSERT_TRUE(d.ready()) << d.Log();
    EXPECT_TRUE(Entry(d, id).is_null());
    json snaps = Ok(d, "sandbox::snapshot::list", json::object())["snapshots"];
    ASSERT_EQ(snaps.size(), 1u) << snaps.dump();
    EXPECT_EQ(snaps[0]["name"], "hibernated-" + id);
    EXPECT_EQ(snaps[0]["source_sandbox_id"], id);
    EXPECT_EQ(snaps[0]["contents"], "memory+disk");
    EXPECT_EQ(d.Terminate(), 0);
  }
  {
    // Allowed again: a sandbox from that snapshot has the files.
    Daemon d(Config("base"));
    ASSERT_TRUE(d.ready()) << d.Log();
    json c = Ok(d, "sandbox::create", {{"snapshot", "hibernated-" + id}});
    EXPECT_EQ(Sh(d, c["sandbox_id"], "cat /root/state"), "kept\n");
    Ok(d, "sandbox::stop", {{"sandbox_id", c["sandbox_id"]}, {"wait", true}});
    Ok(d, "sandbox::snapshot::delete", {{"snapshot", "hibernated-" + id}});
    EXPECT_EQ(SnapshotDirs(), 0);
    EXPECT_EQ(d.Terminate(), 0);
  }
}

}  // namespace
}  // namespace skiff::e2e
