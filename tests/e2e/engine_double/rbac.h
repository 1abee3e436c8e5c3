// The engine double's RBAC rules: a listener's `rbac` block, the session an
// auth function grants a connection, and the decision whether that session
// may reach a function. Pure rules, no I/O; the double (engine_double.h)
// calls them from its event loop. Each rule names the iii engine source it
// copies (engine/src/…, the engine repository at v0.23.0-rc.4):
// workers/worker/rbac_config.rs (filters, is_function_allowed) and
// workers/worker/rbac_session.rs (AuthInput, AuthResult, Session).
#pragma once

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "registry.h"

namespace skiff::e2e::engine_double {

// rbac_config.rs wildcard_match: `*` is any run of characters. Ported as
// written, quirks included: the first part must start the value, the last
// must end it, the parts between are found left to right.
inline bool WildcardMatch(std::string_view pattern, std::string_view value) {
  if (pattern == "*") return true;
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    size_t star = pattern.find('*', start);
    parts.push_back(
        pattern.substr(start, star == std::string_view::npos ? std::string_view::npos : star - start));
    if (star == std::string_view::npos) break;
    start = star + 1;
  }
  if (parts.size() == 1) return pattern == value;
  size_t pos = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].empty()) continue;
    size_t found = value.substr(pos).find(parts[i]);
    if (found == std::string_view::npos) return false;
    if (i == 0 && found != 0) return false;
    pos += found + parts[i].size();
  }
  return parts.back().empty() || value.ends_with(parts.back());
}

// rbac_config.rs parse_match_pattern: `match("…")` or `match('…')`, trimmed.
inline std::optional<std::string> ParseMatchPattern(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  bool dq = s.starts_with("match(\"") && s.ends_with("\")");
  bool sq = s.starts_with("match('") && s.ends_with("')");
  if ((!dq && !sq) || s.size() < 9) return std::nullopt;
  return std::string(s.substr(7, s.size() - 9));
}

// serde's "invalid type" text for a JSON value (serde_json's Value
// deserializer: `null`, `string "x"`, `integer `5``, `map`, …), so errors the
// engine builds from serde read the same.
inline std::string SerdeUnexpected(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return std::string("boolean `") + (v.get<bool>() ? "true" : "false") + "`";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return "integer `" + v.dump() + "`";
    case nlohmann::json::value_t::number_float:
      return "floating point `" + v.dump() + "`";
    case nlohmann::json::value_t::string:
      return "string " + v.dump();
    case nlohmann::json::value_t::array:
      return "sequence";
    default:
      return "map";
  }
}
inline std::string SerdeInvalidType(const nlohmann::json& v, const std::string& expected) {
  return "invalid type: " + SerdeUnexpected(v) + ", expected " + expected;
}

// rbac_config.rs FunctionFilter: one `expose_functions` rule, a wildcard on
// the function id or a set of metadata conditions, scoped to one namespace
// (`default` when it names none).
class FunctionFilter {
 public:
  // rbac_config.rs `impl Deserialize for FunctionFilter`: `entry` is the rule
  // as the engine's config spells it — the string `match("api::*")`, or a map
  // {match: "api::*"} / {metadata: {...}}, either with an optional namespace.
  // Throws std::invalid_argument with the engine's message for a bad rule.
  static FunctionFilter Parse(const nlohmann::json& entry) {
    FunctionFilter f;
    if (entry.is_string()) {
      auto p = ParseMatchPattern(entry.get<std::string>());
      if (!p) throw std::invalid_argument("expected match(\"pattern\"), got: " + entry.get<std::string>());
      f.pattern_ = *p;
      return f;
    }
    if (!entry.is_object()) {
      throw std::invalid_argument(
          SerdeInvalidType(entry, "a match(\"pattern\") string or a map with 'metadata' key"));
    }
    std::optional<std::string> pattern;
    for (auto& [key, value] : entry.items()) {
      if (key == "metadata") {
        if (!value.is_object()) throw std::invalid_argument(SerdeInvalidType(value, "a map"));
        for (auto& [k, v] : value.items()) {
          // parse_metadata_value: a `match("…")` string is a wildcard, anything else exact.
          std::optional<std::string> wild;
          if (v.is_string()) wild = ParseMatchPattern(v.get<std::string>());
          f.metadata_[k] = wild ? Condition{nlohmann::json(), *wild} : Condition{v, std::nullopt};
        }
      } else if (key == "match") {
        // The map form takes the raw pattern, no `match("…")` wrapper.
        if (!value.is_string()) throw std::invalid_argument(SerdeInvalidType(value, "a string"));
        pattern = value.get<std::string>();
      } else if (key == "namespace") {
        if (!value.is_string()) throw std::invalid_argument(SerdeInvalidType(value, "a string"));
        f.namespace_ = value.get<std::string>();
      } else {
        throw std::invalid_argument(
            "unknown key '" + key +
            "' in expose_functions filter; expected 'match', 'metadata', or 'namespace'");
      }
    }
    if (pattern && !f.metadata_.empty()) {
      throw std::invalid_argument("a filter has either a 'match' or a 'metadata' key, not both");
    }
    if (!pattern && f.metadata_.empty()) {
      throw std::invalid_argument("expected a 'match' or 'metadata' key with filter conditions");
    }
    f.pattern_ = pattern;
    return f;
  }

