// Image leases with real sandboxes (jail backend, needs root): a running
// sandbox, in this process or in another one (an embedded `skiff run`),
// keeps its image's files from gc and `skiff image rm`; stopping it or
// killing its process releases them. Also: the image config's Env,
// WorkingDir and User become the sandbox's defaults.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "base/sha256.h"
#include "images/oci.h"
#include "images/recipe.h"
#include "images/store.h"
#include "sandbox/backends.h"
#include "support/temp_dir.h"

namespace skiff {
namespace {

namespace fs = std::filesystem;
using images::Store;

std::string Slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void Spit(const std::string& p, const std::string& data) {
  std::ofstream f(p, std::ios::binary);
  f << data;
}

// A minimal userland: the static busybox (busybox-static) and a passwd with
// user `app` (uid 1234, gid 2345, also in group `extra` 3000).
void MakeTinyRootfs(const std::string& root) {
  for (const char* d : {"bin", "etc", "work", "tmp", "proc", "dev", "sys", "root"}) {
    fs::create_directories(root + "/" + d);
  }
  fs::copy_file("/bin/busybox", root + "/bin/busybox");
  for (const char* a : {"sh", "sleep", "id", "pwd", "cat", "env"}) {
    fs::create_symlink("busybox", root + "/bin/" + a);
  }
  Spit(root + "/etc/passwd", "root:x:0:0:root:/root:/bin/sh\napp:x:1234:2345:app:/work:/bin/sh\n");
  Spit(root + "/etc/group", "root:x:0:\napp:x:2345:\nextra:x:3000:root,app\n");
}

bool WaitFor(const std::function<bool()>& cond, int seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return cond();
}

class ImageLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the jail backend needs root on this host";
    if (!fs::exists("/bin/busybox")) GTEST_SKIP() << "needs busybox-static";
    setenv("SKIFF_AGENT", SKIFF_BINARY_DIR "/cmd/skiff-agent/skiff-agent", 1);
    dir_.emplace("lease-test");
    // The jail's unprivileged ids must traverse down to the rootfs.
    ::chmod(dir_->path().c_str(), 0711);
    store_root_ = *dir_ / "images";
  }
  void TearDown() override {
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      ::waitpid(child_, nullptr, 0);
    }
    mgr_.reset();
    // Whatever a killed `skiff run` left (its agent, cgroup, state dir) is an
    // orphan now: a new manager's startup removes it, as a daemon's would.
    Config cfg;
    cfg.isolation = "jail";
    if (auto m = MakeSandboxManager(cfg); m.ok()) (*m)->Shutdown();
    dir_.reset();
  }

  std::unique_ptr<SandboxManager> Manager(Config cfg) {
    cfg.images_dir = store_root_;
    cfg.allow_all_images = true;
    cfg.isolation = "jail";
    auto m = MakeSandboxManager(cfg);
    EXPECT_TRUE(m.ok()) << m.error().ToString();
    return m.ok() ? std::move(m).value() : nullptr;
  }

  // mgr_ with custom image "tiny" (a docker-save archive of the tiny
  // rootfs, auto-installed on first create); returns the image's digest.
  std::string UseTinyImage() {
    std::string archive = *dir_ / "tiny.tar";
    std::string digest = Sha256Hex(MakeArchive(archive));
    Config c;
    c.custom_images = {{"tiny", archive}};
    mgr_ = Manager(c);
    return digest;
  }

  // A docker-save archive of the tiny rootfs; returns its config bytes.
  std::string MakeArchive(const std::string& out) {
    std::string stage = *dir_ / "stage", rootfs = stage + "/rootfs";
    MakeTinyRootfs(rootfs);
    std::string layer = stage + "/layer.tar";
    EXPECT_EQ(std::system(("tar -C " + rootfs + " -cf " + layer + " .").c_str()), 0);
    auto diff = images::LayerDiffId(layer);
    EXPECT_TRUE(diff.ok());
    nlohmann::json config = {
        {"architecture", "amd64"},
        {"os", "linux"},
        {"config", {{"Env", {"PATH=/bin", "MODE=from-image"}}, {"WorkingDir", "/work"}, {"User", "app"}}},
        {"rootfs", {{"type", "layers"}, {"diff_ids", {*diff}}}}};
    std::string cfg = config.dump();
    std::string cfg_name = Sha256Hex(cfg) + ".json";
    Spit(stage + "/" + cfg_name, cfg);
    nlohmann::json manifest = {{{"Config", cfg_name}, {"RepoTags", {"tiny:1"}}, {"Layers", {"layer.tar"}}}};
    Spit(stage + "/manifest.json", manifest.dump());
    EXPECT_EQ(std::system(
                  ("tar -C " + stage + " -cf " + out + " manifest.json " + cfg_name + " layer.tar").c_str()),
              0);
    return cfg;
  }

  std::optional<testing_support::TempDir> dir_;  // made once the test is not skipped
  std::string store_root_;
  pid_t child_ = -1;
  std::unique_ptr<SandboxManager> mgr_;
};

