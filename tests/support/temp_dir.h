// A temporary directory a test owns: made fresh under $TMPDIR (else /tmp)
// and removed, with everything in it, when the test is done with it.
#pragma once

#include <string>
#include <string_view>

namespace skiff::testing_support {

// Where tests' temporary directories go: $TMPDIR when it is set and not
// empty, else /tmp (no trailing slash).
std::string TempParent();

// <TempParent()>/skiff-<name>-XXXXXX, made by mkdtemp (mode 0700). The
// destructor removes the tree (never following a symlink) and fails the
// running test when it cannot. Keep `name` short where a unix socket will
// live inside: a socket's path holds at most 107 bytes.
class TempDir {
 public:
  // Throws std::runtime_error naming the path and the reason when the
  // directory cannot be made.
  explicit TempDir(std::string_view name);
  ~TempDir();
  TempDir(TempDir&& other) noexcept;
  TempDir& operator=(TempDir&& other) noexcept;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + child.
  std::string operator/(std::string_view child) const;

 private:
  void Remove();

  std::string path_;  // empty once moved from
};

}  // namespace skiff::testing_support
