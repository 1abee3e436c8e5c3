#include "isolation/jail/fs_paths.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <sstream>

namespace skiff::jail {
namespace {

int RemoveEntry(const char* path, const struct stat*, int type, struct FTW*) {
  if (type == FTW_DP)
    ::rmdir(path);
  else
    ::unlink(path);
  return 0;
}

}  // namespace

void RemoveTree(const std::string& path) {
  if (path.empty() || path == "/") return;
  ::nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

bool SafeName(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

bool CleanAbsolute(const std::string& p) {
  if (p.empty() || p[0] != '/' || p.find('\0') != std::string::npos) return false;
  if (p.find(',') != std::string::npos || p.find(':') != std::string::npos) return false;
  std::stringstream ss(p);
  std::string part;
  while (std::getline(ss, part, '/'))
    if (part == "." || part == "..") return false;
  return true;
}

}  // namespace skiff::jail
