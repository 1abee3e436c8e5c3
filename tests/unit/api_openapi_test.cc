// The OpenAPI document (api/openapi.h): docs/openapi.json is the generated
// one, every route of the route table and every function is in it, and
// every $ref resolves. (A real OpenAPI 3.1 validator from npm checks the
// document itself: tests/e2e/node/openapi.test.mjs.)
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "api/openapi.h"
#include "api/router.h"
#include "functions/errors.h"
#include "functions/registry.h"

namespace skiff::api {
namespace {

using nlohmann::json;

std::string ReadFile(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(OpenApi, DocsFileIsGeneratedFromTheCode) {
  std::string file = ReadFile(std::string(SKIFF_SOURCE_DIR) + "/docs/openapi.json");
  ASSERT_FALSE(file.empty()) << "docs/openapi.json missing";
  EXPECT_TRUE(file == OpenApiText())
      << "docs/openapi.json is out of date: run `skiff-genopenapi docs` from the repository root";
}

TEST(OpenApi, EveryRouteAndFunctionIsDescribed) {
  json doc = OpenApiDocument();
  EXPECT_EQ(doc["openapi"], "3.1.0");
  const json& paths = doc["paths"];
  // A concrete path per route of the table, as the router matches it.
  const std::map<Route, std::string> example = {
      {Route::kEngine, "/"},
      {Route::kOtel, "/otel"},
      {Route::kChannel, "/ws/channels/{id}"},
      {Route::kHealthz, "/healthz"},
      {Route::kMetrics, "/metrics"},
      {Route::kOpenApi, "/openapi.json"},
      {Route::kFunctionList, "/v1/functions"},
      {Route::kFunctionCall, "/v1/functions/sandbox::exec"},
      {Route::kFiles, "/v1/sandboxes/{id}/files"},
      {Route::kProcessOutput, "/v1/sandboxes/{id}/processes/{pid}/output"},
      {Route::kProcessTty, "/v1/sandboxes/{id}/processes/{pid}/tty"},
      {Route::kRun, "/v1/run"},
  };
  for (const RouteEntry& e : RouteTable()) {
    auto it = example.find(e.route);
    ASSERT_NE(it, example.end()) << "a route without an entry here: add it and describe it in api/openapi.cc";
    ASSERT_TRUE(paths.contains(it->second)) << it->second;
    std::string method(boost::beast::http::to_string(e.method));
    for (auto& c : method) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_TRUE(paths[it->second].contains(method)) << method << " " << it->second;
  }
  for (const FunctionDef& d : Functions()) {
    std::string p = "/v1/functions/" + d.id;
    ASSERT_TRUE(paths.contains(p)) << p;
    const json& post = paths[p]["post"];
    for (Code c : d.errors) {
      std::string status = std::to_string(HttpStatus(c));
      ASSERT_TRUE(post["responses"].contains(status)) << d.id << " " << CodeName(c);
      EXPECT_NE(post["responses"][status]["description"].get<std::string>().find(std::string(CodeName(c))),
                std::string::npos)
          << d.id << " " << CodeName(c);
    }
  }
  // Every $ref resolves to a component.
  std::string text = doc.dump();
  std::regex ref(R"re("#/components/schemas/([A-Za-z0-9._-]+)")re");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), ref); it != std::sregex_iterator(); ++it)
    EXPECT_TRUE(doc["components"]["schemas"].contains((*it)[1].str())) << (*it)[1];
  EXPECT_EQ(text.find("#/definitions/"), std::string::npos) << "a draft-07 reference was left";
}

}  // namespace
}  // namespace skiff::api
