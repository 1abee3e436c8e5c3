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
constexpr size_t kMaxListBytes = size_t{64} * 1024;

}  // namespace

Status WriteMetadata(int fd, const proto::FileMetadata& m, const std::string& path) {
  SKIFF_RETURN_IF_ERROR(proto::CheckMetadata(m));
  // user.e2b.<key>; where the filesystem keeps no user attributes (tmpfs
  // before Linux 6.6: a microVM guest's), trusted.e2b.<key> for all of them.
  std::string_view prefix = proto::kMetadataXattrPrefix;
  for (const auto& [key, value] : m) {
    std::string name = std::string(prefix) + key;
    if (::fsetxattr(fd, name.c_str(), value.data(), value.size(), 0) == 0) continue;
    int e = errno;
    if (e == ENOTSUP && prefix == proto::kMetadataXattrPrefix) {
      prefix = proto::kMetadataTrustedXattrPrefix;
      name = std::string(prefix) + key;
      if (::fsetxattr(fd, name.c_str(), value.data(), value.size(), 0) == 0) continue;
      e = errno;
      // Trusted attributes need the agent's CAP_SYS_ADMIN: a jail's agent
      // (in a user namespace) is refused them. Either way, neither kind is
      // kept here.
      if (e == EPERM) e = ENOTSUP;
    }
    // S216 like any fs error, saying what was refused: a filesystem without
    // the attributes (ENOTSUP) must not look like a full disk or a bug.
    if (e == ENOTSUP)
      return Error(Code::kS216, "fs i/o error: " + path +
                                    ": file metadata not supported: this filesystem stores neither user "
                                    "nor trusted extended attributes (ENOTSUP)");
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
  const std::string_view all(names.data(), static_cast<size_t>(n));
  size_t total = 0;
  // user.e2b.* first: a key under both prefixes shows its user value.
  for (std::string_view prefix : {proto::kMetadataXattrPrefix, proto::kMetadataTrustedXattrPrefix}) {
    std::string_view list = all;
    while (!list.empty() && out.size() < L::kMaxEntries) {
      size_t end = list.find('\0');
      std::string_view name = list.substr(0, end);
      list.remove_prefix(end == std::string_view::npos ? list.size() : end + 1);
      if (!name.starts_with(prefix)) continue;
      std::string_view key = name.substr(prefix.size());
      if (!proto::IsMetadataKey(key) || out.contains(std::string(key))) continue;
      char value[L::kMaxValueBytes + 1];
      ssize_t v = ::lgetxattr(path.c_str(), std::string(name).c_str(), value, sizeof value);
      if (v < 0) continue;  // gone, or longer than a value may be (ERANGE)
      std::string_view val(value, static_cast<size_t>(v));
      if (!proto::IsMetadataValue(val) || total + key.size() + val.size() > L::kMaxTotalBytes) continue;
      total += key.size() + val.size();
      out.emplace(std::string(key), std::string(val));
    }
  }
  return out;
}

}  // namespace skiff::agent
