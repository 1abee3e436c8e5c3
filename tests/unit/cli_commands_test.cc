// The dispatcher builds only the subcommand a command line names: for every
// subcommand of the whole tree, building it alone gives the same
// subcommand (options, flags, nested subcommands); anything else builds the
// whole tree.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace skiff::cli {
namespace {

// A subcommand's shape: its options' names, then its subcommands', nested.
std::vector<std::string> Shape(const CLI::App* app) {
  std::vector<std::string> out;
  for (const CLI::Option* o : app->get_options()) out.push_back(o->get_name());
  for (const CLI::App* sub : app->get_subcommands({})) {
    out.push_back("[" + sub->get_name() + "]");
    for (auto& s : Shape(sub)) out.push_back(sub->get_name() + "/" + s);
  }
  return out;
}

std::vector<std::string> Names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

TEST(CliCommandsTest, EachSubcommandBuiltAloneIsTheSameAsInTheWholeTree) {
  CLI::App all;
  int rc = 0;
  AddCommands(all, rc, nullptr, "");
  std::vector<std::string> names = Names(all);
  ASSERT_GE(names.size(), 20u);
  EXPECT_EQ(names.front(), "serve");
  for (const std::string& name : names) {
    CLI::App one;
    AddCommands(one, rc, nullptr, name);
    const CLI::App* sub = nullptr;
    for (const CLI::App* s : one.get_subcommands({}))
      if (s->get_name() == name) sub = s;
    ASSERT_NE(sub, nullptr) << name << " was not built on its own";
    EXPECT_LE(one.get_subcommands({}).size(), 2u) << name << ": more than its own Add was built";
    EXPECT_EQ(Shape(sub), Shape(all.get_subcommand(name))) << name;
  }
}

TEST(CliCommandsTest, AnythingElseBuildsTheWholeTree) {
  CLI::App all;
  int rc = 0;
  AddCommands(all, rc, nullptr, "");
  for (const char* first : {"--help", "-h", "nope", "--url", "RUN"}) {
    CLI::App app;
    AddCommands(app, rc, nullptr, first);
    EXPECT_EQ(Names(app), Names(all)) << first;
  }
  // No subcommand is built twice (the pairs one Add makes).
  std::vector<std::string> names = Names(all);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
}

}  // namespace
}  // namespace skiff::cli
