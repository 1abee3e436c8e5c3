// The microVM backend end to end: real QEMU (TCG here, KVM where /dev/kvm
// opens), the project's guest kernel, skiff-agent as /init, a busybox root
// filesystem as a read-only erofs block image. One VM is shared by most
// checks (each boot costs seconds under emulation); the SIGKILL test boots
// its own.
#include "isolation/microvm/microvm.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/fs_util.h"
#include "base/paths.h"
#include "base/sha256.h"
#include "base/text.h"
#include "busybox_rootfs.h"
#include "protocol/client.h"
#include "support/temp_dir.h"

namespace skiff {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string ReadFile(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string TestRootfs() { return testing_support::BusyboxRootfs(); }

struct ExecOut {
  std::string out, err;
  json result;
  bool closed = false;
  json error;
};

ExecOut Exec(proto::Client& c, std::vector<std::string> argv, int timeout_ms = 20000) {
  ExecOut r;
  auto s = c.Open(json{{"op", "exec"}, {"argv", argv}, {"timeout_ms", timeout_ms}});
  if (!s.ok()) {
    r.error = json{{"message", s.error().message()}};
    return r;
  }
  (void)(*s)->End(proto::kStdin);
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms + 10000);
  for (;;) {
    auto e = (*s)->Next(deadline);
    if (!e) {
      r.error = json{{"message", "timeout"}};
      return r;
    }
    switch (e->kind) {
      case proto::Event::Kind::kData:
        (e->channel == proto::kStdout ? r.out : r.err) += e->data;
        break;
      case proto::Event::Kind::kResult:
        r.result = e->json;
        return r;
      case proto::Event::Kind::kError:
        r.error = e->json;
        return r;
      case proto::Event::Kind::kClosed:
        r.closed = true;
        r.error = e->json;
        return r;
      default:
        break;
    }
  }
}

bool ProcessExists(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

class MicrovmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ::setenv("SKIFF_AGENT", SKIFF_BINARY_DIR "/cmd/skiff-agent/skiff-agent", 1);
    iso_ = MakeMicrovmIsolator().release();
    rootfs_ = new std::string(TestRootfs());
  }
  static void TearDownTestSuite() {
    if (vm_) vm_->client.reset();
    if (vm_ && vm_->inst) vm_->inst->Stop(2000ms);
    delete vm_;
    vm_ = nullptr;
    delete iso_;
    delete rootfs_;
  }

  struct Vm {
    std::unique_ptr<Instance> inst;
    std::shared_ptr<proto::Client> client;
    double create_ms = 0;
  };

  static SandboxPolicy Policy() {
    SandboxPolicy p;
    p.id = NewUuid();
    p.hostname = "skiff-test";
    p.rootfs.block_image = *rootfs_;
    p.rootfs.block_fstype = "erofs";
    p.cpus = 1;
    p.memory_mb = 256;
    return p;
  }

  // Boots a VM and connects; fails the test on error.
  static std::unique_ptr<Vm> Boot(const std::string& hostname = "skiff-test") {
    auto vm = std::make_unique<Vm>();
    auto t0 = Clock::now();
    SandboxPolicy p = Policy();
    p.hostname = hostname;
    auto inst = iso_->Start(p);
    if (!inst.ok()) {
      ADD_FAILURE() << inst.error().ToString();
      return nullptr;
    }
    vm->inst = std::move(inst).value();
    auto client = proto::Client::Connect(vm->inst->TakeChannel(), 10000ms);
    if (!client.ok()) {
      ADD_FAILURE() << client.error().ToString() << " / " << vm->inst->ExitReport();
      return nullptr;
    }
    vm->client = std::move(client).value();
    vm->create_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    return vm;
  }

  void SetUp() override {
    ASSERT_FALSE(rootfs_->empty()) << "could not build the busybox erofs test image";
    auto st = iso_->Available();
    ASSERT_TRUE(st.ok()) << st.error().ToString();
  }

  static Vm& Shared() {
    if (!vm_) {
      auto vm = Boot();
      if (vm) vm_ = vm.release();
    }
    return *vm_;
  }
  static bool HaveShared() { return vm_ != nullptr || (Shared(), vm_ != nullptr); }

  static Isolator* iso_;
  static std::string* rootfs_;
  static Vm* vm_;
};

