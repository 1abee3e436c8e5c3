// The skiff CLI, embedded (no daemon): what a new user types first.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <sstream>
#include <string>

#include "shell_out.h"

namespace {

using Out = skiff::testing_support::ShellOut;

// Runs the CLI through /bin/sh; stderr is folded into stdout when asked.
Out Skiff(const std::string& args, bool with_stderr = false) {
  return skiff::testing_support::Shell(std::string("'") + SKIFF_BINARY_DIR + "/cmd/skiff/skiff' " + args +
                                       (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "sandboxes need root on this host";
  }
};

// Run from a terminal (script gives the CLI a pseudo-terminal as its
// controlling terminal): the agent, PID 1 of the sandbox, leads a session of
// its own and has no controlling terminal, so a hostile agent cannot type
// into the operator's shell through TIOCSTI.
TEST_F(CliTest, TheAgentDoesNotHoldTheLaunchingTerminal) {
  std::string run =
      std::string("'") + SKIFF_BINARY_DIR + "/cmd/skiff/skiff' run host --isolation jail -- cat /proc/1/stat";
  auto o = skiff::testing_support::Shell("script -qec \"" + run + "\" /dev/null < /dev/null");
  ASSERT_EQ(o.exit_code, 0) << o.stdout_text;
  // "1 (skiff-agent) S ppid pgrp session tty_nr …"
  size_t close = o.stdout_text.find(") ");
  ASSERT_NE(close, std::string::npos) << o.stdout_text;
  std::istringstream fields(o.stdout_text.substr(close + 2));
  std::string state, ppid, pgrp, session, tty_nr;
  fields >> state >> ppid >> pgrp >> session >> tty_nr;
  EXPECT_EQ(session, "1") << o.stdout_text;
  EXPECT_EQ(tty_nr, "0") << o.stdout_text;
}

TEST_F(CliTest, RunPythonPresetPrints42) {
  auto o = Skiff("run python --isolation jail --lang python --code 'print(6*7)'");
  EXPECT_EQ(o.stdout_text, "42\n");
  EXPECT_EQ(o.exit_code, 0);
}

TEST_F(CliTest, RunNodePreset) {
  auto o = Skiff("run node --isolation jail --lang node --code 'console.log(1+1)'");
  EXPECT_EQ(o.stdout_text, "2\n");
  EXPECT_EQ(o.exit_code, 0);
}

TEST_F(CliTest, PresetIsTheBuiltImageNotTheHostUserland) {
  // The python preset is a Debian rootfs built by the project: it has no
  // skiff build tree and no compiler, unlike this host.
  auto o = Skiff("run python --isolation jail -- sh -c 'test -e /usr/bin/g++ && echo host || echo image'");
  EXPECT_EQ(o.stdout_text, "image\n");
}

TEST_F(CliTest, CommandExitCodeAndStreamsPassThrough) {
  auto o = Skiff("run host --isolation jail -- sh -c 'echo out; echo err >&2; exit 7'", true);
  EXPECT_NE(o.stdout_text.find("out\n"), std::string::npos);
  EXPECT_NE(o.stdout_text.find("err\n"), std::string::npos);
  EXPECT_EQ(o.exit_code, 7);
}

TEST_F(CliTest, BadInputGetsItsSCode) {
  auto o = Skiff("run no-such-image -- true", true);
  EXPECT_NE(o.stdout_text.find("S100"), std::string::npos) << o.stdout_text;
  EXPECT_NE(o.exit_code, 0);
  o = Skiff("run host --isolation jail --timeout-ms 200 -- sleep 5", true);
  EXPECT_NE(o.stdout_text.find("S200"), std::string::npos) << o.stdout_text;
  EXPECT_EQ(o.exit_code, 124);
}

// Regression: with few descriptors open (as in the CLI) the network
// namespace handed to slirp4netns was overwritten by another descriptor
// before the spawn read it, and every networked sandbox of the CLI failed.
TEST_F(CliTest, DoctorsNetworkTrialSucceeds) {
  if (access("/dev/net/tun", R_OK | W_OK) != 0) GTEST_SKIP() << "no /dev/net/tun on this host";
  auto o = Skiff("doctor", true);
  auto net = o.stdout_text.find("\nnetwork:");
  ASSERT_NE(net, std::string::npos) << o.stdout_text;
  std::string section =
      o.stdout_text.substr(net, o.stdout_text.find("\n", o.stdout_text.find("setup_ok:", net)) - net);
  EXPECT_NE(section.find("setup_ok:              true"), std::string::npos) << section;
  // The trial includes a domain entry, so the DNS filter starts too.
  EXPECT_NE(section.find("domain_allow_entries:  true"), std::string::npos) << section;
}

// Leave no trace: a daemon ended by SIGTERM removes its unix socket.
TEST_F(CliTest, ServeRemovesItsSocketOnSigterm) {
  std::string sock = "/tmp/skiff-cli-test-" + std::to_string(getpid()) + ".sock";
  auto o = skiff::testing_support::Shell("'" + std::string(SKIFF_BINARY_DIR) +
                                         "/cmd/skiff/skiff' serve --socket " + sock +
                                         " --port 0 >/dev/null 2>&1 & pid=$!; "
                                         "for i in $(seq 100); do [ -S " +
                                         sock +
                                         " ] && break; sleep 0.05; done; "
                                         "[ -S " +
                                         sock +
                                         " ] && echo up; kill -TERM $pid; wait $pid; echo status=$?; "
                                         "[ -e " +
                                         sock + " ] && echo left || echo gone");
  EXPECT_EQ(o.stdout_text, "up\nstatus=0\ngone\n");
  unlink(sock.c_str());
}

}  // namespace
