#include "agent/fs_parents.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "agent/fs_request.h"
#include "agent/text_util.h"
#include "base/unique_fd.h"

namespace skiff::agent {

using nlohmann::json;

Result<bool> MkdirAll(const std::string& path, uint32_t leaf_mode) {
  std::string cur;
  size_t i = 0;
  if (!path.empty() && path[0] == '/') {
    cur = "/";
    i = 1;
  }
  bool created_leaf = false;
  while (i <= path.size()) {
    size_t slash = path.find('/', i);
    if (slash == std::string::npos) slash = path.size();
    std::string comp = path.substr(i, slash - i);
    i = slash + 1;
    if (comp.empty()) continue;
    if (!cur.empty() && cur.back() != '/') cur.push_back('/');
    cur += comp;
    bool leaf = path.find_first_not_of('/', slash) == std::string::npos;
    struct stat st {};
    if (::stat(cur.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) return FsError(ENOTDIR, cur);
      created_leaf = false;
      continue;
    }
    if (errno != ENOENT) return FsError(errno, cur);
    uint32_t m = leaf ? leaf_mode : 0755;
    if (::mkdir(cur.c_str(), m) < 0) {
      if (errno == EEXIST) continue;
      return FsError(errno, cur);
    }
    created_leaf = leaf;
    UniqueFd d(::open(cur.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (d && ::fchmod(d.get(), m) < 0) return FsError(errno, cur);
  }
  return created_leaf;
}

Error MissingParent(const std::string& parent) {
  Error e(Code::kS211, "parent directory not found: " + parent);
  e.set_fix(json{{"parents", true}});
  return e;
}

// Checks the parent of `path` for mkdir/write with parents:false.
Status CheckParent(const std::string& path) {
  std::string parent = ParentOf(path);
  struct stat st {};
  if (::stat(parent.c_str(), &st) < 0) {
    if (errno == ENOENT) return MissingParent(parent);
    return FsError(errno, parent);
  }
  if (!S_ISDIR(st.st_mode)) return FsError(ENOTDIR, parent);
  return OkStatus();
}

}  // namespace skiff::agent
