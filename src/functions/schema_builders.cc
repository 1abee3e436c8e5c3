#include "functions/schema_builders.h"

#include <set>

#include "functions/schemas.h"

namespace skiff::fn {

using nlohmann::json;

namespace {
constexpr std::string_view kDraft07 = "http://json-schema.org/draft-07/schema#";

// Optional request fields accept null ("null means absent", docs/api.md#conventions).
void AllowNullOnOptional(json& schema) {
  std::set<std::string> required = schema["required"].get<std::set<std::string>>();
  for (auto& [name, prop] : schema["properties"].items()) {
    if (required.count(name)) continue;
    if (prop.contains("type")) {
      if (prop["type"].is_string()) prop["type"] = json::array({prop["type"], "null"});
    } else if (prop.contains("$ref")) {
      json ref = {{"$ref", prop["$ref"]}};
      prop.erase("$ref");
      prop["anyOf"] = json::array({ref, {{"type", "null"}}});
    } else if (prop.contains("anyOf")) {
      prop["anyOf"].push_back({{"type", "null"}});
    }
  }
}

void CollectRefs(const json& j, std::set<std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "$ref" && it->is_string()) {
        std::string r = it->get<std::string>();
        constexpr std::string_view kPrefix = "#/definitions/";
        if (r.rfind(kPrefix, 0) == 0) out.insert(r.substr(kPrefix.size()));
      } else {
        CollectRefs(*it, out);
      }
    }
  } else if (j.is_array()) {
    for (const auto& e : j) CollectRefs(e, out);
  }
}

}  // namespace

json Str(std::string d) { return {{"type", "string"}, {"description", std::move(d)}}; }
json Bool(std::string d) { return {{"type", "boolean"}, {"description", std::move(d)}}; }
json BoolD(std::string d, bool def) {
  json j = Bool(std::move(d));
  j["default"] = def;
  return j;
}
json Int(std::string d) { return {{"type", "integer"}, {"description", std::move(d)}}; }
json UInt(std::string d) { return {{"type", "integer"}, {"minimum", 0}, {"description", std::move(d)}}; }
json UIntD(std::string d, uint64_t def) {
  json j = UInt(std::move(d));
  j["default"] = def;
  return j;
}
json StrArr(std::string d) {
  return {{"type", "array"}, {"items", {{"type", "string"}}}, {"description", std::move(d)}};
}
json StrArrD(std::string d) {
  json j = StrArr(std::move(d));
  j["default"] = json::array();
  return j;
}
json Ref(std::string_view def, std::string d) {
  return {{"$ref", "#/definitions/" + std::string(def)}, {"description", std::move(d)}};
}
json ArrOf(std::string_view def, std::string d) {
  return {{"type", "array"},
          {"items", {{"$ref", "#/definitions/" + std::string(def)}}},
          {"description", std::move(d)}};
}
json WithDefault(json j, json def) {
  j["default"] = std::move(def);
  return j;
}

json Object(std::string d, json props, const std::vector<std::string>& required) {
  json j = {{"type", "object"}, {"description", std::move(d)}, {"properties", std::move(props)}};
  j["required"] = required;
  return j;
}

json Root(std::string_view title, json obj, json examples, bool request) {
  json root = {{"$schema", kDraft07}, {"title", std::string(title)}};
  for (auto& [k, v] : obj.items()) root[k] = v;
  if (request) AllowNullOnOptional(root);
  root["examples"] = std::move(examples);
  // The definitions it refers to, and the ones those refer to.
  std::set<std::string> refs;
  CollectRefs(root, refs);
  json defs = json::object();
  while (defs.size() < refs.size()) {
    for (const auto& r : std::set<std::string>(refs)) {
      if (defs.contains(r)) continue;
      defs[r] = AllDefinitions().at(r);
      CollectRefs(defs[r], refs);
    }
  }
  if (!refs.empty()) root["definitions"] = std::move(defs);
  return root;
}

const std::string kUuidEx = "3f0c1a52-6a7e-4c1e-9d2b-0b6f2a9e4d11";

json SandboxIdProp() { return Str("Sandbox id: a UUID (canonical, 32 hex, {braced} or urn:uuid:)"); }

json Path(std::string d) { return Str(std::move(d)); }

json ModeProp(std::string d, std::string_view def) {
  json j = Str(std::move(d));
  j["default"] = std::string(def);
  return j;
}

json EnvProp(std::string d) { return WithDefault(Ref("env", std::move(d)), json::array()); }

}  // namespace skiff::fn