  // FunctionFilter::matches: only in the rule's namespace; a metadata rule
  // needs every condition met by the function's registered metadata (an
  // object), a wildcard condition only matching a string.
  bool Matches(const std::string& function_id, const std::string& ns, const nlohmann::json* metadata) const {
    if (namespace_.value_or(kDefaultNamespace) != ns) return false;
    if (pattern_) return WildcardMatch(*pattern_, function_id);
    if (!metadata || !metadata->is_object()) return false;
    return std::all_of(metadata_.begin(), metadata_.end(), [&](const auto& kv) {
      auto it = metadata->find(kv.first);
      if (it == metadata->end()) return false;
      if (kv.second.wildcard)
        return it->is_string() && WildcardMatch(*kv.second.wildcard, it->template get<std::string>());
      return *it == kv.second.exact;
    });
  }

 private:
  struct Condition {
    nlohmann::json exact;
    std::optional<std::string> wildcard;
  };
  std::optional<std::string> pattern_;         // FilterMatcher::Match
  std::map<std::string, Condition> metadata_;  // FilterMatcher::Metadata
  std::optional<std::string> namespace_;
};

// rbac_config.rs RbacConfig: the `rbac` block of one listener (a worker
// manager entry). The registration hooks are not served.
struct RbacConfig {
  std::string auth_function_id;  // empty: none, every connection is let in
  std::vector<FunctionFilter> expose_functions;
};

// rbac_config.rs INFRASTRUCTURE_FUNCTIONS: always allowed, unless forbidden.
inline bool IsInfrastructureFunction(const std::string& id) {
  static const char* const kIds[] = {
      "engine::channels::create", "engine::workers::register", "engine::log::info",  "engine::log::warn",
      "engine::log::error",       "engine::log::debug",        "engine::log::trace", "engine::baggage::get",
      "engine::baggage::set",     "engine::baggage::get_all"};
  return std::any_of(std::begin(kIds), std::end(kIds), [&](const char* k) { return id == k; });
}

// rbac_session.rs Session: what a connection may do. The engine gives every
// worker connection one; on a listener without an `rbac` block it allows
// everything.
struct Session {
  std::shared_ptr<const RbacConfig> rbac;  // the listener's block; null: none
  // Grants per namespace; the keys are also the namespaces the connection may
  // declare on engine::workers::register (none: any).
  std::map<std::string, std::vector<std::string>> namespaces;
  std::vector<std::string> allowed_functions;                     // grants in `default` only
  std::vector<std::string> forbidden_functions;                   // denials, in every namespace
  std::optional<std::vector<std::string>> allowed_trigger_types;  // none: every type
  bool allow_trigger_type_registration = true;
  bool allow_function_registration = true;
  nlohmann::json context = nlohmann::json::object();
  std::optional<std::string> function_registration_prefix;
};

// rbac_config.rs grant_matches: an exact id, or a wildcard, either spelled
// bare (`svc::*`) or wrapped (`match("svc::*")`).
inline bool GrantMatches(const std::string& grant, const std::string& function_id) {
  std::string raw = ParseMatchPattern(grant).value_or(grant);
  return raw == function_id || (raw.find('*') != std::string::npos && WildcardMatch(raw, function_id));
}

// rbac_config.rs is_function_allowed, in its order: forbidden (global) →
// deny; a grant of the namespace → allow; an unscoped grant, in `default`
// only → allow; infrastructure → allow; no rbac block → allow; else any
// expose filter matching the function reached in `ns` (its metadata, when it
// exists there).
inline bool IsFunctionAllowed(const std::string& function_id, const std::string& ns, const Session& s,
                              const nlohmann::json* metadata) {
  auto has = [&](const std::vector<std::string>& v) {
    return std::find(v.begin(), v.end(), function_id) != v.end();
  };
  if (has(s.forbidden_functions)) return false;
  if (auto it = s.namespaces.find(ns); it != s.namespaces.end()) {
    for (const auto& g : it->second) {
      if (GrantMatches(g, function_id)) return true;
    }
  }
  if (ns == kDefaultNamespace && has(s.allowed_functions)) return true;
  if (IsInfrastructureFunction(function_id)) return true;
  if (!s.rbac) return true;
  return std::any_of(s.rbac->expose_functions.begin(), s.rbac->expose_functions.end(),
                     [&](const FunctionFilter& f) { return f.Matches(function_id, ns, metadata); });
}

