#include "protocol/hello.h"

#include "protocol/frame.h"
#include "protocol/message_fields.h"

namespace skiff::proto {

using nlohmann::json;

json AgentHello::ToJson() const {
  json j{{"proto", proto}, {"agent", agent}, {"ops", ops}};
  if (restored) j["restored"] = true;
  return j;
}

Result<AgentHello> AgentHello::FromJson(const json& j) {
  auto parse = [&]() -> Result<AgentHello> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "HELLO"));
    AgentHello h;
    SKIFF_ASSIGN_OR_RETURN(int64_t proto, field::IntIn(j, "proto", 0, UINT32_MAX));
    h.proto = static_cast<uint32_t>(proto);
    SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> agent, field::OptString(j, "agent"));
    h.agent = agent.value_or(std::string());
    SKIFF_ASSIGN_OR_RETURN(h.ops, field::Strings(j, "ops"));
    SKIFF_ASSIGN_OR_RETURN(h.restored, field::Bool(j, "restored", false));
    return h;
  };
  auto r = parse();
  if (!r.ok()) return Platform("boot", "agent sent a malformed HELLO (" + r.error().message() + ")");
  return r;
}

json HostHello::ToJson() const { return json{{"proto", proto}}; }

Result<HostHello> HostHello::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "HELLO"));
  SKIFF_ASSIGN_OR_RETURN(int64_t proto, field::IntIn(j, "proto", 0, UINT32_MAX));
  return HostHello{static_cast<uint32_t>(proto)};
}

json Resume::ToJson() const {
  json j{{"seed", seed_hex}, {"realtime_ns", realtime_ns}};
  if (hostname) j["hostname"] = *hostname;
  return j;
}

Result<Resume> Resume::FromJson(const json& j) {
  auto parse = [&]() -> Result<Resume> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "resume"));
    Resume r;
    SKIFF_ASSIGN_OR_RETURN(r.seed_hex, field::String(j, "seed"));
    if (r.seed_hex.size() % 2 != 0) return InvalidRequest("seed: odd length");
    for (char c : r.seed_hex)
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
        return InvalidRequest("seed: not lower-case hex");
    auto ns = j.find("realtime_ns");
    if (ns == j.end() || !ns->is_number_integer()) return InvalidRequest("realtime_ns: expected an integer");
    SKIFF_ASSIGN_OR_RETURN(r.realtime_ns, field::Int(j, "realtime_ns", 0));
    auto h = j.find("hostname");
    if (h != j.end()) {
      if (!h->is_string()) return InvalidRequest("hostname: expected a string");
      r.hostname = h->get<std::string>();
    }
    return r;
  };
  auto r = parse();
  if (!r.ok()) return InvalidRequest("malformed resume request (" + r.error().message() + ")");
  return r;
}

std::string EncodeHostHello() { return EncodeFrame(0, Type::kHello, 0, HostHello{kVersion}.ToJson().dump()); }

std::string EncodeResumeHello(const Resume& resume) {
  return EncodeFrame(0, Type::kHello, 0, json{{"proto", kVersion}, {"resume", resume.ToJson()}}.dump());
}

std::string EncodeAgentHello(const AgentHello& hello) {
  return EncodeFrame(0, Type::kHello, 0, hello.ToJson().dump(-1, ' ', false, json::error_handler_t::replace));
}

}  // namespace skiff::proto
