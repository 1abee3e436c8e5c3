// Fuzzes the HTTP router: the input's first line is the request method, the
// rest its target, routed both as the HTTP session does (SplitTarget, then
// RouteRequest on the decoded path) and as a raw path. A match is a row of
// RouteTable() for that route and method; a 405 is a route with rows, none
// for the method, and Allow lists exactly them; a 404 matched no route.
#include <boost/beast/http/verb.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "api/http_util.h"
#include "api/router.h"

namespace {

using skiff::api::Dispatch;
using skiff::api::Route;
using skiff::api::RouteTable;

void Check(boost::beast::http::verb method, std::string_view path) {
  const Dispatch d = skiff::api::RouteRequest(method, path);
  if (d.route != skiff::api::MatchRoute(path).route) std::abort();
  if (d.outcome == Dispatch::Outcome::kNotFound) {
    if (d.route != Route::kNotFound || !d.allow.empty()) std::abort();
    return;
  }
  if (d.route == Route::kNotFound) std::abort();
  std::string allow;
  bool found = false;
  for (const auto& e : RouteTable()) {
    if (e.route != d.route) continue;
    if (!allow.empty()) allow += ", ";
    allow += std::string(boost::beast::http::to_string(e.method));
    if (e.method == method) {
      if (d.outcome != Dispatch::Outcome::kFound || d.handler != e.handler) std::abort();
      found = true;
    }
  }
  if (allow.empty() || d.allow != allow) std::abort();
  if (!found && d.outcome != Dispatch::Outcome::kMethodNotAllowed) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nl = in.find('\n');
  const std::string_view method_text = in.substr(0, nl);
  const std::string_view target = nl == std::string_view::npos ? "" : in.substr(nl + 1);
  const auto method =
      boost::beast::http::string_to_verb(boost::beast::string_view(method_text.data(), method_text.size()));
  if (auto t = skiff::api::SplitTarget(target)) Check(method, t->path);
  Check(method, target);
  return 0;
}
