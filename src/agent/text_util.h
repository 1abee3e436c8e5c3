// Pure helpers of the agent's filesystem operations (no I/O): glob matching,
// sed replacement expansion, line splitting, mode strings, path pieces.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/fs_messages.h"

namespace skiff::agent {

// "0644": the 4-digit octal string of mode & 07777.
std::string ModeString(uint32_t mode);

// An FsEntry (docs/api.md#fs_entry) from an lstat result, with uid and gid
// but without owner/group names or a link target (fs_ops adds those).
proto::FsEntry FsEntryOf(std::string_view name, const struct stat& st);

// Final path component; the path as given when it has none ("/").
std::string EntryName(std::string_view path);
// Parent directory of a path ("/a/b" -> "/a", "/a" -> "/", "a" -> ".").
std::string ParentOf(std::string_view path);
// Last component of a path, after trailing slashes are removed ("" for "/").
std::string LeafOf(std::string_view path);
// `root` joined with the relative path `rel` ("" = root itself).
std::string JoinPath(std::string_view root, std::string_view rel);
// The absolute target of a link whose text is `text` and which lives in the
// absolute directory `link_dir`: a relative text is joined with link_dir,
// then "", "." and ".." components are removed lexically ("/.." is "/").
// No link is followed.
std::string LinkTargetPath(std::string_view link_dir, std::string_view text);

// Glob matching of docs/api.md#filesystem-rules-sandboxfs against a path relative to the walk root.
// A pattern without '/' matches the basename; with '/', the whole path.
// '*' = any run except '/', '?' = one character except '/', '**' as a whole
// segment = zero or more directories. No character classes.
bool GlobMatch(std::string_view pattern, std::string_view rel_path);
// Include/exclude selection: non-empty include list must match; no exclude may.
bool GlobSelected(const std::vector<std::string>& include, const std::vector<std::string>& exclude,
                  std::string_view rel_path);

// Expands a sed replacement (docs/api.md#sandboxfssed): $N ${N} $name ${name} $$. `group`
// returns the text of group N (nullopt = no such group), `named` maps a name
// to its group number (nullopt = unknown).
void ExpandReplacement(std::string_view repl, const std::vector<std::string_view>& groups,
                       const std::function<std::optional<int>(std::string_view)>& named, std::string& out);

// One line of a buffer: content without its terminator, and the terminator.
struct Line {
  std::string_view content;
  std::string_view terminator;  // "", "\n" or "\r\n"
  size_t offset = 0;            // byte offset of content in the buffer
};
// Splits at '\n'; a '\r' before the '\n' belongs to the terminator. A final
// line without a terminator is returned when non-empty.
std::vector<Line> SplitLines(std::string_view text);

// Cuts s at the last UTF-8 character boundary <= max bytes and appends "…"
// when s is longer than max (max 0 = no cut).
std::string CutUtf8(std::string_view s, size_t max);

// Length of the UTF-8 sequence starting at s[i] (1 for an invalid byte).
size_t Utf8CharLen(std::string_view s, size_t i);

}  // namespace skiff::agent
