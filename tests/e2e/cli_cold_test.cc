// A cold one-shot `skiff run` leaves nothing behind once it has exited:
// no cgroup, state directory, liveness lock or mount of its sandbox, and no
// process of its own (the jail's cgroup warm-up child included).
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/paths.h"
#include "base/text.h"
#include "isolation/jail/cgroup.h"
#include "shell_out.h"

namespace {

using skiff::testing_support::Shell;

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) out.emplace_back(e->d_name);
    closedir(d);
  }
  return out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Every process whose command line carries `mark` (a CLONE_VM child shows
// its parent's argv, so this finds the CLI's helpers too).
std::vector<std::string> ProcessesWith(const std::string& mark) {
  std::vector<std::string> out;
  for (const auto& n : Names("/proc")) {
    if (n.empty() || n[0] < '1' || n[0] > '9') continue;
    std::string cmdline = ReadAll("/proc/" + n + "/cmdline");
    if (cmdline.find(mark) != std::string::npos) out.push_back(n + ": " + ReadAll("/proc/" + n + "/comm"));
  }
  return out;
}

TEST(CliColdRun, OneShotRunsLeaveNothingBehind) {
  if (geteuid() != 0) GTEST_SKIP() << "sandboxes need root on this host";
  const auto cgroups = skiff::jail::Cgroups::Detect();
  ASSERT_NE(cgroups.kind(), skiff::jail::Cgroups::Kind::kNone) << cgroups.Describe().dump();
  for (int i = 0; i < 5; ++i) {
    // The sandbox's hostname is "skiff-" + the first 8 characters of its id:
    // that prefix names its cgroups, state directory and lock on the host.
    const std::string mark = "SKIFF_COLD_TEST_" + skiff::RandomHex(8);
    auto o =
        Shell(std::string("'") + SKIFF_BINARY_DIR + "/cmd/skiff/skiff' run host --isolation jail --env " +
              mark + "=1 -- sh -c 'hostname; echo hi' 2>&1");
    ASSERT_EQ(o.exit_code, 0) << o.stdout_text;
    ASSERT_EQ(o.stdout_text.rfind("skiff-", 0), 0u) << o.stdout_text;
    const std::string prefix = o.stdout_text.substr(6, 8);
    EXPECT_EQ(o.stdout_text.substr(14), "\nhi\n");

    for (const auto& base : cgroups.bases())
      for (const auto& n : Names(base)) EXPECT_NE(n.rfind(prefix, 0), 0u) << base << "/" << n;
    for (const auto& n : Names(skiff::paths::RuntimeDir() + "/sandboxes"))
      EXPECT_NE(n.rfind(prefix, 0), 0u) << "state dir " << n;
    for (const auto& n : Names(skiff::paths::HostRuntimeDir() + "/jail"))
      EXPECT_EQ(n.find("live-" + prefix), std::string::npos) << "lock " << n;
    EXPECT_EQ(ReadAll("/proc/self/mountinfo").find(prefix), std::string::npos);
    EXPECT_EQ(ProcessesWith(mark), std::vector<std::string>{});
  }
}

// Regression: `--env` was a greedy vector option, so `--env A=1 -- CMD`
// swallowed the "--" and the command's own options failed to parse.
TEST(CliEnv, EnvRightBeforeTheCommand) {
  if (geteuid() != 0) GTEST_SKIP() << "sandboxes need root on this host";
  auto o = Shell(std::string("'") + SKIFF_BINARY_DIR +
                 "/cmd/skiff/skiff' run host --isolation jail --env A=1 --env B=2 -- sh -c 'echo $A$B' 2>&1");
  EXPECT_EQ(o.stdout_text, "12\n");
  EXPECT_EQ(o.exit_code, 0);
}

}  // namespace
