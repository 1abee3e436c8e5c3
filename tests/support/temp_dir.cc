#include "support/temp_dir.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "base/fs_util.h"

namespace skiff::testing_support {

std::string TempParent() {
  const char* env = std::getenv("TMPDIR");
  std::string parent = env != nullptr && *env != '\0' ? env : "/tmp";
  while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
  return parent;
}

TempDir::TempDir(std::string_view name) {
  const std::string tmpl = TempParent() + "/skiff-" + std::string(name) + "-XXXXXX";
  std::string path = tmpl;
  if (::mkdtemp(path.data()) == nullptr) {
    int err = errno;
    throw std::runtime_error("cannot make a temporary directory " + tmpl + ": " + std::strerror(err));
  }
  path_ = std::move(path);
}

TempDir::~TempDir() { Remove(); }

TempDir::TempDir(TempDir&& other) noexcept : path_(std::exchange(other.path_, std::string())) {}

TempDir& TempDir::operator=(TempDir&& other) noexcept {
  if (this != &other) {
    Remove();
    path_ = std::exchange(other.path_, std::string());
  }
  return *this;
}

std::string TempDir::operator/(std::string_view child) const {
  std::string out = path_;
  out += '/';
  out += child;
  return out;
}

void TempDir::Remove() {
  if (path_.empty()) return;
  Status removed = RemoveTree(path_);
  if (!removed.ok()) ADD_FAILURE() << "temporary directory left behind: " << removed.error().ToString();
  path_.clear();
}

}  // namespace skiff::testing_support
