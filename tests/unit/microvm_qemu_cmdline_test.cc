// The microVM's QEMU command line, built without QEMU or root.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "isolation/microvm/qemu_cmdline.h"

namespace skiff::microvm {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Not;

QemuCommand Base() {
  QemuCommand c;
  c.exec_path = "/usr/bin/qemu-system-x86_64";
  c.id = "0123456789abcdef";
  c.machine = {"console=ttyS0 quiet", 2, 512, false};
  return c;
}

// The value following `option` (the first occurrence), or "" if absent.
std::string ValueOf(const std::vector<std::string>& argv, const std::string& option) {
  auto it = std::find(argv.begin(), argv.end(), option);
  return it == argv.end() || it + 1 == argv.end() ? std::string() : *(it + 1);
}

// Every value of a repeated option, in order.
std::vector<std::string> ValuesOf(const std::vector<std::string>& argv, const std::string& option) {
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == option) out.push_back(argv[i + 1]);
  return out;
}

TEST(QemuArgv, StartsWithTheBinaryAndAShortProcessName) {
  auto a = QemuArgv(Base());
  ASSERT_GE(a.size(), 3u);
  EXPECT_EQ(a[0], "/usr/bin/qemu-system-x86_64");
  EXPECT_EQ(a[1], "-name");
  EXPECT_EQ(a[2], "skiff-01234567,process=skiff-vm");
  QemuCommand c = Base();
  c.id = "abc";
  EXPECT_EQ(QemuArgv(c)[2], "skiff-abc,process=skiff-vm");
}

TEST(QemuArgv, CarriesTheMachineSizeAndKernelCommandLine) {
  auto a = QemuArgv(Base());
  EXPECT_EQ(ValueOf(a, "-smp"), "2");
  EXPECT_EQ(ValueOf(a, "-m"), "512");
  EXPECT_EQ(ValueOf(a, "-append"), "console=ttyS0 quiet");
  EXPECT_EQ(ValueOf(a, "-kernel"), "/vm/kernel");
  EXPECT_EQ(ValueOf(a, "-initrd"), "/vm/initrd");
  EXPECT_EQ(ValueOf(a, "-add-fd"), "fd=4,set=1,opaque=rootfs");
  EXPECT_THAT(ValuesOf(a, "-chardev"), Contains("socket,id=agent,fd=3"));
  EXPECT_THAT(a, Contains("-sandbox"));
  EXPECT_THAT(ValueOf(a, "-M"), ::testing::StartsWith("microvm,"));
}

TEST(QemuArgv, KvmAndTcgDifferOnlyInAccelAndCpu) {
  QemuCommand tcg = Base(), kvm = Base();
  kvm.machine.kvm = true;
  auto t = QemuArgv(tcg), k = QemuArgv(kvm);
  EXPECT_EQ(ValueOf(t, "-accel"), "tcg,tb-size=128");
  EXPECT_EQ(ValueOf(t, "-cpu"), "max");
  EXPECT_EQ(ValueOf(k, "-accel"), "kvm");
  EXPECT_EQ(ValueOf(k, "-cpu"), "host");
  ASSERT_EQ(t.size(), k.size());
  std::vector<size_t> differ;
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] != k[i]) differ.push_back(i);
  ASSERT_EQ(differ.size(), 2u);
  EXPECT_EQ(t[differ[0] - 1], "-accel");
  EXPECT_EQ(t[differ[1] - 1], "-cpu");
}

TEST(QemuArgv, NoNicWithoutNetwork) {
  auto a = QemuArgv(Base());
  EXPECT_THAT(a, Not(Contains("-netdev")));
  for (const auto& d : ValuesOf(a, "-device")) EXPECT_EQ(d.find("virtio-net"), std::string::npos) << d;
}

TEST(QemuArgv, NetworkAttachesTheTap) {
  QemuCommand c = Base();
  c.tap_fd = 5;
  auto a = QemuArgv(c);
  EXPECT_EQ(ValueOf(a, "-netdev"), "tap,id=net0,fd=5,vhost=off");
  EXPECT_THAT(ValuesOf(a, "-device"), Contains("virtio-net-device,netdev=net0,mac=52:54:00:12:34:56"))
      << "the bridge accepts the guest's frames from this MAC only";
}

TEST(QemuArgv, IncomingOnlyForRestores) {
  auto cold = QemuArgv(Base());
  EXPECT_THAT(cold, Not(Contains("-incoming")));
  EXPECT_THAT(cold, Not(Contains("-mon")));
  QemuCommand r = Base();
  r.qmp_fd = 5;
  r.incoming_fd = 6;
  auto a = QemuArgv(r);
  EXPECT_EQ(ValueOf(a, "-incoming"), "fd:6");
  EXPECT_THAT(ValuesOf(a, "-chardev"), Contains("socket,id=qmp,fd=5"));
  EXPECT_EQ(ValueOf(a, "-mon"), "chardev=qmp,mode=control");
  // The stream is the last thing QEMU is told about.
  EXPECT_THAT(std::vector<std::string>(a.end() - 2, a.end()), ElementsAre("-incoming", "fd:6"));
}

TEST(MachineArgs, IsThePartOfTheCommandLineAfterTheName) {
  QemuCommand c = Base();
  c.tap_fd = 5;
  auto a = QemuArgv(c);
  auto m = MachineArgs(c.machine);
  ASSERT_GT(a.size(), m.size() + 3);
  EXPECT_TRUE(std::equal(m.begin(), m.end(), a.begin() + 3));
  QemuMachine other = c.machine;
  other.memory_mb = 1024;
  EXPECT_NE(MachineArgs(other), m);
}

}  // namespace
}  // namespace skiff::microvm
