// Owner and group names as the sandbox itself sees them, read from its own
// /etc/passwd and /etc/group. The agent is static, so NSS (getpwuid) is out:
// the files are parsed here, bounded in size, once per UserNames (one per
// request, so a 10,000-entry fs.ls reads each file at most once and no state
// is shared between the fs pool's threads).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace skiff::agent {

// Largest passwd or group file read; longer files are read up to here.
inline constexpr size_t kMaxIdFileBytes = 1 << 20;
// Longest name kept (the protocol's bound on FsEntry owner and group).
inline constexpr size_t kMaxIdNameBytes = 256;

// The id -> name map of a passwd or group file ("name:x:id:..."): the name
// is the first field, the id the third. Lines that are blank, comments,
// short, with an empty or over-long (> 256 bytes) or control-character
// name, or a non-decimal or out-of-range id are skipped; for an id listed
// twice the first line wins.
std::unordered_map<uint32_t, std::string> ParseIdNames(std::string_view text);

// Up to kMaxIdFileBytes of a regular file; empty when it is missing, not a
// regular file (a FIFO would block) or unreadable.
std::string ReadIdFile(const char* path);

class UserNames {
 public:
  UserNames() = default;
  // Other files than /etc/passwd and /etc/group (for tests).
  UserNames(std::string passwd, std::string group)
      : passwd_path_(std::move(passwd)), group_path_(std::move(group)) {}

  // The user's name, or the uid in decimal when the file names none.
  std::string Owner(uint32_t uid) { return Lookup(users_, passwd_path_, uid); }
  // The group's name, or the gid in decimal.
  std::string Group(uint32_t gid) { return Lookup(groups_, group_path_, gid); }

 private:
  using Names = std::optional<std::unordered_map<uint32_t, std::string>>;
  static std::string Lookup(Names& names, const std::string& path, uint32_t id);

  std::string passwd_path_ = "/etc/passwd";
  std::string group_path_ = "/etc/group";
  Names users_;  // read on first use
  Names groups_;
};

}  // namespace skiff::agent
