// Fuzzes NormalizeArchivePath, which every member name of an imported image
// archive goes through: arbitrary bytes as the path. What comes out is
// never absolute, has no "..", "." or empty component, is what an
// independent walk of the components says, and normalises to itself; a
// path that climbs above the root is refused, and only such a path.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "images/archive_path.h"

namespace {

std::vector<std::string_view> Split(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (true) {
    size_t j = s.find('/', i);
    out.push_back(s.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) return out;
    i = j + 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using skiff::images::NormalizeArchivePath;
  const std::string path(reinterpret_cast<const char*>(data), size);
  bool ok = false;
  const std::string out = NormalizeArchivePath(path, &ok);

  // The reference: a stack of components, failing when ".." finds it empty.
  std::vector<std::string_view> stack;
  bool escapes = false;
  for (std::string_view c : Split(path)) {
    if (c == "..") {
      if (stack.empty()) {
        escapes = true;
        break;
      }
      stack.pop_back();
    } else if (!c.empty() && c != ".") {
      stack.push_back(c);
    }
  }
  if (ok == escapes) std::abort();
  if (!ok) {
    if (!out.empty()) std::abort();
    return 0;
  }

  if (!out.empty()) {
    if (out.front() == '/' || out.back() == '/') std::abort();
    std::vector<std::string_view> parts = Split(out);
    if (parts.size() != stack.size()) std::abort();
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].empty() || parts[i] == "." || parts[i] == "..") std::abort();
      if (parts[i] != stack[i]) std::abort();
    }
  } else if (!stack.empty()) {
    std::abort();
  }

  bool again_ok = false;
  if (NormalizeArchivePath(out, &again_ok) != out || !again_ok) std::abort();
  return 0;
}
