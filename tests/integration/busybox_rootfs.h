// A busybox root filesystem as an erofs image for microVM tests, built once
// and cached by busybox's hash (shared by every test binary that boots one).
// `extra_bin`, a host file, is added as /bin/<its name> (the key then holds
// its hash too).
#pragma once

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "base/paths.h"
#include "base/sha256.h"
#include "base/text.h"

namespace skiff::testing_support {

inline std::string BusyboxRootfs(const std::string& extra_bin = "") {
  auto digest = Sha256File("/bin/busybox");
  if (!digest.ok()) return "";
  std::string key = digest->substr(0, 16), copy_extra;
  if (!extra_bin.empty()) {
    auto extra = Sha256File(extra_bin);
    if (!extra.ok()) return "";
    key += "-" + extra->substr(0, 16);
  }
  std::string dir = paths::CacheDir() + "/microvm-test";
  std::string image = dir + "/busybox-" + key + "-v1.erofs";
  struct stat st {};
  if (::stat(image.c_str(), &st) == 0) return image;
  // Private tree and temp image names: test binaries run in parallel.
  std::string suffix = RandomHex(4);
  std::string tree = dir + "/tree-" + suffix, tmp = image + ".tmp-" + suffix;
  if (!extra_bin.empty()) copy_extra = "cp '" + extra_bin + "' " + tree + "/bin/; ";
  std::string script = "set -e; trap 'rm -rf " + tree + " " + tmp + "' EXIT; mkdir -p " + tree + "/bin " +
                       tree + "/etc " + tree + "/root " + tree + "/home " + tree + "/usr; cp /bin/busybox " +
                       tree + "/bin/busybox; ln -s ../bin " + tree +
                       "/usr/bin; for a in sh echo cat uname ls nc ps sleep true false mkdir id hostname wc "
                       "grep head ip ifconfig; do ln -s busybox " +
                       tree +
                       "/bin/$a; done; "
                       "echo 'root:x:0:0:root:/root:/bin/sh' > " +
                       tree +
                       "/etc/passwd; "
                       "echo 'root:x:0:' > " +
                       tree + "/etc/group; echo image > " + tree + "/etc/marker; " + copy_extra +
                       "mkfs.erofs " + tmp + " " + tree + " >/dev/null && mv " + tmp + " " + image;
  if (std::system(("mkdir -p " + dir + "; " + script).c_str()) != 0) return "";
  return image;
}

}  // namespace skiff::testing_support
