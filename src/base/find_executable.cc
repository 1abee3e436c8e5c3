#include "base/find_executable.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

namespace skiff {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::optional<std::string> FindExecutable(std::string_view name,
                                          std::optional<std::string_view> search_path) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string_view::npos) {
    std::string p(name);
    return IsExecutableFile(p) ? std::optional(p) : std::nullopt;
  }
  std::string_view dirs;
  if (search_path) {
    dirs = *search_path;
  } else {
    const char* env = std::getenv("PATH");
    dirs = env && *env ? std::string_view(env) : kDefaultSearchPath;
  }
  while (!dirs.empty()) {
    size_t colon = dirs.find(':');
    std::string_view dir = dirs.substr(0, colon);
    dirs = colon == std::string_view::npos ? std::string_view() : dirs.substr(colon + 1);
    if (dir.empty()) continue;
    std::string cand = std::string(dir) + "/" + std::string(name);
    if (IsExecutableFile(cand)) return cand;
  }
  return std::nullopt;
}

}  // namespace skiff
