#include "agent/file_xattrs.h"

#include <sys/xattr.h>

#include <cerrno>
#include <string_view>
#include <vector>

#include "agent/fs_request.h"

namespace skiff::agent {

namespace {

using L = proto::FileMetadataLimits;

// Longest attribute list read: enough for every attribute a file may carry
// on the filesystems in a sandbox (XATTR_LIST_MAX is 64 KiB).
constexpr size_t kMaxListBytes = 64 * 1024;

}  // namespace

Status WriteMetadata(int fd, const proto::FileMetadata& m, const std::string& path) {
  SKIFF_RETURN_IF_ERROR(proto::CheckMetadata(m));
  for (const auto& [key, value] : m) {
    std::string name = std::string(proto::kMetadataXattrPrefix) + key;
    if (::fsetxattr(fd, name.c_str(), value.data(), value.size(), 0) == 0) continue;
    int e = errno;
    // S216 like any fs error, saying what was refused: a filesystem without
    // user attributes (ENOTSUP) must not look like a full disk or a bug.
    if (e == ENOTSUP)
      return Error(Code::kS216, "fs i/o error: " + path +
                                    ": file metadata not supported: this filesystem does not store user "
                                    "extended attributes (ENOTSUP)");
    return FsError(e, "setting file metadata on " + path);
  }
  return OkStatus();
}

proto::FileMetadata ReadMetadata(const std::string& path) {
  proto::FileMetadata out;
  std::vector<char> names(4096);
  ssize_t n = -1;
  for (;;) {
    n = ::llistxattr(path.c_str(), names.data(), names.size());
    if (n >= 0) break;
    if (errno != ERANGE || names.size() >= kMaxListBytes) return out;
    names.resize(names.size() * 4 > kMaxListBytes ? kMaxListBytes : names.size() * 4);
  }
  size_t total = 0;
  std::string_view list(names.data(), static_cast<size_t>(n));
  while (!list.empty() && out.size() < L::kMaxEntries) {
    size_t end = list.find('\0');
    std::string_view name = list.substr(0, end);
    list.remove_prefix(end == std::string_view::npos ? list.size() : end + 1);
    if (!name.starts_with(proto::kMetadataXattrPrefix)) continue;
    std::string_view key = name.substr(proto::kMetadataXattrPrefix.size());
    if (!proto::IsMetadataKey(key)) continue;
    char value[L::kMaxValueBytes + 1];
    ssize_t v = ::lgetxattr(path.c_str(), std::string(name).c_str(), value, sizeof value);
    if (v < 0) continue;  // gone, or longer than a value may be (ERANGE)
    std::string_view val(value, static_cast<size_t>(v));
    if (!proto::IsMetadataValue(val) || total + key.size() + val.size() > L::kMaxTotalBytes) continue;
    total += key.size() + val.size();
    out.emplace(std::string(key), std::string(val));
  }
  return out;
}

}  // namespace skiff::agent
