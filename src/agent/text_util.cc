#include "agent/text_util.h"

#include <cstdio>

namespace skiff::agent {

std::string ModeString(uint32_t mode) {
  char b[8];
  std::snprintf(b, sizeof b, "%04o", mode & 07777u);
  return b;
}

proto::FsEntry FsEntryOf(std::string_view name, const struct stat& st) {
  proto::FsEntry e;
  e.name = std::string(name);
  e.is_dir = S_ISDIR(st.st_mode);
  e.size = static_cast<int64_t>(st.st_size);
  e.mode = ModeString(st.st_mode);
  e.mtime = static_cast<int64_t>(st.st_mtim.tv_sec);
  e.is_symlink = S_ISLNK(st.st_mode);
  e.uid = st.st_uid;
  e.gid = st.st_gid;
  return e;
}

static std::string_view StripTrailingSlashes(std::string_view p) {
  while (p.size() > 1 && p.back() == '/') p.remove_suffix(1);
  return p;
}

std::string EntryName(std::string_view path) {
  std::string leaf = LeafOf(path);
  return leaf.empty() ? std::string(path) : leaf;
}

std::string LeafOf(std::string_view path) {
  std::string_view p = StripTrailingSlashes(path);
  if (p == "/") return "";
  size_t s = p.rfind('/');
  return std::string(s == std::string_view::npos ? p : p.substr(s + 1));
}

std::string ParentOf(std::string_view path) {
  std::string_view p = StripTrailingSlashes(path);
  size_t s = p.rfind('/');
  if (s == std::string_view::npos) return ".";
  std::string_view parent = p.substr(0, s);
  while (parent.size() > 1 && parent.back() == '/') parent.remove_suffix(1);
  if (parent.empty()) return "/";
  return std::string(parent);
}

std::string JoinPath(std::string_view root, std::string_view rel) {
  if (rel.empty()) return std::string(root);
  std::string out(root);
  if (out.empty() || out.back() != '/') out.push_back('/');
  out.append(rel);
  return out;
}

std::string LinkTargetPath(std::string_view link_dir, std::string_view text) {
  std::string joined = text.starts_with('/') ? std::string(text) : JoinPath(link_dir, text);
  std::vector<std::string_view> parts;
  std::string_view rest = joined;
  while (!rest.empty()) {
    size_t slash = rest.find('/');
    std::string_view part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (std::string_view p : parts) {
    out.push_back('/');
    out.append(p);
  }
  return out.empty() ? "/" : out;
}

size_t Utf8CharLen(std::string_view s, size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  return n;
}

namespace {

// Matches one path segment (no '/') against a segment pattern with * and ?.
bool SegmentMatch(std::string_view pat, std::string_view s) {
  size_t p = 0, i = 0;
  size_t star_p = std::string_view::npos, star_i = 0;
  while (i < s.size()) {
    if (p < pat.size() && pat[p] == '*') {
      while (p < pat.size() && pat[p] == '*') ++p;
      star_p = p;
      star_i = i;
      continue;
    }
    if (p < pat.size() && pat[p] == '?') {
      ++p;
      i += Utf8CharLen(s, i);
      continue;
    }
    if (p < pat.size() && pat[p] == s[i]) {
      ++p;
      ++i;
      continue;
    }
    if (star_p == std::string_view::npos) return false;
    // Backtrack: let the last star eat one more character.
    star_i += Utf8CharLen(s, star_i);
    i = star_i;
    p = star_p;
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

std::vector<std::string_view> Split(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t slash = s.find('/', start);
    if (slash == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, slash - start));
    start = slash + 1;
  }
}

bool SegmentsMatch(const std::vector<std::string_view>& pat, size_t pi,
                   const std::vector<std::string_view>& path, size_t si) {
  while (pi < pat.size()) {
    if (pat[pi] == "**") {
      // Collapse consecutive ** segments.
      while (pi + 1 < pat.size() && pat[pi + 1] == "**") ++pi;
      if (pi + 1 == pat.size()) return true;  // trailing ** matches everything below
      for (size_t k = si; k <= path.size(); ++k)
        if (SegmentsMatch(pat, pi + 1, path, k)) return true;
      return false;
    }
    if (si >= path.size() || !SegmentMatch(pat[pi], path[si])) return false;
    ++pi;
    ++si;
  }
  return si == path.size();
}

}  // namespace

bool GlobMatch(std::string_view pattern, std::string_view rel_path) {
  if (pattern.find('/') == std::string_view::npos) {
    if (pattern == "**") return true;
    size_t s = rel_path.rfind('/');
    std::string_view base = s == std::string_view::npos ? rel_path : rel_path.substr(s + 1);
    return SegmentMatch(pattern, base);
  }
  return SegmentsMatch(Split(pattern), 0, Split(rel_path), 0);
}

bool GlobSelected(const std::vector<std::string>& include, const std::vector<std::string>& exclude,
                  std::string_view rel_path) {
  if (!include.empty()) {
    bool any = false;
    for (const auto& g : include)
      if (GlobMatch(g, rel_path)) {
        any = true;
        break;
      }
    if (!any) return false;
  }
  for (const auto& g : exclude)
    if (GlobMatch(g, rel_path)) return false;
  return true;
}

static bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

void ExpandReplacement(std::string_view repl, const std::vector<std::string_view>& groups,
                       const std::function<std::optional<int>(std::string_view)>& named, std::string& out) {
  auto emit_ref = [&](std::string_view ref) {
    bool digits = !ref.empty();
    for (char c : ref) digits = digits && c >= '0' && c <= '9';
    std::optional<size_t> idx;
    if (digits) {
      if (ref.size() <= 9) idx = static_cast<size_t>(std::stoul(std::string(ref)));
    } else if (auto n = named(ref)) {
      idx = static_cast<size_t>(*n);
    }
    if (idx && *idx < groups.size()) out.append(groups[*idx]);
  };
  size_t i = 0;
  while (i < repl.size()) {
    char c = repl[i];
    if (c != '$' || i + 1 >= repl.size()) {
      out.push_back(c);
      ++i;
      continue;
    }
    char n = repl[i + 1];
    if (n == '$') {
      out.push_back('$');
      i += 2;
    } else if (n == '{') {
      size_t close = repl.find('}', i + 2);
      std::string_view inner =
          close == std::string_view::npos ? std::string_view() : repl.substr(i + 2, close - i - 2);
      bool valid = close != std::string_view::npos && !inner.empty();
      for (char k : inner) valid = valid && IsWordChar(k);
      if (!valid) {  // "$" followed by anything else is literal
        out.push_back('$');
        ++i;
        continue;
      }
      emit_ref(inner);
      i = close + 1;
    } else if (IsWordChar(n)) {
      size_t j = i + 1;
      while (j < repl.size() && IsWordChar(repl[j])) ++j;
      emit_ref(repl.substr(i + 1, j - i - 1));
      i = j;
    } else {
      out.push_back('$');
      ++i;
    }
  }
}

std::vector<Line> SplitLines(std::string_view text) {
  std::vector<Line> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      lines.push_back({text.substr(start), {}, start});
      break;
    }
    size_t end = nl;
    if (end > start && text[end - 1] == '\r') --end;
    lines.push_back({text.substr(start, end - start), text.substr(end, nl + 1 - end), start});
    start = nl + 1;
  }
  return lines;
}

std::string CutUtf8(std::string_view s, size_t max) {
  if (max == 0 || s.size() <= max) return std::string(s);
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  std::string out(s.substr(0, cut));
  out.append("\xE2\x80\xA6");
  return out;
}

}  // namespace skiff::agent
