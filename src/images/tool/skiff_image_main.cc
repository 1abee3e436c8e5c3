// skiff-image: install and manage images in the store without a daemon.
//
//   skiff-image build <preset>...      build presets (cached by recipe hash)
//   skiff-image import <name> <file>   import a docker-save / OCI archive
//   skiff-image ls                     list installed catalog names
//   skiff-image block <name> [erofs|ext4]  print (building once) the block image
//   skiff-image gc                     remove unreferenced entries
//
// The store is $SKIFF_IMAGES_DIR, else <data dir>/images, or --dir DIR.
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "base/text.h"
#include "images/build.h"
#include "images/recipe.h"
#include "images/store.h"

using namespace skiff;
using namespace skiff::images;

namespace {

int Usage() {
  std::cerr << "usage: skiff-image [--dir DIR] build <preset>... | import <name> <file> | ls |"
               " block <name> [erofs|ext4] | gc\n";
  return 2;
}

int Fail(const Error& e) {
  std::cerr << "skiff-image: " << e.ToString() << "\n";
  return 1;
}

std::optional<std::string> DigestOf(const Store& store, const std::string& name) {
  if (IsPreset(name)) {
    auto r = PresetRecipe(name);
    if (r.ok() && store.Read(r->digest)) return r->digest;
    return std::nullopt;
  }
  auto d = store.Current(name);
  if (d && store.Read(*d)) return d;
  return std::nullopt;
}

int Run(std::vector<std::string> args) {
  std::string dir = Store::DefaultRoot();
  if (args.size() >= 2 && args[0] == "--dir") {
    dir = args[1];
    args.erase(args.begin(), args.begin() + 2);
  }
  if (args.empty()) return Usage();
  Store store(dir);
  auto progress = [](const std::string& line) { std::cerr << line << "\n"; };
  const std::string& cmd = args[0];
  if (cmd == "build") {
    if (args.size() < 2) return Usage();
    for (size_t i = 1; i < args.size(); ++i) {
      int64_t t0 = MonotonicMillis();
      auto r = BuildPreset(store, args[i], progress);
      if (!r.ok()) return Fail(r.error());
      std::cout << args[i] << " " << r->source << " " << store.RootfsDir(r->digest) << " "
                << (MonotonicMillis() - t0) << "ms " << TreeBytes(store.RootfsDir(r->digest)) << "B\n";
    }
    return 0;
  }
  if (cmd == "import") {
    if (args.size() != 3) return Usage();
    auto r = ImportArchive(store, args[1], args[2], progress);
    if (!r.ok()) return Fail(r.error());
    std::cout << args[1] << " sha256:" << r->digest << " " << store.RootfsDir(r->digest) << "\n";
    return 0;
  }
  if (cmd == "ls") {
    for (const auto& name : PresetNames()) {
      auto d = DigestOf(store, name);
      std::cout << name << "\t" << (d ? "sha256:" + *d : "-") << "\n";
    }
    for (const auto& name : store.CurrentNames()) {
      if (IsPreset(name)) continue;
      auto d = DigestOf(store, name);
      std::cout << name << "\t" << (d ? "sha256:" + *d : "-") << "\n";
    }
    return 0;
  }
  if (cmd == "block") {
    if (args.size() < 2 || args.size() > 3) return Usage();
    auto d = DigestOf(store, args[1]);
    if (!d) {
      std::cerr << "skiff-image: " << args[1] << " is not installed\n";
      return 1;
    }
    auto r = store.EnsureBlockImage(*d, args.size() == 3 ? args[2] : "erofs");
    if (!r.ok()) return Fail(r.error());
    std::cout << *r << "\n";
    return 0;
  }
  if (cmd == "gc") {
    auto r = store.Gc();
    if (!r.ok()) return Fail(r.error());
    for (const auto& x : r->removed) std::cout << "removed " << x << "\n";
    std::cout << "freed " << r->bytes_freed << " bytes\n";
    return 0;
  }
  return Usage();
}

}  // namespace

// An exception (out of memory, a library's own) would end the tool in
// std::terminate with no word of why: it is reported and the status is 1.
int main(int argc, char** argv) {
  try {
    return Run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::cerr << "skiff-image: uncaught exception: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "skiff-image: uncaught exception of unknown type\n";
  }
  return 1;
}
