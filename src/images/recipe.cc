#include "images/recipe.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>

#include "base/sha256.h"

namespace skiff::images {

// Generated from images/recipes/*.yaml by CMake (recipes_embedded.cc).
const std::map<std::string, std::string>& EmbeddedRecipes();

namespace {

bool ValidName(const std::string& s, size_t max, bool allow_plus_dot) {
  if (s.empty() || s.size() > max) return false;
  if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9'))) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
              (allow_plus_dot && (c == '+' || c == '.'));
    if (!ok) return false;
  }
  return true;
}

Error Bad(const std::string& detail) { return InvalidRequest("recipe: " + detail); }

Result<std::string> Scalar(const YAML::Node& root, const char* key, bool required) {
  YAML::Node n = root[key];
  if (!n) {
    if (required) return Bad(std::string("missing field '") + key + "'");
    return std::string();
  }
  if (!n.IsScalar()) return Bad(std::string("field '") + key + "' must be a string");
  return n.as<std::string>();
}

Result<std::vector<std::string>> List(const YAML::Node& root, const char* key) {
  std::vector<std::string> out;
  YAML::Node n = root[key];
  if (!n || n.IsNull()) return out;
  if (!n.IsSequence()) return Bad(std::string("field '") + key + "' must be a list");
  for (const auto& item : n) {
    if (!item.IsScalar()) return Bad(std::string("field '") + key + "' must hold strings");
    out.push_back(item.as<std::string>());
  }
  return out;
}

}  // namespace

std::string Recipe::Version() const { return suite + "-" + digest.substr(0, 12); }

std::string Recipe::OciRef() const { return "skiff.local/preset/" + name + ":" + Version(); }

Result<Recipe> ParseRecipe(const std::string& text) {
  if (text.size() > size_t{64} * 1024) return Bad("file larger than 64 KiB");
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Bad(std::string("malformed YAML: ") + e.what());
  }
  if (!root.IsMap()) return Bad("not a mapping");
  static const char* kKnown[] = {"name", "suite", "variant", "packages", "env", "workdir", "user"};
  for (const auto& kv : root) {
    std::string key = kv.first.as<std::string>();
    if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown)) {
      return Bad("unknown field '" + key + "'");
    }
  }
  Recipe r;
  r.text = text;
  r.digest = Sha256Hex(text);
  SKIFF_ASSIGN_OR_RETURN(r.name, Scalar(root, "name", true));
  SKIFF_ASSIGN_OR_RETURN(r.suite, Scalar(root, "suite", true));
  SKIFF_ASSIGN_OR_RETURN(r.variant, Scalar(root, "variant", true));
  SKIFF_ASSIGN_OR_RETURN(r.packages, List(root, "packages"));
  SKIFF_ASSIGN_OR_RETURN(r.env, List(root, "env"));
  SKIFF_ASSIGN_OR_RETURN(r.workdir, Scalar(root, "workdir", false));
  SKIFF_ASSIGN_OR_RETURN(r.user, Scalar(root, "user", false));

  if (!ValidName(r.name, 64, false)) return Bad("invalid name '" + r.name + "'");
  if (!ValidName(r.suite, 32, false)) return Bad("invalid suite '" + r.suite + "'");
  static const char* kVariants[] = {"extract", "custom", "essential", "apt",     "required",
                                    "minbase", "buildd", "important", "standard"};
  if (std::find(std::begin(kVariants), std::end(kVariants), r.variant) == std::end(kVariants)) {
    return Bad("invalid variant '" + r.variant + "'");
  }
  for (const auto& p : r.packages) {
    // Debian policy §5.6.1: lowercase letters, digits, '+', '-', '.'; at
    // least two characters, starting with an alphanumeric.
    if (p.size() < 2 || !ValidName(p, 128, true)) return Bad("invalid package name '" + p + "'");
  }
  for (const auto& e : r.env) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) return Bad("env entry '" + e + "' is not K=V");
    if (e.find('\0') != std::string::npos || e.find('\n') != std::string::npos) {
      return Bad("env entry contains a control character");
    }
  }
  if (!r.workdir.empty() && (r.workdir[0] != '/' || r.workdir.find("/../") != std::string::npos ||
                             r.workdir.ends_with("/..") || r.workdir.find('\0') != std::string::npos)) {
    return Bad("workdir must be an absolute path without '..'");
  }
  if (!r.user.empty() && r.user.size() > 64) return Bad("user too long");
  return r;
}

const std::vector<std::string>& PresetNames() {
  static const std::vector<std::string> kNames = {"python", "node", "base"};
  return kNames;
}

bool IsPreset(const std::string& name) {
  const auto& n = PresetNames();
  return std::find(n.begin(), n.end(), name) != n.end();
}

Result<Recipe> PresetRecipe(const std::string& name) {
  const auto& all = EmbeddedRecipes();
  auto it = all.find(name);
  if (!IsPreset(name) || it == all.end()) {
    return Error(Code::kS100, "image '" + name + "' is not a preset");
  }
  SKIFF_ASSIGN_OR_RETURN(Recipe r, ParseRecipe(it->second));
  if (r.name != name) {
    return Platform("sandbox", "preset recipe " + name + " names itself '" + r.name + "'");
  }
  return r;
}

}  // namespace skiff::images