Isolator* MicrovmTest::iso_ = nullptr;
std::string* MicrovmTest::rootfs_ = nullptr;
MicrovmTest::Vm* MicrovmTest::vm_ = nullptr;

TEST_F(MicrovmTest, BootsAndRunsTheGuestKernel) {
  ASSERT_TRUE(HaveShared());
  Vm& vm = Shared();
  auto d = vm.inst->Describe();
  EXPECT_EQ(d["isolation"], "microvm");
  EXPECT_EQ(d["accel"], microvm::KvmUsable() ? "kvm" : "tcg");
  EXPECT_TRUE(vm.inst->Running());

  auto info = vm.client->Call({{"op", "info"}});
  ASSERT_TRUE(info.ok()) << info.error().ToString();
  EXPECT_EQ((*info)["pid"], 1);

  auto r = Exec(*vm.client, {"uname", "-r"});
  ASSERT_TRUE(r.error.is_null()) << r.error.dump();
  EXPECT_EQ(r.result["exit_code"], 0);
  utsname host{};
  ::uname(&host);
  EXPECT_NE(Trim(r.out), host.release) << "uname -r inside the VM is the host's kernel";
  std::string expected = Trim(ReadFile(paths::CacheDir() + "/kernel/current/release"));
  if (!expected.empty() && std::getenv("SKIFF_KERNEL") == nullptr) {
    EXPECT_EQ(Trim(r.out), expected);
  }
  if (info->contains("kernel") && (*info)["kernel"].is_string()) {
    EXPECT_EQ((*info)["kernel"].get<std::string>().find(host.release), std::string::npos);
  }

  auto h = Exec(*vm.client, {"hostname"});
  EXPECT_EQ(Trim(h.out), "skiff-test");

  // Measurements (logged, not asserted): host-side create, guest-side
  // agent-ready, VMM CPU and memory, exec round trip.
  std::vector<double> rtt;
  for (int i = 0; i < 15; i++) {
    auto t0 = Clock::now();
    auto t = Exec(*vm.client, {"true"});
    rtt.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    ASSERT_EQ(t.result["exit_code"], 0);
  }
  std::sort(rtt.begin(), rtt.end());
  // The channel alone: a request the agent answers without a process.
  std::vector<double> stat_rtt;
  for (int i = 0; i < 15; i++) {
    auto t0 = Clock::now();
    auto st = vm.client->Call({{"op", "fs.stat"}, {"path", "/etc/marker"}});
    stat_rtt.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    ASSERT_TRUE(st.ok()) << st.error().ToString();
  }
  std::sort(stat_rtt.begin(), stat_rtt.end());
  std::this_thread::sleep_for(1s);  // idle
  d = vm.inst->Describe();
  std::cout << "[microvm] create_to_ready_ms=" << vm.create_ms << " qemu_start_to_ready_ms=" << d["boot_ms"]
            << " guest_ready_ms=" << info->value("ready_ms", json()).dump()
            << " vmm_cpu_ms=" << d["vmm_cpu_ms"] << " vmm_rss_kib=" << d["vmm_rss_kib"]
            << " guest_rss_kib=" << d["guest_rss_kib"] << " vmm_overhead_kib=" << d["vmm_overhead_kib"]
            << " vmm_private_overhead_kib=" << d["vmm_private_overhead_kib"]
            << " exec_rtt_median_ms=" << rtt[rtt.size() / 2] << " exec_rtt_min_ms=" << rtt.front()
            << " stat_rtt_median_ms=" << stat_rtt[stat_rtt.size() / 2] << " restored=" << d["restored"]
            << " accel=" << d["accel"] << std::endl;
}

TEST_F(MicrovmTest, PauseStopsTheGuestAndResumeContinuesIt) {
  ASSERT_TRUE(HaveShared());
  Vm& vm = Shared();
  ASSERT_TRUE(vm.inst->Pause().ok());
  auto t0 = Clock::now();
  std::thread resumer([&] {
    std::this_thread::sleep_for(1500ms);
    Status st = vm.inst->Resume();
    EXPECT_TRUE(st.ok()) << st.error().ToString();
  });
  // Sent while paused: answered only once the vCPUs run again.
  auto st = vm.client->Call({{"op", "fs.stat"}, {"path", "/etc/marker"}});
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  resumer.join();
  ASSERT_TRUE(st.ok()) << st.error().ToString();
  EXPECT_GE(ms, 1400);
  EXPECT_TRUE(vm.inst->Running());
  auto r = Exec(*vm.client, {"true"});
  EXPECT_EQ(r.result["exit_code"], 0);
}

