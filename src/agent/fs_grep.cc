// fs.grep (docs/api.md#filesystem-rules-sandboxfs): RE2 search of one file or a tree walked by fs_walk.h.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>

#include "agent/fs_ops.h"
#include "agent/fs_pattern.h"
#include "agent/fs_request.h"
#include "agent/fs_walk.h"
#include "agent/text_util.h"
#include "base/text.h"

namespace skiff::agent {
namespace {

using nlohmann::json;

// grep skips lines longer than this (they are consumed, not buffered).
constexpr size_t kGrepMaxLine = 4u << 20;
// grep stops (truncated:true) once its answer would exceed this many bytes,
// whatever max_matches says: the agent's memory stays bounded.
constexpr size_t kGrepMaxAnswer = 64u << 20;
// grep stops (truncated:true) once it has read this many bytes, or run this
// long, in one call, so one call cannot keep the agent busy for long
// whatever the tree holds (a planted sparse file of a petabyte, say, or a
// million small files).
constexpr uint64_t kGrepMaxScan = 1ull << 30;
constexpr auto kGrepMaxTime = std::chrono::seconds(10);

// What one grep call may still read, and until when.
struct ScanBudget {
  uint64_t bytes = kGrepMaxScan;
  std::chrono::steady_clock::time_point until = std::chrono::steady_clock::now() + kGrepMaxTime;
  bool exhausted = false;

  // Takes `n` bytes; false (and exhausted) once either bound is reached.
  bool Take(uint64_t n) {
    bytes -= std::min(bytes, n);
    if (bytes == 0 || std::chrono::steady_clock::now() >= until) exhausted = true;
    return !exhausted;
  }
};

// Streams a file's lines; skips binary files (NUL in the first 8192 bytes).
// on_line(content, line_no, offset) returns false to stop. Lines longer than
// kGrepMaxLine are consumed without being buffered and are not reported.
// Each read is taken from `budget`; once it is exhausted the scan stops
// (false).
template <typename F>
bool ScanLines(int fd, ScanBudget& budget, F&& on_line) {
  std::string buf;
  buf.reserve(65536);
  char chunk[65536];
  bool checked_binary = false;
  bool eof = false;
  uint64_t line_no = 0, base = 0;  // base = file offset of buf[0]
  bool skipping = false;           // inside an over-long line
  while (!eof) {
    if (budget.exhausted) return false;
    size_t want = static_cast<size_t>(std::min<uint64_t>(sizeof chunk, budget.bytes));
    ssize_t n = ::read(fd, chunk, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return true;  // unreadable mid-way: stop this file silently
    if (n == 0) eof = true;
    budget.Take(static_cast<uint64_t>(n));
    buf.append(chunk, static_cast<size_t>(n));
    if (!checked_binary) {
      if (buf.size() < 8192 && !eof) continue;
      if (std::string_view(buf).substr(0, 8192).find('\0') != std::string_view::npos) return true;
      checked_binary = true;
    }
    size_t start = 0;
    for (;;) {
      size_t nl = buf.find('\n', start);
      if (nl == std::string::npos) {
        if (eof && start < buf.size())
          nl = buf.size();
        else
          break;
      }
      ++line_no;
      if (!skipping) {
        std::string_view line(buf.data() + start, nl - start);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (!on_line(line, line_no, base + start)) return false;
      }
      skipping = false;
      start = nl + 1;
      if (start > buf.size()) start = buf.size();
    }
    buf.erase(0, start);
    base += start;
    if (buf.size() > kGrepMaxLine) {  // drop an over-long line's head
      base += buf.size();
      buf.clear();
      skipping = true;
    }
  }
  return true;
}

}  // namespace

Result<json> FsGrep(const json& req) {
  SKIFF_ASSIGN_OR_RETURN(proto::FsGrepRequest r, proto::FsGrepRequest::FromJson(req));
  const std::string& path = r.path;
  const auto& include = r.include_glob;
  const auto& exclude = r.exclude_glob;
  const int64_t max_matches = r.max_matches;
  const int64_t max_line = r.max_line_bytes;
  auto re = CompilePattern(r.pattern, r.ignore_case, false);
  if (!re->ok()) return Error(Code::kS217, "invalid regex pattern: " + re->error());

  proto::FsGrepResult out;
  std::vector<proto::FsGrepMatch>& matches = out.matches;
  size_t answer_bytes = 0;
  ScanBudget budget;
  auto scan = [&](int fd, const std::string& shown) {
    return ScanLines(fd, budget, [&](std::string_view line, uint64_t no, uint64_t off) {
      if (!IsValidUtf8(line)) return true;
      re2::StringPiece m;
      if (!re->Match(line, 0, line.size(), RE2::UNANCHORED, &m, 1)) return true;
      if ((max_matches > 0 && static_cast<int64_t>(matches.size()) >= max_matches) ||
          answer_bytes > kGrepMaxAnswer) {
        out.truncated = true;
        return false;
      }
      std::string content = CutUtf8(line, static_cast<size_t>(max_line));
      answer_bytes += content.size() + shown.size() + 64;
      matches.push_back(
          proto::FsGrepMatch{shown, static_cast<int64_t>(no), std::move(content),
                             static_cast<int64_t>(off + static_cast<uint64_t>(m.data() - line.data()))});
      return true;
    });
  };
  SKIFF_ASSIGN_OR_RETURN(WalkRoot root, OpenWalkRoot(path, r.recursive));
  if (!root.is_dir) {
    if (!GlobSelected(include, exclude, LeafOf(path))) return out.ToJson();
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (!fd) return FsError(errno, path);
    struct stat st {};
    if (::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode)) scan(fd.get(), path);
  } else {
    WalkFiles(root.dir.get(), "", 0, [&](const std::string& rel, int dirfd, const std::string& name) {
      if (!GlobSelected(include, exclude, rel)) return true;
      if (!budget.Take(0)) return false;  // the time bound, between files
      UniqueFd fd(OpenRegularAt(dirfd, name.c_str(), false));
      if (!fd) return true;
      return scan(fd.get(), JoinPath(path, rel));
    });
  }
  if (budget.exhausted) out.truncated = true;
  return out.ToJson();
}

}  // namespace skiff::agent
