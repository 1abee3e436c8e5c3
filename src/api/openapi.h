// The native HTTP API as an OpenAPI 3.1 document (served at /openapi.json,
// kept in docs/openapi.json by skiff-genopenapi): every route of the route
// table — each function as its own POST /v1/functions/{id} operation with
// the request and response schemas the function layer validates with and
// the S-code errors it can return, the file transfers, the process output
// stream, the WebSocket upgrades — so a client can be generated in any
// language. A unit test keeps the file equal to the code and checks that
// every route of the table is in it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace skiff::api {

nlohmann::json OpenApiDocument();
// The document as served and written (2-space indent, trailing newline).
const std::string& OpenApiText();

}  // namespace skiff::api