TEST_F(MicrovmTest, APausedVmStopsAtOnce) {
  auto vm = Boot();
  ASSERT_TRUE(vm);
  ASSERT_TRUE(vm->inst->Pause().ok());
  auto t0 = Clock::now();
  vm->client.reset();
  vm->inst->Stop(2000ms);
  EXPECT_LT(Clock::now() - t0, 3s);
  EXPECT_FALSE(vm->inst->Running());
  EXPECT_FALSE(vm->inst->Pause().ok());
}

// A live VM saved whole (docs/snapshots.md): the copy has the source's
// files and running processes, its own hostname and entropy, and the source
// serves on after the save (its channel was quiesced and released).
TEST_F(MicrovmTest, ASnapshotOfALiveVmRestoresItsProcessesAndFiles) {
  auto vm = Boot("skiff-src");
  ASSERT_TRUE(vm);
  auto bg = Exec(*vm->client, {"/bin/sh", "-c",
                               "echo kept > /tmp/file; (i=0; while :; do i=$((i+1)); echo $i > /tmp/n; "
                               "sleep 0.2; done) >/dev/null 2>&1 & echo $!"});
  ASSERT_EQ(bg.result["exit_code"], 0) << bg.err << bg.error.dump();
  std::string pid = Trim(bg.out);
  // A stream the copy must not inherit: a long exec in flight.
  auto slow = vm->client->Open(json{{"op", "exec"}, {"argv", {"/bin/sleep", "31"}}});
  ASSERT_TRUE(slow.ok());
  testing_support::TempDir snap_dir("vmsnap");
  const std::string& dir = snap_dir.path();
  auto q = vm->client->Quiesce(Clock::now() + 10s);
  ASSERT_TRUE(q.ok()) << q.error().ToString();
  auto saved = vm->inst->Snapshot(dir, uint64_t{1} << 30);
  ASSERT_TRUE(vm->client->Release(*q, Clock::now() + 10s).ok());
  ASSERT_TRUE(saved.ok()) << saved.error().ToString();
  EXPECT_TRUE(saved->memory);
  EXPECT_GT(saved->bytes, 0u);
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/state").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // The source serves on.
  auto after = Exec(*vm->client, {"/bin/cat", "/tmp/file"});
  EXPECT_EQ(after.out, "kept\n") << after.error.dump();

  SandboxPolicy p = Policy();
  p.hostname = "skiff-copy";
  p.restore_dir = dir;
  auto inst = iso_->Start(p);
  ASSERT_TRUE(inst.ok()) << inst.error().ToString();
  auto client = proto::Client::Connect((*inst)->TakeChannel(), 30000ms);
  ASSERT_TRUE(client.ok()) << client.error().ToString();
  EXPECT_EQ((*inst)->Describe()["from_snapshot"], true);
  auto file = Exec(**client, {"/bin/cat", "/tmp/file"});
  EXPECT_EQ(file.out, "kept\n") << file.error.dump();
  auto host = Exec(**client, {"/bin/hostname"});
  EXPECT_EQ(host.out, "skiff-copy\n");
  auto n0 = Exec(**client, {"/bin/cat", "/tmp/n"});
  std::this_thread::sleep_for(1500ms);
  auto alive = Exec(**client, {"/bin/sh", "-c", "kill -0 " + pid + " && cat /tmp/n"});
  EXPECT_EQ(alive.result["exit_code"], 0) << "the background process runs on in the copy";
  EXPECT_GT(std::atoi(alive.out.c_str()), std::atoi(n0.out.c_str())) << n0.out << " then " << alive.out;
  // The source's exec in flight was dropped in the copy, not rerun or kept.
  auto sleeps =
      Exec(**client, {"/bin/sh", "-c",
                      "for c in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $c; echo; done 2>/dev/null | "
                      "grep -c '^/bin/sleep 31 $' || true"});
  EXPECT_EQ(Trim(sleeps.out), "0") << "the copy kills the source's exec in flight";
  auto src_sleeps =
      Exec(*vm->client, {"/bin/sh", "-c",
                         "for c in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $c; echo; done 2>/dev/null "
                         "| grep -c '^/bin/sleep 31 $' || true"});
  EXPECT_EQ(Trim(src_sleeps.out), "1") << "the source's exec runs on";
  (*client).reset();
  (*inst)->Stop(2000ms);
  (*slow)->Cancel();
  vm->client.reset();
  vm->inst->Stop(2000ms);
}

