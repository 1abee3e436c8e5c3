// Preset recipes: small declarative YAML files in images/recipes/, compiled
// into the binary. A recipe's version is the SHA-256 of its bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "images/image_service.h"

namespace skiff::images {

// A file the build adds to the rootfs after the packages: the bytes of
// images/files/<source> (compiled in), pinned by their SHA-256 so that the
// recipe's own digest covers them.
struct RecipeFile {
  std::string path;    // absolute, no ".."
  std::string source;  // a file name in images/files/
  std::string sha256;  // lowercase hex of the bytes
  uint32_t mode = 0644;

  bool operator==(const RecipeFile&) const = default;
};

struct Recipe {
  std::string name;
  std::string suite;    // Debian suite, e.g. "bookworm"
  std::string variant;  // mmdebstrap variant, e.g. "minbase"
  std::vector<std::string> packages;
  std::vector<std::string> env;  // "K=V"
  std::string workdir;           // absolute; "" = "/"
  std::string user;              // "" = root
  std::vector<RecipeFile> files;
  std::vector<ImageService> services;
  std::string text;    // the recipe file's bytes
  std::string digest;  // sha256 hex of `text`

  // "bookworm-<first 12 hex of digest>".
  std::string Version() const;
  // "skiff.local/preset/<name>:<version>".
  std::string OciRef() const;
};

// Parses and validates a recipe. Every field is checked (names, package
// names, env form, workdir); errors are S001 naming the field.
Result<Recipe> ParseRecipe(const std::string& text);

// The bytes of a recipe file (compiled in from images/files/), checked
// against its pinned sha256: S300 naming the expected value when the file
// changed without the recipe.
Result<std::string> RecipeFileBytes(const RecipeFile& file);

// The preset names in catalog order: python, node, base, code-interpreter.
const std::vector<std::string>& PresetNames();
bool IsPreset(const std::string& name);
// The compiled-in recipe of a preset (S100 for an unknown name).
Result<Recipe> PresetRecipe(const std::string& name);

}  // namespace skiff::images