// engine/mod.rs InvokeFunction: the FORBIDDEN message names the remedy.
inline std::string ForbiddenCallMessage(const std::string& function_id, const Session& s) {
  bool forbidden = std::find(s.forbidden_functions.begin(), s.forbidden_functions.end(), function_id) !=
                   s.forbidden_functions.end();
  return "function '" + function_id + "' not allowed (" +
         (forbidden ? "remove from rbac.forbidden_functions" : "add to rbac.expose_functions") + ")";
}

// stream/utils.rs headers_to_map: names lowercased (as hyper stores them),
// values that are not visible ASCII dropped, the last of repeated names kept.
template <class Fields>
nlohmann::json HeadersToMap(const Fields& fields) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& f : fields) {
    std::string name(f.name_string().data(), f.name_string().size());
    for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    std::string_view v(f.value().data(), f.value().size());
    bool visible = std::all_of(v.begin(), v.end(), [](char ch) {
      auto u = static_cast<unsigned char>(ch);
      return u == '\t' || (u >= 32 && u < 127);
    });
    if (visible) out[name] = std::string(v);
  }
  return out;
}

// stream/utils.rs query_to_multi_map: the raw query (not percent-decoded),
// `a=1&a=2&b` → {a: ["1", "2"], b: [""]}; pairs without a key skipped.
inline nlohmann::json QueryToMultiMap(std::string_view target) {
  nlohmann::json out = nlohmann::json::object();
  size_t q = target.find('?');
  if (q == std::string_view::npos) return out;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    size_t eq = pair.find('=');
    std::string key(pair.substr(0, eq));
    if (key.empty()) continue;
    std::string value = eq == std::string_view::npos ? "" : std::string(pair.substr(eq + 1));
    out[key].push_back(value);
  }
  return out;
}

// rbac_session.rs authenticate: what the auth function is called with.
template <class Request>
nlohmann::json AuthInput(const Request& upgrade, const std::string& ip_address) {
  return {
      {"headers", HeadersToMap(upgrade)},
      {"query_params", QueryToMultiMap(std::string_view(upgrade.target().data(), upgrade.target().size()))},
      {"ip_address", ip_address}};
}

// rbac_session.rs AuthResult, deserialized from the auth function's result
// into a Session (handle_session), or serde's error text. Unknown fields are
// ignored; absent ones take the AuthResult defaults (function registration
// allowed, trigger type registration not). Fields are checked in key order,
// as serde_json reads its (sorted) map. An array result, which serde would
// read positionally, is refused here.
struct AuthOutcome {
  std::optional<Session> session;
  std::string error;
};
inline AuthOutcome ParseAuthResult(const nlohmann::json& v, std::shared_ptr<const RbacConfig> rbac) {
  using json = nlohmann::json;
  if (!v.is_object()) return {std::nullopt, SerdeInvalidType(v, "struct AuthResult")};
  Session s;
  s.rbac = std::move(rbac);
  s.allow_trigger_type_registration = false;  // #[serde(default)]
  auto strings = [](const json& a, std::vector<std::string>& out) -> std::optional<std::string> {
    if (!a.is_array()) return SerdeInvalidType(a, "a sequence");
    for (const auto& e : a) {
      if (!e.is_string()) return SerdeInvalidType(e, "a string");
      out.push_back(e.get<std::string>());
    }
    return std::nullopt;
  };
  for (auto& [key, value] : v.items()) {
    std::optional<std::string> err;
    if (key == "namespaces") {
      if (!value.is_object()) {
        err = SerdeInvalidType(value, "a map");
      } else {
        for (auto& [ns, grants] : value.items()) {
          if ((err = strings(grants, s.namespaces[ns]))) break;
        }
      }
    } else if (key == "allowed_functions") {
      err = strings(value, s.allowed_functions);
    } else if (key == "forbidden_functions") {
      err = strings(value, s.forbidden_functions);
    } else if (key == "allowed_trigger_types") {
      if (!value.is_null()) err = strings(value, s.allowed_trigger_types.emplace());
    } else if (key == "allow_trigger_type_registration" || key == "allow_function_registration") {
      if (!value.is_boolean()) {
        err = SerdeInvalidType(value, "a boolean");
      } else {
        (key == "allow_function_registration" ? s.allow_function_registration
                                              : s.allow_trigger_type_registration) = value.get<bool>();
      }
    } else if (key == "context") {
      s.context = value;
    } else if (key == "function_registration_prefix") {
      if (value.is_string()) {
        s.function_registration_prefix = value.get<std::string>();
      } else if (!value.is_null()) {
        err = SerdeInvalidType(value, "a string");
      }
    }
    if (err) return {std::nullopt, *err};
  }
  return {std::move(s), ""};
}

}  // namespace skiff::e2e::engine_double
