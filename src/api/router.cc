#include "api/router.h"

#include <array>

namespace skiff::api {

namespace {

using boost::beast::http::verb;

constexpr std::array<RouteEntry, 14> kTable = {{
    {verb::get, Route::kEngine, Handler::kUpgrade},
    {verb::get, Route::kOtel, Handler::kUpgrade},
    {verb::get, Route::kChannel, Handler::kUpgrade},
    {verb::get, Route::kHealthz, Handler::kHealthz},
    {verb::get, Route::kMetrics, Handler::kMetrics},
    {verb::get, Route::kOpenApi, Handler::kOpenApi},
    {verb::get, Route::kFunctionList, Handler::kFunctionList},
    {verb::get, Route::kFunctionCall, Handler::kFunctionInfo},
    {verb::post, Route::kFunctionCall, Handler::kFunctionCall},
    {verb::get, Route::kFiles, Handler::kFileGet},
    {verb::put, Route::kFiles, Handler::kFilePut},
    {verb::get, Route::kProcessOutput, Handler::kProcessOutput},
    {verb::get, Route::kProcessTty, Handler::kUpgrade},
    {verb::post, Route::kRun, Handler::kRunStream},
}};

}  // namespace

std::span<const RouteEntry> RouteTable() { return kTable; }

Dispatch RouteRequest(verb method, std::string_view decoded_path) {
  RouteMatch rm = MatchRoute(decoded_path);
  Dispatch d;
  d.route = rm.route;
  d.param = std::move(rm.param);
  d.param2 = std::move(rm.param2);
  if (rm.route == Route::kNotFound) return d;
  d.outcome = Dispatch::Outcome::kMethodNotAllowed;
  for (const RouteEntry& e : kTable) {
    if (e.route != rm.route) continue;
    if (!d.allow.empty()) d.allow += ", ";
    d.allow += std::string(boost::beast::http::to_string(e.method));
    if (e.method == method) {
      d.outcome = Dispatch::Outcome::kFound;
      d.handler = e.handler;
    }
  }
  return d;
}

}  // namespace skiff::api
