#include "protocol/messages.h"

#include "protocol/message_fields.h"

namespace skiff::proto {

using nlohmann::json;

json InfoRequest::ToJson() const { return json{{"op", kOp}}; }

Result<InfoRequest> InfoRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  return InfoRequest{};
}

json InfoResult::ToJson() const {
  return json{{"proto", proto},       {"agent", agent}, {"kernel", kernel},
              {"ready_ms", ready_ms}, {"pid", pid},     {"restored", restored}};
}

Result<InfoResult> InfoResult::FromJson(const json& j) {
  auto parse = [&]() -> Result<InfoResult> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "RESULT"));
    InfoResult r;
    SKIFF_ASSIGN_OR_RETURN(int64_t proto, field::IntIn(j, "proto", 0, UINT32_MAX));
    r.proto = static_cast<uint32_t>(proto);
    SKIFF_ASSIGN_OR_RETURN(r.agent, field::String(j, "agent"));
    SKIFF_ASSIGN_OR_RETURN(r.kernel, field::String(j, "kernel"));
    SKIFF_ASSIGN_OR_RETURN(r.ready_ms, field::IntIn(j, "ready_ms", 0, INT64_MAX));
    SKIFF_ASSIGN_OR_RETURN(r.pid, field::IntIn(j, "pid", 1, INT32_MAX));
    SKIFF_ASSIGN_OR_RETURN(r.restored, field::Bool(j, "restored", false));
    return r;
  };
  auto r = parse();
  if (!r.ok()) return field::AnswerError("info RESULT", r.error());
  return r;
}

json ShutdownRequest::ToJson() const { return json{{"op", kOp}}; }

Result<ShutdownRequest> ShutdownRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  return ShutdownRequest{};
}

json QuiesceRequest::ToJson() const { return json{{"op", kOp}}; }

Result<QuiesceRequest> QuiesceRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  return QuiesceRequest{};
}

json ClockRequest::ToJson() const { return json{{"op", kOp}, {"realtime_ns", realtime_ns}}; }

Result<ClockRequest> ClockRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  constexpr int64_t k2000 = int64_t{946684800} * 1000000000;   // 2000-01-01
  constexpr int64_t k2200 = int64_t{7258118400} * 1000000000;  // 2200-01-01
  SKIFF_ASSIGN_OR_RETURN(int64_t ns, field::IntIn(j, "realtime_ns", k2000, k2200));
  return ClockRequest{ns};
}

json EmptyResult::ToJson() const { return json::object(); }

Result<EmptyResult> EmptyResult::FromJson(const json& j) {
  if (!j.is_object()) return field::AnswerError("RESULT", InvalidRequest("RESULT is not a JSON object"));
  return EmptyResult{};
}

AgentError AgentError::FromError(const Error& e) {
  AgentError a;
  a.code = e.code();
  a.message = e.message();
  a.fix = e.fix();
  a.details = e.details();
  return a;
}

Error AgentError::ToError() const {
  Error e(code, message);
  if (fix.is_object()) e.set_fix(fix);
  if (details) e.set_details(*details);
  return e;
}

json AgentError::ToJson() const {
  json j{{"code", std::string(CodeName(code))}, {"message", message}};
  if (!fix.is_null()) j["fix"] = fix;
  if (details) j["details"] = *details;
  return j;
}

Result<AgentError> AgentError::FromJson(const json& j) {
  auto parse = [&]() -> Result<AgentError> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "ERROR"));
    AgentError a;
    SKIFF_ASSIGN_OR_RETURN(std::string code, field::String(j, "code"));
    auto c = CodeFromName(code);
    if (!c) return InvalidRequest("code: not an S-code: " + code);
    a.code = *c;
    SKIFF_ASSIGN_OR_RETURN(a.message, field::String(j, "message"));
    if (!field::Missing(j, "fix")) {
      if (!j["fix"].is_object()) return InvalidRequest("fix: expected an object");
      a.fix = j["fix"];
    }
    if (j.contains("details")) a.details = j["details"];
    return a;
  };
  auto r = parse();
  if (!r.ok()) return field::AnswerError("ERROR", r.error());
  return r;
}

}  // namespace skiff::proto
