#include "agent/user_names.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "base/unique_fd.h"

namespace skiff::agent {
namespace {

// A decimal uid/gid ("0".."4294967295"), nullopt for anything else.
std::optional<uint32_t> ParseId(std::string_view s) {
  if (s.empty() || s.size() > 10) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(v);
}

bool NameOk(std::string_view name) {
  if (name.empty() || name.size() > kMaxIdNameBytes) return false;
  for (char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  return true;
}

}  // namespace

std::unordered_map<uint32_t, std::string> ParseIdNames(std::string_view text) {
  std::unordered_map<uint32_t, std::string> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty() || line.front() == '#') continue;
    size_t c1 = line.find(':');
    if (c1 == std::string_view::npos) continue;
    size_t c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    size_t c3 = line.find(':', c2 + 1);
    std::string_view name = line.substr(0, c1);
    std::string_view id =
        line.substr(c2 + 1, c3 == std::string_view::npos ? std::string_view::npos : c3 - c2 - 1);
    auto n = ParseId(id);
    if (!n || !NameOk(name)) continue;
    out.try_emplace(*n, name);  // first wins
  }
  return out;
}

std::string ReadIdFile(const char* path) {
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd) return {};
  struct stat st {};
  if (::fstat(fd.get(), &st) < 0 || !S_ISREG(st.st_mode)) return {};
  std::string out;
  std::vector<char> buf(size_t{64} << 10);
  while (out.size() < kMaxIdFileBytes) {
    size_t want = std::min(buf.size(), kMaxIdFileBytes - out.size());
    ssize_t n = ::read(fd.get(), buf.data(), want);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf.data(), static_cast<size_t>(n));
  }
  return out;
}

std::string UserNames::Lookup(Names& names, const std::string& path, uint32_t id) {
  if (!names) names = ParseIdNames(ReadIdFile(path.c_str()));
  auto it = names->find(id);
  return it != names->end() ? it->second : std::to_string(id);
}

}  // namespace skiff::agent