// Regression: with the microvm's PIT and PIC off, the guest had no working
// tick (its local APIC timer failed verification against a PIT that never
// fired), so a sleep never ended; and with no entropy source the CRNG was
// never seeded, so /dev/random and getrandom() blocked forever.
TEST_F(MicrovmTest, GuestTimersFireAndTheCrngIsSeeded) {
  ASSERT_TRUE(HaveShared());
  proto::Client& c = *Shared().client;
  auto t0 = Clock::now();
  auto s = Exec(c, {"sleep", "1"}, 10000);
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  ASSERT_TRUE(s.error.is_null()) << "sleep 1 did not finish: " << s.error.dump();
  EXPECT_EQ(s.result["exit_code"], 0);
  EXPECT_GE(ms, 900);
  EXPECT_LT(ms, 8000);

  auto r = Exec(c, {"sh", "-c", "head -c 16 /dev/random | wc -c"}, 10000);
  ASSERT_TRUE(r.error.is_null()) << "reading /dev/random blocked: " << r.error.dump();
  EXPECT_EQ(r.result["exit_code"], 0);
  EXPECT_EQ(Trim(r.out), "16");
}

TEST_F(MicrovmTest, FilesystemIsTheImageWithAPrivateWritableLayer) {
  ASSERT_TRUE(HaveShared());
  proto::Client& c = *Shared().client;
  auto st = c.Call({{"op", "fs.stat"}, {"path", "/etc/marker"}});
  ASSERT_TRUE(st.ok()) << st.error().ToString();

  // Writes land in the overlay: /etc is writable, /tmp is 1777.
  auto w = c.Open(json{{"op", "fs.write"}, {"path", "/etc/written"}, {"mode", 0644}, {"parents", false}});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Send(proto::kStdin, "hello from the host").ok());
  ASSERT_TRUE((*w)->End(proto::kStdin).ok());
  auto ev = (*w)->Next(Clock::now() + 20s);
  ASSERT_TRUE(ev && ev->kind == proto::Event::Kind::kResult) << (ev ? ev->json.dump() : "timeout");
  auto cat = Exec(c, {"cat", "/etc/written", "/etc/marker"});
  EXPECT_EQ(cat.out, "hello from the hostimage\n");

  auto tmp = c.Call({{"op", "fs.stat"}, {"path", "/tmp"}});
  ASSERT_TRUE(tmp.ok());
  EXPECT_EQ((*tmp)["mode"].dump().find("1777") != std::string::npos ||
                ((*tmp)["mode"].is_number() && ((*tmp)["mode"].get<int>() & 07777) == 01777),
            true)
      << tmp->dump();

  auto mk = c.Call({{"op", "fs.mkdir"}, {"path", "/home/a/b"}, {"mode", 0755}, {"parents", true}});
  EXPECT_TRUE(mk.ok()) << mk.error().ToString();
  auto ls = c.Call({{"op", "fs.ls"}, {"path", "/home/a"}});
  ASSERT_TRUE(ls.ok());
  EXPECT_EQ((*ls)["entries"].size(), 1u);

  auto missing = c.Call({{"op", "fs.stat"}, {"path", "/no/such/file"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), Code::kS211);

  // The block image was never modified.
  auto again = Sha256File(*rootfs_);
  ASSERT_TRUE(again.ok());
  auto mounts = Exec(c, {"cat", "/proc/mounts"});
  EXPECT_NE(mounts.out.find("overlay / overlay"), std::string::npos) << mounts.out;
}