TEST_F(ImageLeaseTest, SandboxInAnotherProcessKeepsItsImageUntilKilled) {
  // The tiny rootfs stands in for the `base` preset of a private store.
  Store store(store_root_);
  auto recipe = images::PresetRecipe("base");
  ASSERT_TRUE(recipe.ok());
  const std::string d = recipe->digest;
  auto tmp = store.MakeTemp(d);
  ASSERT_TRUE(tmp.ok());
  MakeTinyRootfs(*tmp + "/rootfs");
  images::ImageMeta meta;
  meta.name = "base";
  meta.digest = d;
  meta.kind = "preset";
  meta.source = "test";
  meta.env = {"PATH=/bin"};
  meta.workdir = "/";
  meta.user = "root";
  ASSERT_TRUE(store.Commit(*tmp, meta).ok());
  ASSERT_TRUE(store.SetCurrent("base", d).ok());
  EXPECT_FALSE(store.InUse(d));

  std::string log = *dir_ / "run.log";
  child_ = ::fork();
  ASSERT_GE(child_, 0);
  if (child_ == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::setenv("SKIFF_IMAGES_DIR", store_root_.c_str(), 1);
    ::execl(SKIFF_BINARY_DIR "/cmd/skiff/skiff", "skiff", "run", "--isolation", "jail", "base", "--", "sleep",
            "300", nullptr);
    _exit(127);
  }
  auto alive = [&] { return ::waitpid(child_, nullptr, WNOHANG) == 0; };
  ASSERT_TRUE(WaitFor([&] { return store.InUse(d) || !alive(); }, 60)) << Slurp(log);
  ASSERT_TRUE(alive()) << "skiff run ended early: " << Slurp(log);
  ASSERT_TRUE(store.InUse(d));

  // rm is refused and changes nothing.
  auto rm = store.Remove("base");
  ASSERT_FALSE(rm.ok());
  EXPECT_EQ(rm.error().code(), Code::kS300);
  EXPECT_NE(rm.error().message().find("in use by a running sandbox"), std::string::npos)
      << rm.error().message();
  EXPECT_EQ(store.Current("base"), d);
  // gc keeps the unreferenced but running entry.
  ASSERT_TRUE(store.RemoveCurrent("base").ok());
  auto gc = store.Gc();
  ASSERT_TRUE(gc.ok()) << gc.error().message();
  EXPECT_EQ(gc->kept_in_use, std::vector<std::string>{d});
  EXPECT_TRUE(gc->removed.empty());
  EXPECT_TRUE(store.Read(d));
  EXPECT_TRUE(fs::exists(store.RootfsDir(d) + "/bin/busybox"));

  // A crash of the holder releases the lease; then gc frees the entry.
  ::kill(child_, SIGKILL);
  ::waitpid(child_, nullptr, 0);
  child_ = -1;
  ASSERT_TRUE(WaitFor([&] { return !store.InUse(d); }, 30)) << "lease outlived its holder";
  gc = store.Gc();
  ASSERT_TRUE(gc.ok()) << gc.error().message();
  EXPECT_EQ(gc->removed, std::vector<std::string>{d});
  EXPECT_FALSE(fs::exists(store.EntryDir(d)));
}

TEST_F(ImageLeaseTest, StopReleasesTheLeaseAndRmThenDeletes) {
  const std::string d = UseTinyImage();
  ASSERT_TRUE(mgr_);
  CreateSpec cs;
  cs.image = "tiny";
  auto a = mgr_->Create(cs);
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  auto b = mgr_->Create(cs);
  ASSERT_TRUE(b.ok()) << b.error().ToString();
  Store store(store_root_);
  EXPECT_TRUE(store.InUse(d));
  EXPECT_FALSE(store.Remove("tiny").ok());
  // One of two sandboxes stopped: still in use.
  ASSERT_TRUE(mgr_->Stop(a->sandbox_id, true).ok());
  EXPECT_TRUE(store.InUse(d));
  auto gc = store.Gc();
  ASSERT_TRUE(gc.ok());
  EXPECT_TRUE(store.Read(d)) << "gc removed a referenced entry";
  ASSERT_TRUE(mgr_->Stop(b->sandbox_id, true).ok());
  EXPECT_FALSE(store.InUse(d));
  auto rm = store.Remove("tiny");
  ASSERT_TRUE(rm.ok()) << rm.error().ToString();
  EXPECT_EQ(rm->removed, std::vector<std::string>{d});
  EXPECT_GT(rm->bytes_freed, 0u);
  EXPECT_FALSE(fs::exists(store.EntryDir(d)));
  EXPECT_FALSE(store.Current("tiny"));
  // Not installed any more: with auto_install the next create imports again.
  auto again = mgr_->Create(cs);
  ASSERT_TRUE(again.ok()) << again.error().ToString();
  EXPECT_TRUE(store.InUse(d));
  ASSERT_TRUE(mgr_->Stop(again->sandbox_id, true).ok());
}

TEST_F(ImageLeaseTest, ImageEnvWorkdirAndUserAreSandboxDefaults) {
  UseTinyImage();
  ASSERT_TRUE(mgr_);
  CreateSpec cs;
  cs.image = "tiny";
  auto sb = mgr_->Create(cs);
  ASSERT_TRUE(sb.ok()) << sb.error().ToString();
  ExecSpec es;
  es.sandbox_id = sb->sandbox_id;
  es.argv = {"sh", "-c", "id -u; id -g; id -G; pwd; echo $MODE"};
  auto r = mgr_->Exec(es);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->stderr_text;
  EXPECT_EQ(r->stdout_text, "1234\n2345\n2345 3000\n/work\nfrom-image\n");
  // Create-time env and exec workdir still override the image's.
  es.env = {{"MODE", "from-exec"}};
  es.workdir = "/tmp";
  r = mgr_->Exec(es);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->stdout_text, "1234\n2345\n2345 3000\n/tmp\nfrom-exec\n");
  ASSERT_TRUE(mgr_->Stop(sb->sandbox_id, true).ok());
}

}  // namespace
}  // namespace skiff
