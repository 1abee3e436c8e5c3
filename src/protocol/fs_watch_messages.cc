#include "protocol/fs_watch_messages.h"

#include <array>
#include <utility>

#include "protocol/message_fields.h"

namespace skiff::proto {

using nlohmann::json;

namespace {

constexpr std::array<std::pair<FsWatchChange, std::string_view>, 5> kChanges = {{
    {FsWatchChange::kCreate, "create"},
    {FsWatchChange::kWrite, "write"},
    {FsWatchChange::kRemove, "remove"},
    {FsWatchChange::kRename, "rename"},
    {FsWatchChange::kChmod, "chmod"},
}};

// A relative path the agent may name: no empty, "." or ".." component.
bool IsRelativeName(std::string_view n) {
  if (n.empty() || n.size() > kMaxWatchName || n.front() == '/' || n.back() == '/') return false;
  if (n.find('\0') != std::string_view::npos) return false;
  size_t start = 0;
  while (start <= n.size()) {
    size_t slash = n.find('/', start);
    std::string_view part = n.substr(start, slash == std::string_view::npos ? n.npos : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return true;
}

}  // namespace

std::string_view FsWatchChangeName(FsWatchChange c) {
  for (const auto& [v, name] : kChanges)
    if (v == c) return name;
  return "create";
}

json FsWatchRequest::ToJson() const { return json{{"op", kOp}, {"path", path}, {"recursive", recursive}}; }

Result<FsWatchRequest> FsWatchRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  FsWatchRequest r;
  SKIFF_ASSIGN_OR_RETURN(r.path, field::Path(j, "path"));
  SKIFF_ASSIGN_OR_RETURN(r.recursive, field::Bool(j, "recursive", false));
  return r;
}

json FsWatchEvent::ToJson() const { return json{{"name", name}, {"type", FsWatchChangeName(change)}}; }

Result<FsWatchEvent> FsWatchEvent::FromJson(const json& j) {
  auto parse = [&]() -> Result<FsWatchEvent> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "event"));
    FsWatchEvent e;
    SKIFF_ASSIGN_OR_RETURN(e.name, field::String(j, "name"));
    if (!IsRelativeName(e.name))
      return InvalidRequest("name: expected a relative path of 1 to " + std::to_string(kMaxWatchName) +
                            " bytes without NUL, \".\" or \"..\"");
    SKIFF_ASSIGN_OR_RETURN(std::string type, field::String(j, "type"));
    for (const auto& [v, n] : kChanges) {
      if (n == type) {
        e.change = v;
        return e;
      }
    }
    return InvalidRequest("type: expected create, write, remove, rename or chmod");
  };
  auto r = parse();
  if (!r.ok()) return field::AnswerError("fs.watch event", r.error());
  return r;
}

}  // namespace skiff::proto
