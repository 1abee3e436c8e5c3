// The ./skiff wrapper's fast path: compare the build's input manifest.
#include "cli/checkout_inputs.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "base/unique_fd.h"

namespace skiff::cli {
namespace {

// The manifest is about a thousand lines (~100 KB); one far larger is not
// one the bootstrap wrote.
constexpr size_t kMaxManifest = size_t{16} << 20;

// " size mtime inode ctime", as stat's ' %s %.9Y %i %.9Z' prints them.
std::string_view Fields(const struct stat& st, char (&buf)[160]) {
  int n = std::snprintf(buf, sizeof buf, " %jd %jd.%09ld %ju %jd.%09ld", static_cast<intmax_t>(st.st_size),
                        static_cast<intmax_t>(st.st_mtim.tv_sec), st.st_mtim.tv_nsec,
                        static_cast<uintmax_t>(st.st_ino), static_cast<intmax_t>(st.st_ctim.tv_sec),
                        st.st_ctim.tv_nsec);
  return {buf, n > 0 ? static_cast<size_t>(n) : 0};
}

// A file mapped whole and read-only, its pages faulted in by one call:
// cheaper on every ./skiff call than reading it into the heap.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        static_cast<size_t>(st.st_size) > kMaxManifest) {
      return;
    }
    size_ = static_cast<size_t>(st.st_size);
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd.get(), 0);
    if (p == MAP_FAILED) {
      size_ = 0;
      return;
    }
    data_ = static_cast<const char*>(p);
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view text() const { return {data_ != nullptr ? data_ : "", size_}; }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
};

// The next line of `rest` (without its '\n'), consuming it.
std::string_view NextLine(std::string_view& rest) {
  size_t nl = rest.find('\n');
  std::string_view line = rest.substr(0, nl);
  rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  return line;
}

}  // namespace

std::optional<std::string> InputsManifest(const std::vector<std::string>& paths) {
  std::string out;
  char buf[160];
  for (const auto& p : paths) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) return std::nullopt;
    if (!out.empty()) out += '\n';
    out += p;
    out += Fields(st, buf);
  }
  return out;
}

bool InputsCurrent(const std::string& build_dir) {
  MappedFile list(build_dir + "/.inputs.list");
  MappedFile last(build_dir + "/.inputs");
  std::string_view paths = list.text();
  std::string_view manifest = last.text();
  if (paths.empty() || manifest.empty()) return false;
  // Line by line, no copy of either file: path i of the list against line
  // i of the manifest, which must be that path and its fields now.
  char path[PATH_MAX];
  char buf[160];
  size_t lines = 0;
  while (!paths.empty()) {
    std::string_view p = NextLine(paths);
    if (p.empty()) continue;
    if (p.size() >= sizeof path || manifest.empty()) return false;
    std::string_view want = NextLine(manifest);
    p.copy(path, p.size());
    path[p.size()] = '\0';
    struct stat st {};
    if (::lstat(path, &st) != 0) return false;
    std::string_view fields = Fields(st, buf);
    if (want.size() != p.size() + fields.size() || want.substr(0, p.size()) != p ||
        want.substr(p.size()) != fields) {
      return false;
    }
    ++lines;
  }
  return lines > 0 && manifest.empty();
}

void ReturnToWrapperIfStale(char** argv) {
  const char* build_dir = std::getenv("SKIFF_WRAPPER_BUILD_DIR");
  const char* wrapper = std::getenv("SKIFF_WRAPPER");
  std::string dir = build_dir ? build_dir : "";
  std::string self = wrapper ? wrapper : "";
  ::unsetenv("SKIFF_WRAPPER_BUILD_DIR");
  ::unsetenv("SKIFF_WRAPPER");
  ::unsetenv("SKIFF_WRAPPER_STALE");
  if (dir.empty() || self.empty() || InputsCurrent(dir)) return;
  ::setenv("SKIFF_WRAPPER_STALE", "1", 1);
  argv[0] = self.data();
  ::execv(self.c_str(), argv);
  std::fprintf(stderr, "skiff: the build in %s is out of date, and %s could not be run to rebuild it: %s\n",
               dir.c_str(), self.c_str(), std::strerror(errno));
  std::exit(125);
}

}  // namespace skiff::cli
