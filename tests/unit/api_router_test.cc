// The HTTP router's (method, route) -> handler table: 404, 405 and path
// parameters.
#include <gtest/gtest.h>

#include <utility>

#include "api/router.h"

namespace skiff::api {
namespace {

using boost::beast::http::verb;
using Outcome = Dispatch::Outcome;

TEST(ApiRouterTest, EveryEndpoint) {
  struct Case {
    verb method;
    const char* path;
    Handler handler;
    const char* param;
  };
  const Case cases[] = {
      {verb::get, "/", Handler::kUpgrade, ""},
      {verb::get, "/otel", Handler::kUpgrade, ""},
      {verb::get, "/ws/channels/c1", Handler::kUpgrade, "c1"},
      {verb::get, "/healthz", Handler::kHealthz, ""},
      {verb::get, "/metrics", Handler::kMetrics, ""},
      {verb::get, "/v1/functions", Handler::kFunctionList, ""},
      {verb::get, "/v1/functions/", Handler::kFunctionList, ""},
      {verb::get, "/v1/functions/sandbox::exec", Handler::kFunctionInfo, "sandbox::exec"},
      {verb::post, "/v1/functions/sandbox::exec", Handler::kFunctionCall, "sandbox::exec"},
      {verb::get, "/v1/sandboxes/abc/files", Handler::kFileGet, "abc"},
      {verb::put, "/v1/sandboxes/abc/files", Handler::kFilePut, "abc"},
      {verb::get, "/v1/sandboxes/abc/processes/17/output", Handler::kProcessOutput, "abc"},
      {verb::get, "/v1/sandboxes/abc/processes/17/tty", Handler::kUpgrade, "abc"},
      {verb::get, "/openapi.json", Handler::kOpenApi, ""},
      {verb::post, "/v1/run", Handler::kRunStream, ""},
  };
  for (const auto& c : cases) {
    Dispatch d = RouteRequest(c.method, c.path);
    EXPECT_EQ(d.outcome, Outcome::kFound) << c.path;
    EXPECT_EQ(d.handler, c.handler) << c.path;
    EXPECT_EQ(d.param, c.param) << c.path;
  }
  // The process routes carry the pid as written (checked by the session).
  EXPECT_EQ(RouteRequest(verb::get, "/v1/sandboxes/abc/processes/17/output").param2, "17");
  EXPECT_EQ(RouteRequest(verb::get, "/v1/sandboxes/abc/processes/x/tty").param2, "x");
  for (const char* bad : {"/v1/sandboxes/abc/processes//output", "/v1/sandboxes/abc/processes/1/2/output",
                          "/v1/sandboxes/abc/processes/1/outputs", "/v1/sandboxes//processes/1/output"})
    EXPECT_EQ(RouteRequest(verb::get, bad).outcome, Outcome::kNotFound) << bad;
  EXPECT_EQ(RouteRequest(verb::post, "/v1/sandboxes/abc/processes/1/output").outcome,
            Outcome::kMethodNotAllowed);
  Dispatch get_run = RouteRequest(verb::get, "/v1/run");
  EXPECT_EQ(get_run.outcome, Outcome::kMethodNotAllowed);
  EXPECT_EQ(get_run.allow, "POST");
  EXPECT_EQ(RouteRequest(verb::post, "/v1/run/").outcome, Outcome::kNotFound);
}

TEST(ApiRouterTest, UnknownRouteIsNotFound) {
  for (const char* p : {"/v1", "/v1/functions/a/b", "/v1/sandboxes/x", "/v1/sandboxes//files",
                        "/ws/channels/", "/healthz/", "/nope"}) {
    Dispatch d = RouteRequest(verb::get, p);
    EXPECT_EQ(d.outcome, Outcome::kNotFound) << p;
    EXPECT_EQ(d.route, Route::kNotFound) << p;
    EXPECT_EQ(d.allow, "") << p;
  }
  // An unknown path is 404 whatever the method.
  EXPECT_EQ(RouteRequest(verb::delete_, "/nope").outcome, Outcome::kNotFound);
}

TEST(ApiRouterTest, WrongMethodIsNotAllowedWithTheRoutesMethods) {
  Dispatch d = RouteRequest(verb::delete_, "/v1/functions/x");
  EXPECT_EQ(d.outcome, Outcome::kMethodNotAllowed);
  EXPECT_EQ(d.allow, "GET, POST");
  EXPECT_EQ(d.param, "x");

  d = RouteRequest(verb::post, "/v1/sandboxes/s/files");
  EXPECT_EQ(d.outcome, Outcome::kMethodNotAllowed);
  EXPECT_EQ(d.allow, "GET, PUT");

  d = RouteRequest(verb::put, "/v1/functions/x");
  EXPECT_EQ(d.outcome, Outcome::kMethodNotAllowed);

  for (const char* p : {"/", "/otel", "/healthz", "/metrics", "/v1/functions", "/ws/channels/c"}) {
    for (verb m : {verb::post, verb::put, verb::delete_, verb::head, verb::unknown}) {
      d = RouteRequest(m, p);
      EXPECT_EQ(d.outcome, Outcome::kMethodNotAllowed) << p;
      EXPECT_EQ(d.allow, "GET") << p;
    }
  }
}

TEST(ApiRouterTest, AllowListsEachRoutesMethods) {
  const std::pair<const char*, const char*> want[] = {{"/", "GET"},
                                                      {"/otel", "GET"},
                                                      {"/ws/channels/c", "GET"},
                                                      {"/healthz", "GET"},
                                                      {"/metrics", "GET"},
                                                      {"/v1/functions", "GET"},
                                                      {"/v1/functions/f", "GET, POST"},
                                                      {"/v1/sandboxes/s/files", "GET, PUT"}};
  for (const auto& [p, allow] : want) EXPECT_EQ(RouteRequest(verb::get, p).allow, allow) << p;
}

}  // namespace
}  // namespace skiff::api
