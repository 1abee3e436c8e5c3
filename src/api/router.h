// The HTTP request router: one (method, route) -> handler table for every
// endpoint skiffd serves on its port. Pure (no I/O), so the 404/405 rules
// are unit-tested directly; the HTTP session only runs what it returns.
#pragma once

#include <boost/beast/http/verb.hpp>
#include <span>
#include <string>
#include <string_view>

#include "api/http_util.h"

namespace skiff::api {

enum class Handler {
  kUpgrade,  // "/", "/otel", "/ws/channels/{id}", ".../processes/{pid}/tty": WebSocket only
  kHealthz,
  kMetrics,
  kOpenApi,  // GET /openapi.json (no authentication, as /healthz)
  kFunctionList,
  kFunctionInfo,   // GET  /v1/functions/{id}
  kFunctionCall,   // POST /v1/functions/{id}
  kFileGet,        // GET  /v1/sandboxes/{id}/files
  kFilePut,        // PUT  /v1/sandboxes/{id}/files
  kProcessOutput,  // GET  /v1/sandboxes/{id}/processes/{pid}/output
  kRunStream,      // POST /v1/run
};

// One row of the table: a method a route accepts and the handler it runs.
struct RouteEntry {
  boost::beast::http::verb method;
  Route route;
  Handler handler;
};

// Every endpoint, one row per method it accepts; a route's rows are in the
// order its Allow header lists them.
std::span<const RouteEntry> RouteTable();

struct Dispatch {
  enum class Outcome { kFound, kNotFound, kMethodNotAllowed };
  Outcome outcome = Outcome::kNotFound;
  Handler handler = Handler::kHealthz;  // meaningful only when kFound
  Route route = Route::kNotFound;
  std::string param;   // the path parameter of the route (decoded), or ""
  std::string param2;  // a second one (the pid of kProcessOutput), or ""
  std::string allow;   // the route's methods ("GET, POST"), for 405's Allow header
};

// Routes a request by method and decoded path.
Dispatch RouteRequest(boost::beast::http::verb method, std::string_view decoded_path);

}  // namespace skiff::api