TEST_F(MicrovmTest, HostProcessesFilesAndLoopbackAreUnreachable) {
  ASSERT_TRUE(HaveShared());
  proto::Client& c = *Shared().client;

  // A host file and a host loopback service.
  testing_support::TempDir host_dir("vm-host");
  std::string marker = host_dir / "secret";
  std::ofstream(marker) << "host secret";
  int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(ls, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(ls, 4), 0);
  socklen_t len = sizeof a;
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);

  auto f = Exec(c, {"cat", marker});
  EXPECT_NE(f.result["exit_code"], 0);
  EXPECT_EQ(f.out.find("host secret"), std::string::npos);

  auto nc = Exec(c, {"sh", "-c", "echo hi | nc -w 2 127.0.0.1 " + std::to_string(port) + "; echo rc=$?"});
  EXPECT_NE(nc.out.find("rc=1"), std::string::npos) << nc.out << nc.err;
  // Nothing arrived on the host side.
  sockaddr_in peer{};
  socklen_t plen = sizeof peer;
  int fl = ::fcntl(ls, F_GETFL);
  ::fcntl(ls, F_SETFL, fl | O_NONBLOCK);
  EXPECT_LT(::accept(ls, reinterpret_cast<sockaddr*>(&peer), &plen), 0);
  ::close(ls);

  // The guest's process table holds the guest's processes only.
  auto ps = Exec(c, {"sh", "-c", "ls -d /proc/[0-9]* | wc -l"});
  EXPECT_LT(std::atoi(ps.out.c_str()), 60) << ps.out;
  std::string host_pid = "/proc/" + std::to_string(::getpid()) + "/cmdline";
  auto own = Exec(c, {"cat", host_pid});
  EXPECT_EQ(own.out.find("microvm_test"), std::string::npos);

  // No NIC: only loopback (and IPv6's sit0 tunnel device, which has no
  // lower device to send through).
  auto ifs = Exec(c, {"ls", "/sys/class/net"});
  std::istringstream names(ifs.out);
  for (std::string n; std::getline(names, n);) EXPECT_TRUE(n == "lo" || n == "sit0") << n;
  EXPECT_NE(ifs.out.find("lo"), std::string::npos);
}

TEST_F(MicrovmTest, SigkillOfTheVmmMidExecClosesTheStreamAndLeavesNothing) {
  auto vm = Boot();
  ASSERT_TRUE(vm);
  auto d = vm->inst->Describe();
  pid_t pid = d["vmm_pid"].get<pid_t>();
  ASSERT_GT(pid, 0);
  std::string state;
  {
    DIR* dir = ::opendir((paths::RuntimeDir() + "/microvm").c_str());
    ASSERT_NE(dir, nullptr);
    ::closedir(dir);
  }
  auto s = vm->client->Open(json{{"op", "exec"}, {"argv", {"sleep", "60"}}});
  ASSERT_TRUE(s.ok());
  (void)(*s)->End(proto::kStdin);
  auto meta = (*s)->Next(Clock::now() + 20s);
  ASSERT_TRUE(meta && meta->kind == proto::Event::Kind::kMeta) << (meta ? meta->json.dump() : "");
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  auto ev = (*s)->Next(Clock::now() + 20s);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, proto::Event::Kind::kClosed) << ev->json.dump();
  for (int i = 0; i < 100 && vm->inst->Running(); i++) std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(vm->inst->Running());
  EXPECT_NE(vm->inst->ExitReport().find("SIGKILL"), std::string::npos) << vm->inst->ExitReport();
  vm->client->Close();
  vm->inst->Stop(1000ms);
  EXPECT_FALSE(ProcessExists(pid));
  // The state directory (console log, QEMU log, mount point) is gone.
  std::string root = paths::RuntimeDir() + "/microvm";
  DIR* dir = ::opendir(root.c_str());
  ASSERT_NE(dir, nullptr);
  int entries = 0;
  while (dirent* e = ::readdir(dir)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    std::string owner = ReadFile(root + "/" + n + "/owner");
    if (owner.rfind(std::to_string(::getpid()) + ":", 0) == 0) entries++;
  }
  ::closedir(dir);
  // Only the shared VM (if booted) may remain.
  EXPECT_LE(entries, vm_ ? 1 : 0);
}

