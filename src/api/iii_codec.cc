#include "api/iii_codec.h"

#include "api/http_util.h"

namespace skiff::api::iii {

using json = nlohmann::json;

std::string StringField(const json& m, const char* key) {
  if (!m.is_object()) return "";
  auto it = m.find(key);
  return it != m.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string MessageType(const json& m) { return StringField(m, "type"); }

bool IsTelemetryFrame(std::string_view frame, bool binary) {
  if (!binary || frame.size() < 4) return false;
  std::string_view pre = frame.substr(0, 4);
  return pre == "OTLP" || pre == "MTRC" || pre == "LOGS";
}

std::optional<InvokeRequest> DecodeInvoke(json& m) {
  if (!m.is_object() || !m.contains("function_id") || !m["function_id"].is_string()) {
    return std::nullopt;
  }
  InvokeRequest r;
  r.function_id = m["function_id"].get<std::string>();
  r.invocation_id = m.contains("invocation_id") ? m["invocation_id"] : json(nullptr);
  if (m.contains("action") && m["action"].is_object()) {
    json type = m["action"].value("type", json(""));
    if (type == json("void"))
      r.action = Action::kVoid;
    else if (type == json("enqueue"))
      r.action = Action::kEnqueue;
  }
  r.foreign_namespace =
      m.contains("namespace") && !m["namespace"].is_null() && m["namespace"] != json("default");
  r.data = m.contains("data") ? std::move(m["data"]) : json::object();
  return r;
}

std::string EncodeResult(const json& invocation_id, const std::string& function_id, json result) {
  return Dump({{"type", "invocationresult"},
               {"invocation_id", invocation_id},
               {"function_id", function_id},
               {"result", std::move(result)}});
}

std::string EncodeError(const json& invocation_id, const std::string& function_id, json error) {
  return Dump({{"type", "invocationresult"},
               {"invocation_id", invocation_id},
               {"function_id", function_id},
               {"error", std::move(error)}});
}

std::string EncodeInvocation(const json& invocation_id, const std::string& function_id, Invocation inv,
                             const std::function<json(const Error&)>& error_body) {
  if (inv.result) return EncodeResult(invocation_id, function_id, std::move(*inv.result));
  if (inv.error) {
    return EncodeError(invocation_id, function_id, InvocationFailed(Dump(error_body(*inv.error))));
  }
  if (inv.engine_error) return EncodeError(invocation_id, function_id, inv.engine_error->ToJson());
  if (inv.relayed_error) return EncodeError(invocation_id, function_id, std::move(*inv.relayed_error));
  return EncodeResult(invocation_id, function_id, nullptr);
}

json EnqueueRefused() {
  return {{"code", "enqueue_error"}, {"message", "queues are not supported by skiff"}};
}

json FunctionNotFound(const std::string& function_id) {
  return EngineFault::FunctionNotFound(function_id).ToJson();
}

std::string Pong() { return R"({"type":"pong"})"; }

std::string WorkerRegistered(const std::string& worker_id, const std::string& reattach_token) {
  return Dump({{"type", "workerregistered"}, {"worker_id", worker_id}, {"reattach_token", reattach_token}});
}

std::string TriggerRegistrationResult(const json& m) {
  return Dump({{"type", "triggerregistrationresult"},
               {"id", m.value("id", json(nullptr))},
               {"trigger_type", m.value("trigger_type", json(nullptr))},
               {"function_id", m.value("function_id", json(nullptr))}});
}

std::string RegisterWorker(const std::string& version, const std::string& os, long pid,
                           const std::string& ns) {
  json data = {{"runtime", "cpp"},
               {"version", version},
               {"name", "iii-sandbox"},
               {"description", "skiff: sandboxes for untrusted code"},
               {"os", os},
               {"pid", pid}};
  if (!ns.empty()) data["namespace"] = ns;
  return Dump({{"type", "invokefunction"},
               {"invocation_id", nullptr},
               {"function_id", "engine::workers::register"},
               {"data", std::move(data)},
               {"action", {{"type", "void"}}}});
}

std::string DescribeRejection(const json& m, const std::string& ns) {
  std::string code = StringField(m, "code"), owner = StringField(m, "owner_worker_id");
  std::string where = StringField(m, "namespace");
  if (where.empty()) where = ns.empty() ? "default" : ns;
  if (code == "WORKER_NAMESPACE_CONFLICT") {
    return "another live worker named " + json(StringField(m, "worker_name")).dump() + " (worker " +
           json(owner).dump() + ") already serves namespace '" + where +
           "': two skiff hosts were given one namespace; give each host its own --iii-namespace "
           "(iii_namespace)";
  }
  if (code == "FUNCTION_NAMESPACE_CONFLICT") {
    return "function " + json(StringField(m, "function_id")).dump() + " in namespace '" + where +
           "' is already registered by worker " + json(owner).dump() +
           (ns.empty()
                ? " (another skiff on this engine? hosts of a fleet each need their own --iii-namespace)"
                : " (another skiff host with this namespace?)");
  }
  return "registration rejected (" + json(code).dump() + ") in namespace '" + where + "' by owner " +
         json(owner).dump();
}

std::string DescribeConnectionError(const json& m) {
  std::string code, message;
  if (auto it = m.find("error"); it != m.end() && it->is_object()) {
    code = StringField(*it, "code");
    message = StringField(*it, "message");
  }
  if (message.size() > 300) message = message.substr(0, 300) + "...";
  std::string said = json(message).dump(-1, ' ', false, json::error_handler_t::replace);
  if (code == "AUTH_ERROR") {
    return "its auth function did not admit it (AUTH_ERROR: " + said +
           "); check the credential (engine_token_file) and what the auth function expects";
  }
  return "error " + json(code).dump(-1, ' ', false, json::error_handler_t::replace) + ": " + said;
}

std::string RegisterFunction(const FunctionDef& f) {
  return Dump({{"type", "registerfunction"},
               {"id", f.id},
               {"description", f.description},
               {"request_format", f.request_schema},
               {"response_format", f.response_schema}});
}

std::string Invoke(const std::string& invocation_id, const std::string& function_id, const std::string& ns,
                   json data) {
  json m = {{"type", "invokefunction"},
            {"invocation_id", invocation_id},
            {"function_id", function_id},
            {"data", std::move(data)}};
  if (!ns.empty()) m["namespace"] = ns;
  return Dump(m);
}

std::string Reattach(const std::string& previous_worker_id, const std::string& reattach_token) {
  return Dump(
      {{"type", "reattach"}, {"previous_worker_id", previous_worker_id}, {"reattach_token", reattach_token}});
}

}  // namespace skiff::api::iii
