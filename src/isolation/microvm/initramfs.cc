#include "isolation/microvm/initramfs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>

#include "base/file_io.h"
#include "base/sha256.h"
#include "base/text.h"
#include "base/unique_fd.h"

namespace skiff::microvm {
namespace {

void Hex8(std::string& out, uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08X", v);
  out.append(buf, 8);
}

void Pad4(std::string& out) {
  while (out.size() % 4 != 0) out.push_back('\0');
}

// One newc entry: "070701", 13 eight-digit hex fields, the NUL-terminated
// name padded to 4 bytes, then the data padded to 4 bytes.
void Entry(std::string& out, uint32_t ino, uint32_t mode, std::string_view name, std::string_view data = {},
           uint32_t rdev_major = 0, uint32_t rdev_minor = 0) {
  out += "070701";
  Hex8(out, ino);
  Hex8(out, mode);
  Hex8(out, 0);  // uid
  Hex8(out, 0);  // gid
  Hex8(out, S_ISDIR(mode) ? 2 : 1);
  Hex8(out, 0);  // mtime: fixed, so the archive is reproducible
  Hex8(out, static_cast<uint32_t>(data.size()));
  Hex8(out, 0);  // dev major
  Hex8(out, 0);  // dev minor
  Hex8(out, rdev_major);
  Hex8(out, rdev_minor);
  Hex8(out, static_cast<uint32_t>(name.size() + 1));
  Hex8(out, 0);  // check
  out.append(name);
  out.push_back('\0');
  Pad4(out);
  out.append(data);
  Pad4(out);
}

}  // namespace

std::string BuildInitramfs(std::string_view agent) {
  std::string out;
  uint32_t ino = 1;
  for (const char* d : {"dev", "proc", "sys", "run"}) Entry(out, ino++, S_IFDIR | 0755, d);
  Entry(out, ino++, S_IFCHR | 0600, "dev/console", {}, 5, 1);
  Entry(out, ino++, S_IFREG | 0644, ".skiff-initramfs");
  Entry(out, ino++, S_IFREG | 0755, "init", agent);
  Entry(out, 0, 0, "TRAILER!!!");
  return out;
}

Result<std::string> EnsureInitramfs(const std::string& agent_path, const std::string& cache_dir) {
  // The agent is a static binary of a few MB; the bound only refuses a wrong path.
  SKIFF_ASSIGN_OR_RETURN(std::string agent, ReadFile(agent_path, size_t{256} << 20, Links::kFollow));
  std::string digest = Sha256Hex(agent);
  std::string dir = cache_dir + "/initramfs";
  std::string path = dir + "/" + digest.substr(0, 32) + ".cpio";
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return path;
  SKIFF_RETURN_IF_ERROR(MakeDirs(dir, 0755));
  SKIFF_RETURN_IF_ERROR(WriteFileAtomic(path, BuildInitramfs(agent), 0644));
  return path;
}

}  // namespace skiff::microvm
