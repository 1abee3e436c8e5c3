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

json UsageRequest::ToJson() const { return json{{"op", kOp}}; }

Result<UsageRequest> UsageRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  return UsageRequest{};
}

json UsageResult::ToJson() const {
  return json{{"cpu_count", cpu_count},
              {"cpu_busy_ticks", cpu_busy_ticks},
              {"cpu_total_ticks", cpu_total_ticks},
              {"mem_used_bytes", mem_used_bytes},
              {"mem_total_bytes", mem_total_bytes},
              {"disk_used_bytes", disk_used_bytes},
              {"disk_total_bytes", disk_total_bytes}};
}

Result<UsageResult> UsageResult::FromJson(const json& j) {
  auto parse = [&]() -> Result<UsageResult> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "RESULT"));
    UsageResult r;
    auto read = [&](const char* key, uint64_t hi, uint64_t* out) -> Status {
      SKIFF_ASSIGN_OR_RETURN(int64_t v, field::IntIn(j, key, 0, static_cast<int64_t>(hi)));
      *out = static_cast<uint64_t>(v);
      return OkStatus();
    };
    SKIFF_ASSIGN_OR_RETURN(int64_t cpus, field::IntIn(j, "cpu_count", 1, kMaxUsageCpus));
    r.cpu_count = static_cast<uint32_t>(cpus);
    SKIFF_RETURN_IF_ERROR(read("cpu_busy_ticks", kMaxUsageTicks, &r.cpu_busy_ticks));
    SKIFF_RETURN_IF_ERROR(read("cpu_total_ticks", kMaxUsageTicks, &r.cpu_total_ticks));
    SKIFF_RETURN_IF_ERROR(read("mem_used_bytes", kMaxUsageBytes, &r.mem_used_bytes));
    SKIFF_RETURN_IF_ERROR(read("mem_total_bytes", kMaxUsageBytes, &r.mem_total_bytes));
    SKIFF_RETURN_IF_ERROR(read("disk_used_bytes", kMaxUsageBytes, &r.disk_used_bytes));
    SKIFF_RETURN_IF_ERROR(read("disk_total_bytes", kMaxUsageBytes, &r.disk_total_bytes));
    if (r.cpu_busy_ticks > r.cpu_total_ticks)
      return InvalidRequest("cpu_busy_ticks: more than cpu_total_ticks");
    if (r.mem_used_bytes > r.mem_total_bytes)
      return InvalidRequest("mem_used_bytes: more than mem_total_bytes");
    if (r.disk_used_bytes > r.disk_total_bytes)
      return InvalidRequest("disk_used_bytes: more than disk_total_bytes");
    return r;
  };
  auto r = parse();
  if (!r.ok()) return field::AnswerError("usage RESULT", r.error());
  return r;
}

json PortConnectRequest::ToJson() const { return json{{"op", kOp}, {"port", port}}; }

Result<PortConnectRequest> PortConnectRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  SKIFF_ASSIGN_OR_RETURN(int64_t port, field::IntIn(j, "port", 1, 65535));
  return PortConnectRequest{static_cast<uint16_t>(port)};
}

json PortConnectMeta::ToJson() const { return json{{"address", address}}; }

Result<PortConnectMeta> PortConnectMeta::FromJson(const json& j) {
  auto parse = [&]() -> Result<PortConnectMeta> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "META"));
    SKIFF_ASSIGN_OR_RETURN(std::string a, field::String(j, "address"));
    if (a != "127.0.0.1" && a != "::1") return InvalidRequest("address: not a loopback address");
    return PortConnectMeta{std::move(a)};
  };
  auto r = parse();
  if (!r.ok()) return field::AnswerError("port.connect META", r.error());
  return r;
}

json PortConnectResult::ToJson() const { return json{{"bytes_in", bytes_in}, {"bytes_out", bytes_out}}; }

Result<PortConnectResult> PortConnectResult::FromJson(const json& j) {
  auto parse = [&]() -> Result<PortConnectResult> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "RESULT"));
    PortConnectResult r;
    SKIFF_ASSIGN_OR_RETURN(r.bytes_in, field::IntIn(j, "bytes_in", 0, kMaxPortBytes));
    SKIFF_ASSIGN_OR_RETURN(r.bytes_out, field::IntIn(j, "bytes_out", 0, kMaxPortBytes));
    return r;
  };
  auto r = parse();
  if (!r.ok()) return field::AnswerError("port.connect RESULT", r.error());
  return r;
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
