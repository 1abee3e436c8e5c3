#include "images/recipe.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>

#include "base/sha256.h"

namespace skiff::images {

// Generated from images/recipes/*.yaml by CMake (recipes_embedded.cc).
const std::map<std::string, std::string>& EmbeddedRecipes();
// Generated from images/files/* by CMake (recipes_embedded.cc).
const std::map<std::string, std::string>& EmbeddedImageFiles();

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

bool SafePath(const std::string& p) {
  return !p.empty() && p[0] == '/' && p.find("/../") == std::string::npos && !p.ends_with("/..") &&
         p.find("/./") == std::string::npos && p.find("//") == std::string::npos &&
         p.find('\0') == std::string::npos && p.find('\n') == std::string::npos;
}

bool IsHex64(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

Result<std::vector<std::string>> Argv(const YAML::Node& n, const std::string& what, bool required) {
  std::vector<std::string> out;
  if (!n || n.IsNull()) {
    if (required) return Bad(what + ": required");
    return out;
  }
  if (!n.IsSequence()) return Bad(what + ": expected a list of strings");
  for (const auto& item : n) {
    if (!item.IsScalar()) return Bad(what + ": expected a list of strings");
    std::string a = item.as<std::string>();
    if (a.find('\0') != std::string::npos) return Bad(what + ": contains a NUL byte");
    out.push_back(std::move(a));
  }
  if (required && (out.empty() || out[0].empty())) return Bad(what + ": needs a program");
  if (out.size() > 64) return Bad(what + ": more than 64 arguments");
  return out;
}

Status CheckKeys(const YAML::Node& n, std::initializer_list<const char*> known, const std::string& what) {
  for (const auto& kv : n) {
    std::string key = kv.first.as<std::string>();
    if (std::find_if(known.begin(), known.end(), [&](const char* k) { return key == k; }) == known.end())
      return Bad(what + ": unknown field '" + key + "'");
  }
  return OkStatus();
}

Result<std::vector<RecipeFile>> Files(const YAML::Node& root) {
  std::vector<RecipeFile> out;
  YAML::Node n = root["files"];
  if (!n || n.IsNull()) return out;
  if (!n.IsSequence()) return Bad("field 'files' must be a list");
  for (const auto& item : n) {
    if (!item.IsMap()) return Bad("files: each entry must be a mapping {path, source, sha256, mode}");
    SKIFF_RETURN_IF_ERROR(CheckKeys(item, {"path", "source", "sha256", "mode"}, "files"));
    RecipeFile f;
    SKIFF_ASSIGN_OR_RETURN(f.path, Scalar(item, "path", true));
    SKIFF_ASSIGN_OR_RETURN(f.source, Scalar(item, "source", true));
    SKIFF_ASSIGN_OR_RETURN(f.sha256, Scalar(item, "sha256", true));
    SKIFF_ASSIGN_OR_RETURN(std::string mode, Scalar(item, "mode", false));
    if (!SafePath(f.path) || f.path == "/" || f.path.ends_with("/"))
      return Bad("files: path '" + f.path + "' must be an absolute file path without '..'");
    bool source_ok = !f.source.empty() && f.source.size() <= 128 && f.source[0] != '.' &&
                     std::all_of(f.source.begin(), f.source.end(), [](char c) {
                       return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                              c == '-' || c == '_' || c == '.';
                     });
    if (!source_ok) return Bad("files: source '" + f.source + "' must be a file name in images/files/");
    if (!IsHex64(f.sha256)) return Bad("files: sha256 of '" + f.source + "' must be 64 lowercase hex digits");
    if (!mode.empty()) {
      if (mode != "0644" && mode != "0755" && mode != "0600" && mode != "0700")
        return Bad("files: mode '" + mode + "' must be one of 0644, 0755, 0600, 0700");
      f.mode = static_cast<uint32_t>(std::stoul(mode, nullptr, 8));
    }
    for (const auto& other : out)
      if (other.path == f.path) return Bad("files: path '" + f.path + "' listed twice");
    out.push_back(std::move(f));
  }
  return out;
}

Result<std::vector<ImageService>> Services(const YAML::Node& root) {
  std::vector<ImageService> out;
  YAML::Node n = root["services"];
  if (!n || n.IsNull()) return out;
  if (!n.IsSequence()) return Bad("field 'services' must be a list");
  for (const auto& item : n) {
    if (!item.IsMap())
      return Bad("services: each entry must be a mapping {name, command, ready, ready_timeout}");
    SKIFF_RETURN_IF_ERROR(CheckKeys(item, {"name", "command", "ready", "ready_timeout"}, "services"));
    ImageService s;
    SKIFF_ASSIGN_OR_RETURN(s.name, Scalar(item, "name", true));
    if (!ValidName(s.name, 64, false)) return Bad("services: invalid name '" + s.name + "'");
    SKIFF_ASSIGN_OR_RETURN(s.command, Argv(item["command"], "services." + s.name + ".command", true));
    SKIFF_ASSIGN_OR_RETURN(s.ready, Argv(item["ready"], "services." + s.name + ".ready", false));
    SKIFF_ASSIGN_OR_RETURN(std::string t, Scalar(item, "ready_timeout", false));
    if (!t.empty()) {
      if (t.size() > 3 || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
          std::stoul(t) < 1 || std::stoul(t) > 600)
        return Bad("services." + s.name + ".ready_timeout: seconds, 1 to 600");
      s.ready_timeout_secs = static_cast<uint32_t>(std::stoul(t));
    }
    for (const auto& other : out)
      if (other.name == s.name) return Bad("services: name '" + s.name + "' listed twice");
    out.push_back(std::move(s));
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
  static const char* kKnown[] = {"name",    "suite", "variant", "packages", "env",
                                 "workdir", "user",  "files",   "services"};
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
  SKIFF_ASSIGN_OR_RETURN(r.files, Files(root));
  SKIFF_ASSIGN_OR_RETURN(r.services, Services(root));

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
  static const std::vector<std::string> kNames = {"python", "node", "base", "code-interpreter"};
  return kNames;
}

bool IsPreset(const std::string& name) {
  const auto& n = PresetNames();
  return std::find(n.begin(), n.end(), name) != n.end();
}

Result<std::string> RecipeFileBytes(const RecipeFile& file) {
  const auto& all = EmbeddedImageFiles();
  auto it = all.find(file.source);
  if (it == all.end())
    return Platform("sandbox", "recipe file images/files/" + file.source + " is not compiled in");
  std::string got = Sha256Hex(it->second);
  if (got != file.sha256) {
    return Platform("sandbox", "images/files/" + file.source + " has sha256 " + got +
                                   " but the recipe pins " + file.sha256 + " (update the recipe's sha256)");
  }
  return it->second;
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
