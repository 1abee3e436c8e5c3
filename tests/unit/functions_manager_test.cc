// The handlers against the real SandboxManager (no isolation backends, default
// config): the check order S001 -> S002 and the sandbox-free functions.
#include <gtest/gtest.h>

#include "functions/errors.h"
#include "functions/json_schema.h"
#include "functions/registry.h"
#include "sandbox/manager.h"

namespace skiff {
namespace {

using nlohmann::json;

constexpr const char* kUnknown = "00000000-0000-4000-8000-000000000000";

class RealManager : public ::testing::Test {
 protected:
  RealManager() : manager_(Config{}, std::map<std::string, std::unique_ptr<Isolator>>{}) {}
  Invocation Call(std::string_view id, const json& payload) {
    CallContext ctx{manager_, nullptr};
    return Invoke(id, payload, ctx);
  }
  Code CodeOf(std::string_view id, const json& payload) {
    Invocation inv = Call(id, payload);
    EXPECT_TRUE(inv.error.has_value()) << id << " " << payload.dump();
    return inv.error ? inv.error->code() : Code::kS300;
  }
  SandboxManager manager_;
};

TEST_F(RealManager, MalformedBeatsUnknownSandbox) {
  EXPECT_EQ(CodeOf("sandbox::exec", {{"sandbox_id", kUnknown}, {"cmd", "ls -l"}, {"args", {"/"}}}),
            Code::kS001);
  EXPECT_EQ(CodeOf("sandbox::fs::mkdir", {{"sandbox_id", kUnknown}, {"path", "/a"}, {"mode", "rwx"}}),
            Code::kS210);
  EXPECT_EQ(CodeOf("sandbox::fs::grep", {{"sandbox_id", kUnknown}, {"path", "/"}, {"pattern", "("}}),
            Code::kS217);
  EXPECT_EQ(CodeOf("sandbox::fs::write", {{"sandbox_id", kUnknown}, {"path", "/a"}}), Code::kS001);
}

TEST_F(RealManager, WellFormedUnknownSandboxIsS002) {
  for (const auto& [fn, payload] : std::vector<std::pair<std::string, json>>{
           {"sandbox::exec", {{"sandbox_id", kUnknown}, {"cmd", "ls"}}},
           {"sandbox::stop", {{"sandbox_id", kUnknown}}},
           {"sandbox::fs::ls", {{"sandbox_id", kUnknown}, {"path", "/"}}},
           {"sandbox::fs::write", {{"sandbox_id", kUnknown}, {"path", "/a"}, {"content", "x"}}},
           {"sandbox::fs::read", {{"sandbox_id", kUnknown}, {"path", "/a"}}}}) {
    Invocation inv = Call(fn, payload);
    ASSERT_TRUE(inv.error) << fn;
    EXPECT_EQ(inv.error->code(), Code::kS002) << fn << ": " << inv.error->message();
    EXPECT_EQ(inv.http_status(), 404);
  }
}

TEST_F(RealManager, ListAndCatalogNeedNoSandbox) {
  Invocation list = Call("sandbox::list", nullptr);
  ASSERT_TRUE(list.result);
  EXPECT_EQ(*list.result, (json{{"sandboxes", json::array()}}));
  Invocation cat = Call("sandbox::catalog::list", json::object());
  ASSERT_TRUE(cat.result);
  ASSERT_GE((*cat.result)["images"].size(), 2u);
  EXPECT_EQ((*cat.result)["images"][0]["name"], "python");
  EXPECT_EQ((*cat.result)["images"][1]["name"], "node");
  // Live responses validate against the published response schemas.
  EXPECT_TRUE(
      ValidateJsonSchema(FindFunction("sandbox::catalog::list")->response_schema, *cat.result).empty());
  EXPECT_TRUE(ValidateJsonSchema(FindFunction("sandbox::list")->response_schema, *list.result).empty());
}

}  // namespace
}  // namespace skiff
