// fs.sed (docs/api.md#filesystem-rules-sandboxfs): RE2 replacement in listed files or a tree walked by
// fs_walk.h; each edited file is rewritten through an AtomicWrite.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "agent/atomic_write.h"
#include "agent/fs_ops.h"
#include "agent/fs_pattern.h"
#include "agent/fs_request.h"
#include "agent/fs_walk.h"
#include "agent/text_util.h"
#include "base/text.h"

namespace skiff::agent {
namespace {

using nlohmann::json;

// sed reads each file whole; larger files get a per-file error.
constexpr size_t kSedMaxFile = 64u << 20;

Status ReadAll(int fd, std::string& out, size_t cap) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error(Code::kS216, std::string("read: ") + std::string(ErrnoName(errno)));
    if (n == 0) return OkStatus();
    if (out.size() + static_cast<size_t>(n) > cap)
      return Error(Code::kS216, "file larger than " + std::to_string(cap) + " bytes");
    out.append(buf, static_cast<size_t>(n));
  }
}

// Replaces in one line. Returns the number of replacements; `budget` < 0 is
// unlimited, else the most replacements allowed.
int64_t ReplaceLine(const RE2& re, std::string_view line, std::string_view repl, bool literal, int64_t budget,
                    std::string& out) {
  int ngroups = re.NumberOfCapturingGroups() + 1;
  std::vector<re2::StringPiece> sp(static_cast<size_t>(ngroups));
  const auto& names = re.NamedCapturingGroups();
  auto named = [&](std::string_view n) -> std::optional<int> {
    auto it = names.find(std::string(n));
    if (it == names.end()) return std::nullopt;
    return it->second;
  };
  int64_t count = 0;
  size_t pos = 0, copied = 0;
  size_t last_end = std::string_view::npos;
  while (pos <= line.size() && (budget < 0 || count < budget)) {
    if (!re.Match(line, pos, line.size(), RE2::UNANCHORED, sp.data(), ngroups)) break;
    size_t start = static_cast<size_t>(sp[0].data() - line.data());
    size_t end = start + sp[0].size();
    if (start == end && start == last_end) {
      // An empty match right after the previous match is not a new match.
      if (start >= line.size()) break;
      pos = start + Utf8CharLen(line, start);
      continue;
    }
    out.append(line.substr(copied, start - copied));
    if (literal) {
      out.append(repl);
    } else {
      std::vector<std::string_view> groups;
      groups.reserve(sp.size());
      for (const auto& g : sp)
        groups.emplace_back(g.data() == nullptr ? std::string_view() : std::string_view(g.data(), g.size()));
      ExpandReplacement(repl, groups, named, out);
    }
    ++count;
    copied = end;
    last_end = end;
    if (start == end) {
      if (end >= line.size()) break;
      size_t n = Utf8CharLen(line, end);
      out.append(line.substr(end, n));
      copied = end + n;
      pos = end + n;
    } else {
      pos = end;
    }
  }
  out.append(line.substr(copied));
  return count;
}

// Edits one file; the per-file result.
proto::FsSedFileResult SedFile(const std::string& shown, const std::string& open_path, const RE2& re,
                               std::string_view repl, bool literal, bool first_only, int64_t& total) {
  auto fail = [&](const Error& e) { return proto::FsSedFileResult{shown, 0, false, e.message()}; };
  UniqueFd fd(::open(open_path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return fail(FsError(errno, shown));
  struct stat st {};
  if (::fstat(fd.get(), &st) < 0) return fail(FsError(errno, shown));
  if (S_ISDIR(st.st_mode)) return fail(FsError(EISDIR, shown));
  if (!S_ISREG(st.st_mode))
    return fail(Error(Code::kS212, "not a directory or wrong type: not a regular file: " + shown));
  std::string text;
  if (auto s = ReadAll(fd.get(), text, kSedMaxFile); !s.ok())
    return fail(Error(Code::kS216, "fs i/o error: " + shown + ": " + s.error().message()));
  fd.reset();
  if (!IsValidUtf8(text)) return fail(Error(Code::kS216, "fs i/o error: not valid UTF-8: " + shown));
  std::string out;
  out.reserve(text.size());
  int64_t count = 0;
  for (const Line& l : SplitLines(text)) {
    int64_t budget = first_only ? 1 - count : -1;
    if (budget == 0) {
      out.append(l.content);
    } else {
      count += ReplaceLine(re, l.content, repl, literal, budget, out);
    }
    out.append(l.terminator);
  }
  if (count == 0) return proto::FsSedFileResult{shown, 0, true, std::nullopt};
  // A link is resolved: its target is rewritten, the link stays.
  std::string target = open_path;
  if (char* real = ::realpath(open_path.c_str(), nullptr)) {
    target = real;
    std::free(real);
  }
  auto w = AtomicWrite::BeginReplace(target);
  if (!w.ok()) return fail(w.error());
  if (auto s = w->Append(out); !s.ok()) return fail(s.error());
  if (auto s = w->Commit(); !s.ok()) return fail(s.error());
  total += count;
  return proto::FsSedFileResult{shown, count, true, std::nullopt};
}

}  // namespace

Result<json> FsSed(const json& req) {
  SKIFF_ASSIGN_OR_RETURN(proto::FsSedRequest r, proto::FsSedRequest::FromJson(req));
  const std::string& repl = r.replacement;
  const bool regex = r.regex;
  const bool first_only = r.first_only;
  const auto& include = r.include_glob;
  const auto& exclude = r.exclude_glob;
  auto re = CompilePattern(r.pattern, r.ignore_case, !regex);
  if (!re->ok()) return Error(Code::kS217, "invalid regex pattern: " + re->error());

  proto::FsSedResult out;
  std::vector<proto::FsSedFileResult>& results = out.results;
  int64_t total = 0;
  if (!r.path) {
    for (const auto& f : r.files) {
      if (f.empty() || f.find('\0') != std::string::npos) {
        results.push_back(proto::FsSedFileResult{
            f, 0, false, std::string("invalid request: files: empty path or NUL byte")});
        continue;
      }
      results.push_back(SedFile(f, f, *re, repl, !regex, first_only, total));
    }
  } else {
    const std::string& path = *r.path;
    SKIFF_ASSIGN_OR_RETURN(WalkRoot root, OpenWalkRoot(path, r.recursive));
    if (!root.is_dir) {
      if (GlobSelected(include, exclude, LeafOf(path)))
        results.push_back(SedFile(path, path, *re, repl, !regex, first_only, total));
    } else {
      // Collect first, then edit: rewriting creates temp files in the tree.
      std::vector<std::string> rels;
      WalkFiles(root.dir.get(), "", 0, [&](const std::string& rel, int, const std::string&) {
        if (GlobSelected(include, exclude, rel)) rels.push_back(rel);
        return true;
      });
      for (const auto& rel : rels) {
        std::string shown = JoinPath(path, rel);
        results.push_back(SedFile(shown, shown, *re, repl, !regex, first_only, total));
      }
    }
  }
  out.total_replacements = total;
  return out.ToJson();
}

}  // namespace skiff::agent
