#include "e2b/entry_info.h"

#include <cstdint>
#include <cstdlib>

#include "base/text.h"

namespace skiff::e2b {

namespace {

// Go's FileMode.String() of the entry: "-rw-r--r--", "drwxr-xr-x", "Lrwxrwxrwx".
std::string Permissions(const proto::FsEntry& f, uint32_t perm) {
  std::string s(1, f.is_symlink ? 'L' : f.is_dir ? 'd' : '-');
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) s.push_back((perm & (0400u >> i)) ? rwx[i] : '-');
  return s;
}

}  // namespace

std::string JoinPath(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

nlohmann::json EntryInfo(const proto::FsEntry& f, const std::string& path) {
  uint32_t perm = static_cast<uint32_t>(std::strtoul(f.mode.c_str(), nullptr, 8)) & 0777;
  const char* type = f.is_symlink ? "FILE_TYPE_SYMLINK" : f.is_dir ? "FILE_TYPE_DIRECTORY" : "FILE_TYPE_FILE";
  nlohmann::json entry = {{"name", f.name},
                          {"type", type},
                          {"path", path},
                          {"size", std::to_string(f.size)},
                          {"mode", perm},
                          {"permissions", Permissions(f, perm)},
                          {"owner", f.owner},
                          {"group", f.group},
                          {"modifiedTime", Rfc3339Millis(f.mtime * 1000)}};
  if (f.symlink_target) entry["symlinkTarget"] = *f.symlink_target;
  if (!f.metadata.empty()) entry["metadata"] = proto::MetadataToJson(f.metadata);
  return entry;
}

}  // namespace skiff::e2b
