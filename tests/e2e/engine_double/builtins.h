// Functions the iii engine serves itself, as the engine double answers them:
// in-memory state (state::set / get / delete) and the engine::workers::list
// rows. engine::workers::register and the workers-available trigger change
// connection state, so the double (engine_double.h) handles those itself.
// Each shape names the engine source it copies (engine/src/…).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace skiff::e2e::engine_double {

// What a builtin answers: a result (absent = the engine's `None`, which the
// invocationresult omits) or an error body {code, message}.
struct BuiltinAnswer {
  std::optional<nlohmann::json> result;
  std::optional<nlohmann::json> error;
};

inline nlohmann::json ErrorBody(const std::string& code, const std::string& message) {
  return {{"code", code}, {"message", message}};
}

// function-macros/src/lib.rs: an input that does not deserialize into the
// function's input type answers deserialization_error. The double checks only
// that the named string fields are there.
inline std::optional<nlohmann::json> MissingField(const std::string& function_id, const nlohmann::json& in,
                                                  std::initializer_list<const char*> fields) {
  for (const char* f : fields) {
    if (!in.is_object() || !in.contains(f) || !in[f].is_string()) {
      return ErrorBody("deserialization_error", "Failed to deserialize input for " + function_id +
                                                    ": missing or invalid field `" + f + "`");
    }
  }
  return std::nullopt;
}

// workers/state/state.rs with the in-memory kv adapter: values by (scope, key).
class StateStore {
 public:
  // Returns nullopt when `function_id` is not a state function.
  std::optional<BuiltinAnswer> Call(const std::string& function_id, const nlohmann::json& in) {
    using json = nlohmann::json;
    if (function_id == "state::set") {
      // state.rs set → StreamSetResult {old_value, new_value} (sdk helpers stream.rs).
      if (auto e = MissingField(function_id, in, {"scope", "key"})) return BuiltinAnswer{std::nullopt, e};
      json value = in.value("value", json());
      auto& slot = values_[{in["scope"], in["key"]}];
      json old = slot.has_value() ? *slot : json();
      slot = value;
      return BuiltinAnswer{json{{"old_value", old}, {"new_value", value}}, std::nullopt};
    }
    if (function_id == "state::get") {
      // state.rs get → Option<Value>: the value, or nothing.
      if (auto e = MissingField(function_id, in, {"scope", "key"})) return BuiltinAnswer{std::nullopt, e};
      auto it = values_.find({in["scope"], in["key"]});
      if (it == values_.end() || !it->second.has_value()) return BuiltinAnswer{};
      return BuiltinAnswer{*it->second, std::nullopt};
    }
    if (function_id == "state::delete") {
      // state.rs delete → the value it removed, or nothing.
      if (auto e = MissingField(function_id, in, {"scope", "key"})) return BuiltinAnswer{std::nullopt, e};
      auto it = values_.find({in["scope"], in["key"]});
      if (it == values_.end() || !it->second.has_value()) return BuiltinAnswer{};
      json old = *it->second;
      values_.erase(it);
      return BuiltinAnswer{old, std::nullopt};
    }
    return std::nullopt;
  }

 private:
  std::map<std::pair<std::string, std::string>, std::optional<nlohmann::json>> values_;
};

// One engine::workers::list row (engine_fn/mod.rs WorkerSummary, filled by
// list_worker_summaries).
struct WorkerRow {
  std::string id, ns;
  nlohmann::json name, description, version, runtime, os, isolation, pid;  // null when not declared
  std::string ip_address;
  size_t function_count = 0, active_invocations = 0;
  uint64_t connected_at_ms = 0;
};

// engine_fn/mod.rs workers_list: only workers that reported a pid on
// engine::workers::register are listed (list_worker_summaries skips the
// rest), filtered by the optional runtime / status / search (name substring,
// case-insensitive) of the input.
// `legacy`: as up to 0.22, whose WorkerSummary had no namespace field (it
// came with the namespaces, engine/src/workers/engine_fn/mod.rs).
inline nlohmann::json WorkersList(const std::vector<WorkerRow>& rows, const nlohmann::json& in,
                                  bool legacy = false) {
  using json = nlohmann::json;
  auto lower = [](std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  json out = json::array();
  for (const auto& w : rows) {
    if (w.pid.is_null()) continue;
    if (in.is_object() && in.contains("runtime") && in["runtime"].is_string() && w.runtime != in["runtime"]) {
      continue;
    }
    // WorkerConnectionStatus::Connected ("connected") is what a WebSocket
    // worker reports (worker_connections/mod.rs).
    if (in.is_object() && in.contains("status") && in["status"].is_string() && in["status"] != "connected") {
      continue;
    }
    if (in.is_object() && in.contains("search") && in["search"].is_string() &&
        !in["search"].get<std::string>().empty()) {
      std::string name = w.name.is_string() ? w.name.get<std::string>() : "";
      if (lower(name).find(lower(in["search"])) == std::string::npos) continue;
    }
    json row = {{"name", w.name},
                {"description", w.description},
                {"version", w.version},
                {"id", w.id},
                {"namespace", w.ns},
                {"runtime", w.runtime},
                {"os", w.os},
                {"status", "connected"},
                {"function_count", w.function_count},
                {"connected_at_ms", w.connected_at_ms},
                {"active_invocations", w.active_invocations},
                {"isolation", w.isolation},
                {"ip_address", w.ip_address}};
    if (legacy) row.erase("namespace");
    out.push_back(std::move(row));
  }
  return json{{"workers", out}};
}

}  // namespace skiff::e2e::engine_double
