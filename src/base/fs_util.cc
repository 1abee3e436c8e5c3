#include "base/fs_util.h"

#include <filesystem>

namespace skiff {

Status RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);  // removes links, never their targets
  if (ec && ec.value() != ENOENT) return Error::Sys(Code::kS300, "remove_all", path, ec.value());
  return OkStatus();
}

}  // namespace skiff
