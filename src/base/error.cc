#include "base/error.h"

#include <array>
#include <cstring>

namespace skiff {
namespace {

constexpr std::array<std::pair<Code, std::string_view>, 28> kNames = {{
    {Code::kS001, "S001"}, {Code::kS002, "S002"}, {Code::kS003, "S003"}, {Code::kS004, "S004"},
    {Code::kS005, "S005"}, {Code::kS006, "S006"}, {Code::kS007, "S007"}, {Code::kS008, "S008"},
    {Code::kS100, "S100"}, {Code::kS101, "S101"}, {Code::kS102, "S102"}, {Code::kS200, "S200"},
    {Code::kS210, "S210"}, {Code::kS211, "S211"}, {Code::kS212, "S212"}, {Code::kS213, "S213"},
    {Code::kS214, "S214"}, {Code::kS215, "S215"}, {Code::kS216, "S216"}, {Code::kS217, "S217"},
    {Code::kS218, "S218"}, {Code::kS219, "S219"}, {Code::kS220, "S220"}, {Code::kS221, "S221"},
    {Code::kS222, "S222"}, {Code::kS300, "S300"}, {Code::kS301, "S301"}, {Code::kS400, "S400"},
}};

}  // namespace

std::string_view CodeName(Code c) {
  for (const auto& [code, name] : kNames)
    if (code == c) return name;
  return "S300";
}

std::optional<Code> CodeFromName(std::string_view name) {
  for (const auto& [code, n] : kNames)
    if (n == name) return code;
  return std::nullopt;
}

Code CodeForErrno(int err) {
  switch (err) {
    case ENOENT:
      return Code::kS211;
    case ENOTDIR:
    case EISDIR:
      return Code::kS212;
    case EEXIST:
      return Code::kS213;
    case ENOTEMPTY:
      return Code::kS214;
    case EACCES:
    case EPERM:
    case EROFS:
      return Code::kS215;
    default:
      return Code::kS216;
  }
}

std::string_view FsPrefix(Code c) {
  switch (c) {
    case Code::kS211:
      return "file not found: ";
    case Code::kS212:
      return "not a directory or wrong type: ";
    case Code::kS213:
      return "already exists: ";
    case Code::kS214:
      return "directory not empty: ";
    case Code::kS215:
      return "permission denied: ";
    case Code::kS216:
      return "fs i/o error: ";
    case Code::kS217:
      return "invalid regex pattern: ";
    case Code::kS218:
      return "fs channel aborted: ";

    default:
      return "";
  }
}

std::string_view ErrnoName(int err) {
  const char* n = strerrorname_np(err);
  if (n != nullptr) return n;
  return "EUNKNOWN";
}

Error Error::Sys(Code code, std::string_view call, std::string_view object, int err) {
  std::string m;
  m.append(call).append("(").append(object).append("): ").append(ErrnoName(err));
  return Error(code, std::move(m));
}

std::string Error::ToString() const {
  std::string s(CodeName(code_));
  s.append(": ").append(message_);
  return s;
}

Error InvalidRequest(std::string_view detail) {
  return Error(Code::kS001, "invalid request: " + std::string(detail));
}

Error Platform(std::string_view stage, std::string_view detail) {
  return Error(Code::kS300, "platform failure: " + std::string(stage) + ": " + std::string(detail));
}

}  // namespace skiff