TEST_F(MicrovmTest, ABrokenImageFailsTheBootWithTheConsoleTail) {
  testing_support::TempDir bad_dir("vm-bad");
  std::string bad = bad_dir / "bad.img";
  std::ofstream(bad) << std::string(1 << 20, '\0');
  SandboxPolicy p = Policy();
  p.rootfs.block_image = bad;
  auto t0 = Clock::now();
  auto r = iso_->Start(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS300);
  EXPECT_NE(r.error().message().find("platform failure: boot: "), std::string::npos);
  EXPECT_NE(r.error().message().find("vm init: mount"), std::string::npos) << r.error().message();
  EXPECT_LE(r.error().message().size(), 4096u + 300u);
  EXPECT_LT(Clock::now() - t0, 30s);
  EXPECT_FALSE(::access((paths::RuntimeDir() + "/microvm/" + p.id).c_str(), F_OK) == 0);
}

TEST_F(MicrovmTest, RejectsWhatItCannotRun) {
  SandboxPolicy p = Policy();
  p.rootfs.block_image.clear();
  auto r = iso_->Start(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS300);
  p = Policy();
  p.network = true;
  p.net_allow = {"*.bad entry"};  // an entry it cannot parse: refused
  r = iso_->Start(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kS300);
  EXPECT_NE(r.error().message().find("network.allow[0]"), std::string::npos) << r.error().message();
  EXPECT_FALSE(::access((paths::RuntimeDir() + "/microvm/" + p.id).c_str(), F_OK) == 0);
  p = Policy();
  p.id = "../../etc";
  r = iso_->Start(p);
  ASSERT_FALSE(r.ok());
  auto doc = iso_->Doctor();
  EXPECT_EQ(doc["accel"], microvm::KvmUsable() ? "kvm" : "tcg");
  EXPECT_TRUE(doc["kernel_built"].get<bool>());
  EXPECT_TRUE(doc["qemu_found"].get<bool>());
}

// Snapshots (docs/microvm.md): the first VM of a shape saves a template,
// later ones are restored from it and then made their own. Each test runs
// with a private cache directory, so it sees its own templates.
class MicrovmSnapshotTest : public MicrovmTest {
 protected:
  void SetUp() override {
    MicrovmTest::SetUp();
    // Decided now, from the real cache's verdict (once per process), not
    // probed again in the private cache.
    (void)microvm::KvmUsable();
    char real[PATH_MAX];
    ASSERT_NE(::realpath(microvm::KernelPath().c_str(), real), nullptr);
    saved_cache_ = std::getenv("SKIFF_CACHE_DIR") ? std::getenv("SKIFF_CACHE_DIR") : "";
    saved_kernel_ = std::getenv("SKIFF_KERNEL") ? std::getenv("SKIFF_KERNEL") : "";
    ::setenv("SKIFF_KERNEL", real, 1);
    cache_dir_.emplace("vm-cache");
    cache_ = cache_dir_->path();
    ::setenv("SKIFF_CACHE_DIR", cache_.c_str(), 1);
  }
  void TearDown() override {
    for (auto& vm : vms_) {
      if (vm && vm->client) vm->client->Close();
      if (vm && vm->inst) vm->inst->Stop(2000ms);
    }
    vms_.clear();
    ::unsetenv("SKIFF_MICROVM_SNAPSHOT");
    if (saved_cache_.empty())
      ::unsetenv("SKIFF_CACHE_DIR");
    else
      ::setenv("SKIFF_CACHE_DIR", saved_cache_.c_str(), 1);
    if (saved_kernel_.empty())
      ::unsetenv("SKIFF_KERNEL");
    else
      ::setenv("SKIFF_KERNEL", saved_kernel_.c_str(), 1);
    cache_dir_.reset();  // removes the cache, failing the test if it cannot
  }

  // The template directories (<cache>/microvm/snapshots/<key>/), and
  // anything else found there except lock files.
  std::vector<std::string> Templates(std::vector<std::string>* other = nullptr) {
    std::vector<std::string> out;
    std::string root = cache_ + "/microvm/snapshots";
    DIR* d = ::opendir(root.c_str());
    if (!d) return out;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == ".." || n.find(".lock") != std::string::npos) continue;
      if (::access((root + "/" + n + "/state").c_str(), R_OK) == 0 && n.find('.') == std::string::npos)
        out.push_back(root + "/" + n);
      else if (other)
        other->push_back(n);
    }
    ::closedir(d);
    return out;
  }

  Vm* BootNamed(const std::string& hostname) {
    auto vm = Boot(hostname);
    if (!vm) return nullptr;
    vms_.push_back(std::move(vm));
    return vms_.back().get();
  }

  std::optional<testing_support::TempDir> cache_dir_;
  std::string cache_, saved_cache_, saved_kernel_;
  std::vector<std::unique_ptr<Vm>> vms_;
};

