// The KVM verdict's wording: a kvm_pvm host is named as such, with the fix.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "isolation/microvm/kvm_probe.h"

namespace skiff::microvm {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kWhy = "a guest kernel did not boot under -accel kvm -cpu host within 10 s";

TEST(KvmBootFailureNote, GenericHostKeepsTheGenericMessage) {
  std::string note = KvmBootFailureNote(kWhy, {"kvm", "kvm_intel"});
  EXPECT_EQ(note, std::string("/dev/kvm opens but ") + kWhy + "; VMs run under TCG emulation");
  EXPECT_THAT(note, Not(HasSubstr("pvm")));
  EXPECT_EQ(KvmBootFailureNote(kWhy, {}), note);
}

TEST(KvmBootFailureNote, PvmHostNamesTheCauseAndTheFix) {
  std::string note = KvmBootFailureNote(kWhy, {"kvm", "kvm_pvm"});
  EXPECT_THAT(note, HasSubstr("kvm_pvm"));
  EXPECT_THAT(note, HasSubstr("Pagetable-based Virtual Machine"));
  EXPECT_THAT(note, HasSubstr("PVM-enabled guest kernel"));
  EXPECT_THAT(note, HasSubstr("real KVM"));
  EXPECT_THAT(note, HasSubstr("nested virtualisation"));
  EXPECT_THAT(note, HasSubstr(kWhy));
  EXPECT_THAT(note, HasSubstr("TCG"));
}

TEST(KvmBootFailureNote, OnlyTheExactModuleNameCounts) {
  EXPECT_THAT(KvmBootFailureNote(kWhy, {"kvm_pvm_helper", "pvm"}), Not(HasSubstr("kvm_pvm")));
}

TEST(ProbeConsoleShowsBootEnd, TheBannerAloneIsNotABoot) {
  const std::string banner = "Linux version 6.1.0 (root@vm)\nCommand line: console=ttyS0\n";
  EXPECT_FALSE(ProbeConsoleShowsBootEnd(""));
  EXPECT_FALSE(ProbeConsoleShowsBootEnd(banner));
  EXPECT_FALSE(ProbeConsoleShowsBootEnd(banner + "Booting paravirtualized kernel on KVM\n"
                                                 "KVM internal error. Suberror: 1\n"));
  EXPECT_FALSE(ProbeConsoleShowsBootEnd(banner + "KVM internal error. Suberror: 1\n"
                                                 "Kernel panic - not syncing: x\n"));
  EXPECT_FALSE(ProbeConsoleShowsBootEnd("Kernel panic - not syncing: VFS\n"));
}

TEST(ProbeConsoleShowsBootEnd, TheEndOfBootIs) {
  const std::string banner = "Linux version 6.1.0 (root@vm)\n";
  EXPECT_TRUE(ProbeConsoleShowsBootEnd(
      banner + "Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n"));
  EXPECT_TRUE(ProbeConsoleShowsBootEnd(banner + "Run /init as init process\n"));
  EXPECT_TRUE(ProbeConsoleShowsBootEnd(banner + "Freeing unused kernel image (initmem) memory\n"));
}

TEST(LoadedKvmModules, ListsOnlyKvmModulesSortedOnce) {
  auto mods = LoadedKvmModules();
  EXPECT_TRUE(std::is_sorted(mods.begin(), mods.end()));
  EXPECT_EQ(std::adjacent_find(mods.begin(), mods.end()), mods.end());
  for (const auto& m : mods) EXPECT_EQ(m.rfind("kvm", 0), 0u) << m;
}

}  // namespace
}  // namespace skiff::microvm
