#include "images/archive_path.h"

#include <vector>

namespace skiff::images {

std::string NormalizeArchivePath(const std::string& path, bool* ok) {
  std::vector<std::string> out;
  size_t i = 0;
  *ok = true;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string c = path.substr(i, j - i);
    if (c == "..") {
      if (out.empty()) {
        *ok = false;
        return "";
      }
      out.pop_back();
    } else if (!c.empty() && c != ".") {
      out.push_back(c);
    }
    i = j + 1;
  }
  std::string s;
  for (const auto& c : out) s += (s.empty() ? "" : "/") + c;
  return s;
}

}  // namespace skiff::images