TEST_F(MicrovmSnapshotTest, RestoredVmsGetTheirOwnEntropyClockAndHostname) {
  // The random bytes are read first thing: right after a restore the guest
  // has not yet reseeded on its own (that takes about a second of guest time).
  auto first_random = [](Vm* vm) {
    auto r = Exec(*vm->client, {"sh", "-c", "head -c 32 /dev/urandom | busybox od -An -tx1"});
    EXPECT_EQ(r.result["exit_code"], 0) << r.err;
    return Trim(r.out);
  };
  Vm* a = BootNamed("snap-a");
  ASSERT_TRUE(a);
  std::string random[2];
  random[0] = first_random(a);
  auto da = a->inst->Describe();
  EXPECT_EQ(da["restored"], true) << da.dump();
  EXPECT_TRUE(da.contains("template_ms")) << "the first VM of a shape builds the template";
  std::vector<std::string> junk;
  auto templates = Templates(&junk);
  ASSERT_EQ(templates.size(), 1u);
  EXPECT_TRUE(junk.empty()) << junk.front();
  struct stat st {};
  ASSERT_EQ(::stat((templates[0] + "/state").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  Vm* b = BootNamed("snap-b");
  ASSERT_TRUE(b);
  random[1] = first_random(b);
  auto db = b->inst->Describe();
  EXPECT_EQ(db["restored"], true);
  EXPECT_FALSE(db.contains("template_ms")) << "the second VM reuses the template";
  EXPECT_NE(da["vmm_pid"], db["vmm_pid"]);

  // Both guests started from the same memory image: what must differ does.
  Vm* vms[2] = {a, b};
  for (int i = 0; i < 2; i++) {
    auto info = vms[i]->client->Call({{"op", "info"}});
    ASSERT_TRUE(info.ok()) << info.error().ToString();
    EXPECT_EQ((*info)["restored"], true);
    auto h = Exec(*vms[i]->client, {"hostname"});
    EXPECT_EQ(Trim(h.out), i == 0 ? "snap-a" : "snap-b");
    EXPECT_GE(random[i].size(), 64u);
    auto d = Exec(*vms[i]->client, {"busybox", "date", "+%s"});
    ASSERT_EQ(d.result["exit_code"], 0) << d.err;
    long long guest = std::atoll(d.out.c_str());
    long long host = static_cast<long long>(::time(nullptr));
    EXPECT_LE(std::llabs(guest - host), 3) << "guest clock " << guest << " vs host " << host;
  }
  EXPECT_NE(random[0], random[1]) << "two restored VMs produced the same random bytes";

  // Stopping leaves no VMM and no state; the template stays for the next VM.
  pid_t pids[2] = {da["vmm_pid"].get<pid_t>(), db["vmm_pid"].get<pid_t>()};
  std::string ids[2];
  for (auto& vm : vms_) {
    vm->client->Close();
    vm->inst->Stop(2000ms);
  }
  for (pid_t p : pids) EXPECT_FALSE(ProcessExists(p));
  // Other test processes build templates of their own at the same time;
  // this process's template VM state ends in its pid.
  std::string root = paths::RuntimeDir() + "/microvm";
  std::string ours = "-" + std::to_string(::getpid() % 100000);
  if (DIR* dir = ::opendir(root.c_str())) {
    while (dirent* e = ::readdir(dir)) {
      std::string n = e->d_name;
      bool our_template = n.rfind("tpl-", 0) == 0 && n.size() > ours.size() &&
                          n.compare(n.size() - ours.size(), ours.size(), ours) == 0;
      EXPECT_FALSE(our_template) << "template VM state left behind: " << n;
    }
    ::closedir(dir);
  }
  EXPECT_EQ(Templates().size(), 1u);
}

TEST_F(MicrovmSnapshotTest, ACorruptTemplateIsDiscardedAndTheVmBoots) {
  Vm* a = BootNamed("snap-first");
  ASSERT_TRUE(a);
  auto templates = Templates();
  ASSERT_EQ(templates.size(), 1u);
  // Damage the saved guest: a restore must not run it.
  {
    std::ofstream f(templates[0] + "/state", std::ios::binary | std::ios::trunc);
    f << std::string(1 << 16, 'x');
  }
  Vm* b = BootNamed("snap-second");
  ASSERT_TRUE(b);
  auto d = b->inst->Describe();
  EXPECT_EQ(d["restored"], false) << d.dump();
  auto h = Exec(*b->client, {"hostname"});
  EXPECT_EQ(Trim(h.out), "snap-second");
  EXPECT_TRUE(Templates().empty()) << "the corrupt template was kept";
}

TEST_F(MicrovmSnapshotTest, ConcurrentFirstCreatesBuildOneTemplate) {
  // Two creates of a new shape at once: one builds the template while the
  // other waits for it; both end up restored from the same one.
  std::vector<Result<std::unique_ptr<Instance>>> results;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; i++) {
    threads.emplace_back([&, i] {
      SandboxPolicy p = Policy();
      p.hostname = "snap-c" + std::to_string(i);
      auto r = iso_->Start(p);
      std::lock_guard<std::mutex> lk(mu);
      results.push_back(std::move(r));
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(results.size(), 2u);
  int built = 0;
  for (auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    auto d = (*r)->Describe();
    EXPECT_EQ(d["restored"], true) << d.dump();
    if (d.contains("template_ms")) built++;
    (*r)->Stop(2000ms);
  }
  EXPECT_EQ(built, 1) << "the template was built more than once (or not at all)";
  std::vector<std::string> junk;
  EXPECT_EQ(Templates(&junk).size(), 1u);
  EXPECT_TRUE(junk.empty()) << junk.front();
}

// Leave no trace: a process killed while it builds a template leaves a
// running VMM, its state directory and maybe a half-written template;
// the next process's CleanupOrphans removes all of them.
TEST_F(MicrovmSnapshotTest, AProcessKilledWhileBuildingATemplateLeavesNothingAfterCleanup) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto r = iso_->Start(Policy());
    ::_exit(r.ok() ? 0 : 1);
  }
  const std::string tag = "SKIFF_VM_OWNER=" + std::to_string(child) + ":";
  auto vmms_of_child = [&] {
    std::vector<pid_t> out;
    if (DIR* d = ::opendir("/proc")) {
      while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        std::string env = ReadFile(std::string("/proc/") + e->d_name + "/environ");
        for (size_t i = 0; i < env.size();) {
          size_t end = env.find('\0', i);
          if (end == std::string::npos) end = env.size();
          if (env.compare(i, tag.size(), tag) == 0) out.push_back(std::atoi(e->d_name));
          i = end + 1;
        }
      }
      ::closedir(d);
    }
    return out;
  };
  // Kill it once its template VMM runs.
  auto deadline = Clock::now() + 30s;
  while (vmms_of_child().empty() && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  ASSERT_FALSE(vmms_of_child().empty()) << "the template VMM never started";
  ::kill(child, SIGKILL);
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  // A leftover of a save that was cut short, as a crash would leave it.
  std::string root = cache_ + "/microvm/snapshots";
  ASSERT_EQ(std::system(("mkdir -p '" + root + "/0123456789abcdef01234567.tmp424242'").c_str()), 0);

  iso_->CleanupOrphans();

  for (int i = 0; i < 100 && !vmms_of_child().empty(); i++) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(vmms_of_child().empty()) << "the orphaned template VMM is still running";
  std::string state_root = paths::RuntimeDir() + "/microvm";
  if (DIR* d = ::opendir(state_root.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string owner = ReadFile(state_root + "/" + e->d_name + "/owner");
      EXPECT_NE(owner.rfind(std::to_string(child) + ":", 0), 0u) << "state left: " << e->d_name;
    }
    ::closedir(d);
  }
  std::vector<std::string> junk;
  Templates(&junk);
  EXPECT_TRUE(junk.empty()) << junk.front();
}

TEST_F(MicrovmSnapshotTest, SnapshotsCanBeTurnedOff) {
  ::setenv("SKIFF_MICROVM_SNAPSHOT", "0", 1);
  Vm* a = BootNamed("snap-off");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->inst->Describe()["restored"], false);
  EXPECT_TRUE(Templates().empty());
  auto h = Exec(*a->client, {"hostname"});
  EXPECT_EQ(Trim(h.out), "snap-off");
}

}  // namespace
}  // namespace skiff
