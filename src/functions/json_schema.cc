#include "functions/json_schema.h"

namespace skiff {
namespace {

using nlohmann::json;

bool TypeMatches(std::string_view type, const json& v) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "string") return v.is_string();
  if (type == "array") return v.is_array();
  if (type == "object") return v.is_object();
  return false;
}

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  void Check(const json& s, const json& v, const std::string& at, std::vector<std::string>& out,
             int depth = 0) {
    if (depth > 64) {
      out.push_back(at + ": schema nesting too deep");
      return;
    }
    if (s.is_boolean()) {
      if (!s.get<bool>()) out.push_back(at + ": schema false");
      return;
    }
    if (!s.is_object()) return;
    if (auto it = s.find("$ref"); it != s.end()) {
      std::string ref = it->get<std::string>();
      constexpr std::string_view kPrefix = "#/definitions/";
      if (ref.rfind(kPrefix, 0) != 0 || !root_.contains("definitions") ||
          !root_["definitions"].contains(ref.substr(kPrefix.size()))) {
        out.push_back(at + ": unresolvable $ref " + ref);
        return;
      }
      // draft-07: siblings of $ref are ignored.
      Check(root_["definitions"][ref.substr(kPrefix.size())], v, at, out, depth + 1);
      return;
    }
    if (auto it = s.find("type"); it != s.end()) {
      bool ok = false;
      if (it->is_string()) {
        ok = TypeMatches(it->get<std::string>(), v);
      } else if (it->is_array()) {
        for (const auto& t : *it) ok = ok || (t.is_string() && TypeMatches(t.get<std::string>(), v));
      }
      if (!ok) {
        out.push_back(at + ": expected type " + it->dump() + ", got " + std::string(v.type_name()));
        return;
      }
    }
    if (auto it = s.find("enum"); it != s.end()) {
      bool found = false;
      for (const auto& e : *it) found = found || e == v;
      if (!found) out.push_back(at + ": value " + v.dump() + " not in enum " + it->dump());
    }
    if (auto it = s.find("const"); it != s.end() && *it != v) {
      out.push_back(at + ": expected const " + it->dump());
    }
    if (v.is_number()) {
      double d = v.get<double>();
      if (auto it = s.find("minimum"); it != s.end() && d < it->get<double>()) {
        out.push_back(at + ": " + v.dump() + " below minimum " + it->dump());
      }
      if (auto it = s.find("maximum"); it != s.end() && d > it->get<double>()) {
        out.push_back(at + ": " + v.dump() + " above maximum " + it->dump());
      }
    }
    if (v.is_string()) {
      if (auto it = s.find("minLength"); it != s.end() && v.get<std::string>().size() < it->get<size_t>()) {
        out.push_back(at + ": string shorter than " + it->dump());
      }
    }
    if (v.is_object()) {
      if (auto it = s.find("required"); it != s.end()) {
        for (const auto& r : *it) {
          if (!v.contains(r.get<std::string>())) {
            out.push_back(at + ": missing required property " + r.dump());
          }
        }
      }
      const json* props = nullptr;
      if (auto it = s.find("properties"); it != s.end()) props = &*it;
      for (auto it = v.begin(); it != v.end(); ++it) {
        std::string child = at + "/" + it.key();
        if (props != nullptr && props->contains(it.key())) {
          Check((*props)[it.key()], *it, child, out, depth + 1);
        } else if (auto ap = s.find("additionalProperties"); ap != s.end()) {
          Check(*ap, *it, child, out, depth + 1);
        }
      }
    }
    if (v.is_array()) {
      if (auto it = s.find("minItems"); it != s.end() && v.size() < it->get<size_t>()) {
        out.push_back(at + ": fewer than " + it->dump() + " items");
      }
      if (auto it = s.find("maxItems"); it != s.end() && v.size() > it->get<size_t>()) {
        out.push_back(at + ": more than " + it->dump() + " items");
      }
      if (auto it = s.find("items"); it != s.end() && it->is_object()) {
        for (size_t i = 0; i < v.size(); ++i) {
          Check(*it, v[i], at + "/" + std::to_string(i), out, depth + 1);
        }
      }
    }
    if (auto it = s.find("allOf"); it != s.end()) {
      for (const auto& sub : *it) Check(sub, v, at, out, depth + 1);
    }
    if (auto it = s.find("anyOf"); it != s.end()) {
      bool any = false;
      for (const auto& sub : *it) {
        std::vector<std::string> tmp;
        Check(sub, v, at, tmp, depth + 1);
        any = any || tmp.empty();
      }
      if (!any) out.push_back(at + ": matches no anyOf alternative");
    }
    if (auto it = s.find("oneOf"); it != s.end()) {
      int n = 0;
      for (const auto& sub : *it) {
        std::vector<std::string> tmp;
        Check(sub, v, at, tmp, depth + 1);
        if (tmp.empty()) ++n;
      }
      if (n != 1) out.push_back(at + ": matches " + std::to_string(n) + " oneOf alternatives");
    }
  }

 private:
  const json& root_;
};

}  // namespace

std::vector<std::string> ValidateJsonSchema(const nlohmann::json& schema, const nlohmann::json& instance) {
  std::vector<std::string> out;
  Validator(schema).Check(schema, instance, "", out);
  return out;
}

}  // namespace skiff
