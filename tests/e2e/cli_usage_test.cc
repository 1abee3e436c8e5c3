// The skiff CLI's usage errors and exit statuses, which need no sandbox and
// no daemon: each is refused before anything starts.
#include <gtest/gtest.h>

#include <string>

#include "shell_out.h"

namespace {

using Out = skiff::testing_support::ShellOut;

// Runs the CLI through /bin/sh with stderr folded into stdout; SKIFF_URL
// cleared so that no command finds (or starts) a daemon by accident.
Out Skiff(const std::string& args) {
  return skiff::testing_support::Shell(std::string("env -u SKIFF_URL '") + SKIFF_BINARY_DIR +
                                       "/cmd/skiff/skiff' " + args + " 2>&1 </dev/null");
}

TEST(CliUsage, NoSubcommandIsAUsageError) {
  auto o = Skiff("");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.stdout_text.find("A subcommand is required"), std::string::npos) << o.stdout_text;
}

TEST(CliUsage, HelpListsEverySubcommandAndExitsZero) {
  auto o = Skiff("--help");
  EXPECT_EQ(o.exit_code, 0);
  for (const char* c : {"serve", "run", "doctor", "version", "create", "exec", "ls", "stop", "catalog", "cp",
                        "fs", "image"}) {
    EXPECT_NE(o.stdout_text.find(std::string("  ") + c + " "), std::string::npos) << c;
  }
}

TEST(CliUsage, VersionPrintsSkiffAndItsVersion) {
  auto o = Skiff("version");
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.stdout_text.rfind("skiff ", 0), 0u) << o.stdout_text;
}

TEST(CliUsage, ServeRefusesABadPortOrEngine) {
  auto port = Skiff("serve --port 70000");
  EXPECT_EQ(port.exit_code, 2);
  EXPECT_EQ(port.stdout_text, "skiff serve: --port: out of range\n");
  auto engine = Skiff("serve --engine http://x");
  EXPECT_EQ(engine.exit_code, 2);
  EXPECT_EQ(engine.stdout_text, "skiff serve: --engine: 'http://x': expected a ws:// or wss:// URL\n");
  auto plain = Skiff("serve --engine ws://192.0.2.1:49134");
  EXPECT_EQ(plain.exit_code, 2);
  EXPECT_EQ(
      plain.stdout_text,
      "skiff serve: --engine: 'ws://192.0.2.1:49134': ws:// carries every call and the credential in the "
      "clear, so it is taken only for an engine on this machine (localhost, 127.0.0.0/8, ::1); across a "
      "network use wss:// (docs/multihost.md#tls)\n");
}

TEST(CliUsage, RunNeedsSomethingToRun) {
  auto o = Skiff("run");
  EXPECT_EQ(o.exit_code, 125);
  EXPECT_EQ(o.stdout_text, "skiff: nothing to run: give a command after --, or --lang with --code/--file\n");
  auto env = Skiff("run base --env BAD -- true");
  EXPECT_EQ(env.exit_code, 125);
  EXPECT_EQ(env.stdout_text, "skiff: --env takes NAME=value, got 'BAD'\n");
}

TEST(CliUsage, CpNeedsExactlyOneSandboxSide) {
  auto o = Skiff("cp a b");
  EXPECT_EQ(o.exit_code, 125);
  EXPECT_EQ(o.stdout_text, "skiff cp: exactly one side must be SANDBOX_ID:PATH\n");
}

TEST(CliUsage, FsChecksItsOperationAndArgumentCount) {
  auto bogus = Skiff("fs bogus id1");
  EXPECT_EQ(bogus.exit_code, 125);
  EXPECT_EQ(bogus.stdout_text, "skiff fs: unknown operation 'bogus'\n");
  auto count = Skiff("fs sed id1 a b");
  EXPECT_EQ(count.exit_code, 125);
  EXPECT_EQ(count.stdout_text, "skiff fs sed: expected 3 argument(s)\n");
}

TEST(CliUsage, AnUnreachableDaemonIsAnSCodeError) {
  auto o = Skiff("ls --url http://127.0.0.1:1");
  EXPECT_EQ(o.exit_code, 125);
  EXPECT_EQ(o.stdout_text.rfind("skiff: S300: platform failure: sandbox: no skiff daemon answers at "
                                "http://127.0.0.1:1\n",
                                0),
            0u)
      << o.stdout_text;
}

}  // namespace
