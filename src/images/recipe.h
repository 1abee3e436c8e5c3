// Preset recipes: small declarative YAML files in images/recipes/, compiled
// into the binary. A recipe's version is the SHA-256 of its bytes.
#pragma once

#include <string>
#include <vector>

#include "base/error.h"

namespace skiff::images {

struct Recipe {
  std::string name;
  std::string suite;    // Debian suite, e.g. "bookworm"
  std::string variant;  // mmdebstrap variant, e.g. "minbase"
  std::vector<std::string> packages;
  std::vector<std::string> env;  // "K=V"
  std::string workdir;           // absolute; "" = "/"
  std::string user;              // "" = root
  std::string text;              // the recipe file's bytes
  std::string digest;            // sha256 hex of `text`

  // "bookworm-<first 12 hex of digest>".
  std::string Version() const;
  // "skiff.local/preset/<name>:<version>".
  std::string OciRef() const;
};

// Parses and validates a recipe. Every field is checked (names, package
// names, env form, workdir); errors are S001 naming the field.
Result<Recipe> ParseRecipe(const std::string& text);

// The preset names in catalog order: python, node, base.
const std::vector<std::string>& PresetNames();
bool IsPreset(const std::string& name);
// The compiled-in recipe of a preset (S100 for an unknown name).
Result<Recipe> PresetRecipe(const std::string& name);

}  // namespace skiff::images
