#include "api/openapi.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/version.h"
#include "functions/errors.h"
#include "functions/registry.h"
#include "functions/schemas.h"

namespace skiff::api {

namespace {

using nlohmann::json;

constexpr std::string_view kDefs = "#/definitions/";
constexpr std::string_view kComponents = "#/components/schemas/";

// A draft-07 function schema as an OpenAPI 3.1 (JSON Schema 2020-12)
// component: its shared definitions become components of their own.
json Component(json schema) {
  if (schema.is_object()) {
    schema.erase("$schema");
    schema.erase("definitions");
    for (auto& [k, v] : schema.items()) {
      if (k == "$ref" && v.is_string()) {
        std::string r = v.get<std::string>();
        if (r.rfind(kDefs, 0) == 0) v = std::string(kComponents) + r.substr(kDefs.size());
      } else if (k != "examples") {
        v = Component(std::move(v));
      }
    }
  } else if (schema.is_array()) {
    for (auto& v : schema) v = Component(std::move(v));
  }
  return schema;
}

// "sandbox::fs::read" -> "sandbox.fs.read" (component names allow [A-Za-z0-9._-]).
std::string Dotted(const std::string& id) {
  std::string out;
  for (size_t i = 0; i < id.size(); ++i) {
    if (id[i] == ':' && i + 1 < id.size() && id[i + 1] == ':') {
      out += '.';
      ++i;
    } else {
      out += id[i];
    }
  }
  return out;
}

json Ref(const std::string& name) { return {{"$ref", std::string(kComponents) + name}}; }
json JsonContent(json schema) { return {{"application/json", {{"schema", std::move(schema)}}}}; }

// Error responses by HTTP status: one entry per status the codes map to,
// naming the codes.
json ErrorResponses(const std::vector<Code>& codes) {
  std::map<int, std::vector<std::string>> by_status;
  for (Code c : codes) by_status[HttpStatus(c)].push_back(std::string(CodeName(c)));
  json out = json::object();
  for (const auto& [status, names] : by_status) {
    std::string d = "S-code error: ";
    for (size_t i = 0; i < names.size(); ++i) d += (i ? ", " : "") + names[i];
    d += " (docs/errors.md)";
    out[std::to_string(status)] = {{"description", d}, {"content", JsonContent(Ref("error"))}};
  }
  return out;
}

json Param(const char* name, const char* in, json schema, const char* d, bool required) {
  return {
      {"name", name}, {"in", in}, {"required", required}, {"description", d}, {"schema", std::move(schema)}};
}

json SandboxIdParam() { return Param("id", "path", {{"type", "string"}}, "The sandbox id (a UUID)", true); }
json PidParam() {
  return Param("pid", "path", {{"type", "integer"}, {"minimum", 1}}, "The process id inside the sandbox",
               true);
}

json Upgrade(const std::string& summary, const std::string& description, json params = json::array()) {
  json op = {
      {"summary", summary},
      {"description", description},
      {"responses",
       {{"101", {{"description", "Switching Protocols: the connection speaks WebSocket from here on"}}},
        {"426", {{"description", "Upgrade Required: a plain HTTP request was sent"}}}}}};
  if (!params.empty()) op["parameters"] = std::move(params);
  return {{"get", std::move(op)}};
}

json ErrorSchema() {
  return {
      {"type", "object"},
      {"description", "An S-code error (docs/errors.md)"},
      {"required", {"code", "docs_url", "fix", "fix_note", "message", "retryable", "type"}},
      {"properties",
       {{"code", {{"type", "string"}, {"pattern", "^S[0-9]{3}$"}, {"description", "The S-code"}}},
        {"details", {{"type", "object"}, {"description", "Present only where docs/errors.md says"}}},
        {"docs_url", {{"type", "string"}, {"description", "<docs_base>#<code>"}}},
        {"fix", {{"type", {"object", "null"}}, {"description", "Keys to merge into the request, or null"}}},
        {"fix_note", {{"type", {"string", "null"}}, {"description", "One-line hint, or null"}}},
        {"message", {{"type", "string"}, {"description", "Human-readable"}}},
        {"retryable", {{"type", "boolean"}, {"description", "Sending the same call again may succeed"}}},
        {"type", {{"type", "string"}, {"description", "validation, config, internal, transient, ..."}}}}}};
}

json OutputLineSchema() {
  auto typed = [](const char* t, json props, std::vector<std::string> req) {
    props["type"] = {{"const", t}};
    req.insert(req.begin(), "type");
    return json{{"type", "object"}, {"properties", std::move(props)}, {"required", req}};
  };
  json channel = {{"type", "string"}, {"enum", {"stdout", "stderr"}}};
  json offset = {{"type", "integer"}, {"minimum", 0}};
  return {
      {"description", "One line of the NDJSON process output stream (docs/api.md#process-output-stream)"},
      {"oneOf",
       {typed("start", {{"stdout_from", offset}, {"stderr_from", offset}}, {"stdout_from", "stderr_from"}),
        typed("data",
              {{"channel", channel},
               {"offset", offset},
               {"data", {{"type", "string"}, {"contentEncoding", "base64"}}}},
              {"channel", "offset", "data"}),
        typed("gap", {{"channel", channel}, {"from", offset}, {"to", offset}}, {"channel", "from", "to"}),
        typed("end", {{"process", Ref("process_info")}}, {"process"}),
        {{"allOf", {Ref("error"), typed("error", json::object(), {})}}}}}};
}

json RunLineSchema() {
  json out = OutputLineSchema();
  out["description"] = "One line of the NDJSON run stream (docs/api.md#run-stream)";
  json& alts = out["oneOf"];
  json offset = {{"type", "integer"}, {"minimum", 0}};
  alts[0]["properties"]["sandbox_id"] = {{"type", "string"}};
  alts[0]["required"].push_back("sandbox_id");
  alts.erase(2);  // a run's stream has no gap: the command waits for a slow reader
  json& end = alts[2];
  end["properties"].erase("process");
  end["properties"]["result"] = {{"type", "object"},
                                 {"properties",
                                  {{"exit_code", {{"type", "integer"}}},
                                   {"success", {{"type", "boolean"}}},
                                   {"duration_ms", offset},
                                   {"sandbox_id", {{"type", "string"}}}}},
                                 {"required", {"exit_code", "success", "duration_ms"}}};
  end["required"] = {"type", "result"};
  return out;
}

json Build() {
  json doc;
  doc["openapi"] = "3.1.0";
  doc["info"] = {{"title", "skiff"},
                 {"version", SkiffVersion()},
                 {"description",
                  "skiff's native HTTP API: the sandbox::* functions (docs/api.md), file transfers, live "
                  "process streams and the WebSocket endpoints. Errors are S-code objects "
                  "(docs/errors.md)."},
                 {"license", {{"name", "Apache-2.0"}, {"identifier", "Apache-2.0"}}}};
  doc["servers"] = {{{"url", "http://127.0.0.1:49134"}, {"description", "a local skiffd (default port)"}}};
  doc["security"] = {{{"bearer", json::array()}}, json::object()};
  json schemas = json::object();
  for (const auto& [name, def] : fn::AllDefinitions().items()) schemas[name] = Component(def);
  schemas["error"] = ErrorSchema();
  schemas["process_output_line"] = OutputLineSchema();
  schemas["run_output_line"] = RunLineSchema();
  json paths = json::object();
  for (const FunctionDef& d : Functions()) {
    std::string name = Dotted(d.id);
    schemas[name + ".request"] = Component(d.request_schema);
    schemas[name + ".response"] = Component(d.response_schema);
    json responses = {
        {"200",
         {{"description", "The function's result"}, {"content", JsonContent(Ref(name + ".response"))}}}};
    std::vector<Code> codes = d.errors;
    if (codes.empty()) codes = {Code::kS001};
    json errors = ErrorResponses(codes);
    for (auto& [status, r] : errors.items()) responses[status] = r;
    responses["401"] = {{"description", "Missing or wrong bearer token"}};
    json post = {{"operationId", name},
                 {"summary", d.description},
                 {"tags", {d.internal ? "engine" : "sandbox"}},
                 {"requestBody", {{"required", false}, {"content", JsonContent(Ref(name + ".request"))}}},
                 {"responses", responses}};
    json info_ok = {{"description", "The function's details"},
                    {"content", JsonContent({{"type", "object"}})}};
    json get = {{"operationId", name + ".info"},
                {"summary", "Details and schemas of " + d.id + " (engine::functions::info)"},
                {"tags", {"engine"}},
                {"responses", {{"200", info_ok}}}};
    paths["/v1/functions/" + d.id] = {{"post", post}, {"get", get}};
  }
  paths["/v1/functions"] = {
      {"get",
       {{"operationId", "functions.list"},
        {"summary", "The functions this server provides (engine::functions::list)"},
        {"tags", {"engine"}},
        {"parameters",
         {Param("prefix", "query", {{"type", "string"}}, "Only ids starting with this", false),
          Param("search", "query", {{"type", "string"}}, "Case-insensitive search in ids and descriptions",
                false),
          Param("include_internal", "query", {{"type", "boolean"}}, "Also list engine::* functions", false)}},
        {"responses",
         {{"200",
           {{"description", "The functions"},
            {"content", JsonContent(Ref("engine.functions.list.response"))}}}}}}}};
  json file_params = {SandboxIdParam(), Param("path", "query", {{"type", "string"}},
                                              "The file's path inside the sandbox", true)};
  json put_params = file_params;
  put_params.push_back(
      Param("mode", "query", {{"type", "string"}}, "Octal mode of a new file (default 0644)", false));
  put_params.push_back(
      Param("parents", "query", {{"type", "boolean"}}, "Create missing parent directories", false));
  paths["/v1/sandboxes/{id}/files"] = {
      {"get",
       {{"operationId", "files.download"},
        {"summary", "Download a file, streamed (any size)"},
        {"tags", {"files"}},
        {"parameters", file_params},
        {"responses",
         [&] {
           json r = ErrorResponses(
               {Code::kS001, Code::kS002, Code::kS004, Code::kS211, Code::kS212, Code::kS215, Code::kS216});
           r["200"] = {
               {"description", "The file's bytes (chunked)"},
               {"headers",
                {{"X-Skiff-Size", {{"description", "Size in bytes"}, {"schema", {{"type", "integer"}}}}},
                 {"X-Skiff-Mode", {{"description", "Octal mode"}, {"schema", {{"type", "string"}}}}},
                 {"X-Skiff-Mtime", {{"description", "Unix seconds"}, {"schema", {{"type", "integer"}}}}}}},
               {"content",
                {{"application/octet-stream",
                  {{"schema", {{"type", "string"}, {"contentMediaType", "application/octet-stream"}}}}}}}};
           return r;
         }()}}},
      {"put",
       {{"operationId", "files.upload"},
        {"summary", "Upload a file, streamed, written atomically"},
        {"tags", {"files"}},
        {"parameters", put_params},
        {"requestBody",
         {{"required", true},
          {"content",
           {{"application/octet-stream",
             {{"schema", {{"type", "string"}, {"contentMediaType", "application/octet-stream"}}}}}}}}},
        {"responses", [&] {
           json r = ErrorResponses({Code::kS001, Code::kS002, Code::kS004, Code::kS210, Code::kS211,
                                    Code::kS212, Code::kS215, Code::kS216, Code::kS218});
           r["200"] = {{"description", "Written"},
                       {"content", JsonContent(Ref("sandbox.fs.write.response"))}};
           return r;
         }()}}}};
  paths["/v1/sandboxes/{id}/processes/{pid}/output"] = {
      {"get",
       {{"operationId", "process.output.stream"},
        {"summary", "A live process's output as newline-delimited JSON, flushed as it arrives"},
        {"tags", {"processes"}},
        {"parameters",
         {SandboxIdParam(), PidParam(),
          Param("stdout_from", "query", {{"type", "integer"}, {"minimum", 0}}, "Absolute stdout offset",
                false),
          Param("stderr_from", "query", {{"type", "integer"}, {"minimum", 0}}, "Absolute stderr offset",
                false),
          Param("follow", "query", {{"type", "boolean"}}, "Stream until the process exits", false)}},
        {"responses", [&] {
           json r =
               ErrorResponses({Code::kS001, Code::kS002, Code::kS003, Code::kS004, Code::kS220, Code::kS300});
           r["200"] = {{"description", "One JSON object per line (process_output_line)"},
                       {"content", {{"application/x-ndjson", {{"schema", Ref("process_output_line")}}}}}};
           return r;
         }()}}}};
  paths["/v1/run"] = {
      {"post",
       {{"operationId", "run.stream"},
        {"summary",
         "sandbox::run with its output streamed as newline-delimited JSON (docs/api.md#run-stream)"},
        {"tags", {"sandbox"}},
        {"requestBody", {{"required", true}, {"content", JsonContent(Ref("sandbox.run.request"))}}},
        {"responses", [&] {
           json r =
               ErrorResponses({Code::kS001, Code::kS100, Code::kS101, Code::kS102, Code::kS300, Code::kS400});
           r["200"] = {{"description", "start, data lines, then end (or error), one JSON object per line"},
                       {"content", {{"application/x-ndjson", {{"schema", Ref("run_output_line")}}}}}};
           return r;
         }()}}}};
  paths["/v1/sandboxes/{id}/processes/{pid}/tty"] = Upgrade(
      "Attach to a live process over WebSocket",
      "Binary messages in are the process's input (keystrokes); binary messages out are its output "
      "from ?from=N on; text messages are JSON control: {\"type\":\"resize\",\"rows\",\"cols\"} in; "
      "start, gap, exit and error out (docs/api.md#process-terminal).",
      {SandboxIdParam(), PidParam(),
       Param("from", "query", {{"type", "integer"}, {"minimum", 0}}, "Output offset to replay from", false)});
  paths["/ws/channels/{id}"] = Upgrade(
      "Attach to one side of a data channel",
      "docs/api.md#enginechannelscreate: binary frames carry the bytes; the writer's close ends the stream.",
      {Param("id", "path", {{"type", "string"}}, "The channel id", true),
       Param("key", "query", {{"type", "string"}}, "The channel's access key", true),
       Param("dir", "query", {{"type", "string"}, {"enum", {"read", "write"}}}, "The side", true)});
  paths["/"] = Upgrade("The iii engine protocol (WebSocket)",
                       "The unmodified iii-sdk connects here as to an iii engine (docs/api.md).");
  paths["/otel"] =
      Upgrade("Telemetry sink (WebSocket)", "Accepts and discards the SDK's OpenTelemetry frames.");
  auto simple_get = [](const char* op, const char* summary, bool open, json ok) {
    json get = {{"operationId", op}, {"summary", summary}, {"tags", {"host"}}, {"responses", {{"200", ok}}}};
    if (open) get["security"] = json::array({json::object()});
    return json{{"get", get}};
  };
  json any_json = JsonContent({{"type", "object"}});
  json text = {{"text/plain", {{"schema", {{"type", "string"}}}}}};
  paths["/healthz"] = simple_get("healthz", "Liveness and host facts (no authentication; 503 when degraded)",
                                 true, {{"description", "Healthy"}, {"content", any_json}});
  paths["/healthz"]["get"]["responses"]["503"] = {{"description", "Degraded"}, {"content", any_json}};
  paths["/metrics"] = simple_get("metrics", "Prometheus text exposition", false,
                                 {{"description", "Metrics"}, {"content", text}});
  paths["/openapi.json"] = simple_get("openapi", "This document (no authentication)", true,
                                      {{"description", "The OpenAPI 3.1 document"}, {"content", any_json}});
  doc["paths"] = std::move(paths);
  doc["components"] = {{"schemas", std::move(schemas)},
                       {"securitySchemes",
                        {{"bearer",
                          {{"type", "http"},
                           {"scheme", "bearer"},
                           {"description",
                            "auth_token or one of api_keys (docs/configuration.md); none when the "
                            "daemon has no token"}}}}}};
  return doc;
}

}  // namespace

json OpenApiDocument() { return Build(); }

const std::string& OpenApiText() {
  static const std::string* text = new std::string(Build().dump(2) + "\n");
  return *text;
}

}  // namespace skiff::api
