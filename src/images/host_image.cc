// The `host` image: the host's /usr, /bin, /sbin, /lib* read-only, plus a
// skeleton root with a synthesized minimal /etc. Nothing secret from the
// host's /etc is ever copied (no shadow, ssh keys, machine-id, ...): only an
// allow list of public configuration.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <mutex>
#include <sstream>

#include "base/fs_util.h"
#include "base/error.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/text.h"
#include "images/catalog.h"

namespace skiff {
namespace {

// One entry of the skeleton root, relative to it.
struct Entry {
  enum Kind { kDir, kFile, kLink } kind;
  std::string path;
  std::string data;  // file content or link target
  mode_t mode = 0755;
};

// Top-level host directories the image exposes.
constexpr const char* kHostDirs[] = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"};

std::optional<std::string> ReadSmallFile(const std::string& path, size_t max = 8u << 20) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (s.size() > max) return std::nullopt;
  return s;
}

std::optional<std::string> ReadLink(const std::string& path) {
  char buf[4096];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
  if (n < 0 || n == sizeof buf) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

// Copies a host /etc entry (file or symlink) if it exists.
void CopyEntry(std::vector<Entry>& out, const std::string& host, const std::string& rel) {
  struct stat st;
  if (::lstat(host.c_str(), &st) < 0) return;
  if (S_ISLNK(st.st_mode)) {
    if (auto t = ReadLink(host)) out.push_back({Entry::kLink, rel, *t, 0777});
  } else if (S_ISREG(st.st_mode)) {
    if (auto d = ReadSmallFile(host)) out.push_back({Entry::kFile, rel, *d, st.st_mode & 0644});
  }
}

// Copies a host directory's regular files and symlinks, one level deep
// (plus one more level for subdirectories when `depth` > 0).
void CopyDir(std::vector<Entry>& out, const std::string& host, const std::string& rel,
             int depth = 0) {
  DIR* d = ::opendir(host.c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  out.push_back({Entry::kDir, rel, "", 0755});
  for (const auto& n : names) {
    struct stat st;
    std::string h = host + "/" + n;
    if (::lstat(h.c_str(), &st) < 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (depth > 0) CopyDir(out, h, rel + "/" + n, depth - 1);
      continue;
    }
    CopyEntry(out, h, rel + "/" + n);
  }
}

std::vector<Entry> BuildSkeleton(std::vector<std::string>* layer_dirs) {
  std::vector<Entry> e;
  for (const char* d : {"dev", "proc", "sys", "run", "mnt", "opt", "srv", "media", "home", "var",
                        "var/lib", "var/cache", "var/log", "usr", "etc"})
    e.push_back({Entry::kDir, d, "", 0755});
  e.push_back({Entry::kDir, "root", "", 0700});
  e.push_back({Entry::kDir, "tmp", "", 01777});
  e.push_back({Entry::kDir, "var/tmp", "", 01777});
  // Debian 12 has merged /usr: /bin, /lib... are symlinks, kept as symlinks.
  for (const char* d : kHostDirs) {
    std::string host = std::string("/") + d;
    struct stat st;
    if (::lstat(host.c_str(), &st) < 0) continue;
    if (S_ISLNK(st.st_mode)) {
      if (auto t = ReadLink(host)) e.push_back({Entry::kLink, d, *t, 0777});
    } else if (S_ISDIR(st.st_mode)) {
      if (std::string(d) != "usr") e.push_back({Entry::kDir, d, "", 0755});
      layer_dirs->push_back(host);
    }
  }
  // Synthesized /etc.
  auto file = [&](const char* p, std::string data, mode_t mode = 0644) {
    e.push_back({Entry::kFile, p, std::move(data), mode});
  };
  file("etc/passwd",
       "root:x:0:0:root:/root:/bin/sh\n"
       "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
  file("etc/group", "root:x:0:\nnogroup:x:65534:\n");
  file("etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
  {
    // Only resolver directives, never comments or anything else.
    std::string rc;
    if (auto host = ReadSmallFile("/etc/resolv.conf", 64 * 1024)) {
      std::stringstream ss(*host);
      std::string line;
      while (std::getline(ss, line))
        if (line.rfind("nameserver ", 0) == 0 || line.rfind("options ", 0) == 0) rc += line + "\n";
    }
    file("etc/resolv.conf", rc);
  }
  file("etc/nsswitch.conf",
       "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\n"
       "protocols: files\nservices: files\nethers: files\nrpc: files\n");
  CopyEntry(e, "/etc/ld.so.cache", "etc/ld.so.cache");
  CopyEntry(e, "/etc/ld.so.conf", "etc/ld.so.conf");
  CopyDir(e, "/etc/ld.so.conf.d", "etc/ld.so.conf.d");
  for (const char* f : {"os-release", "debian_version", "localtime", "timezone", "shells",
                        "protocols", "services", "mime.types", "ethertypes", "rpc"})
    CopyEntry(e, std::string("/etc/") + f, std::string("etc/") + f);
  e.push_back({Entry::kDir, "etc/ssl", "", 0755});
  CopyDir(e, "/etc/ssl/certs", "etc/ssl/certs");
  CopyEntry(e, "/etc/ssl/openssl.cnf", "etc/ssl/openssl.cnf");
  CopyDir(e, "/etc/alternatives", "etc/alternatives");
  CopyDir(e, "/etc/ca-certificates", "etc/ca-certificates", 1);
  // Interpreter configuration (public, read by python3 at startup).
  if (DIR* d = ::opendir("/etc")) {
    std::vector<std::string> py;
    while (dirent* x = ::readdir(d))
      if (std::string(x->d_name).rfind("python", 0) == 0) py.push_back(x->d_name);
    ::closedir(d);
    std::sort(py.begin(), py.end());
    for (const auto& n : py) CopyDir(e, "/etc/" + n, "etc/" + n, 1);
  }
  return e;
}

uint64_t Fnv1a(uint64_t h, std::string_view s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string Hash(const std::vector<Entry>& entries) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& e : entries) {
    h = Fnv1a(h, std::to_string(e.kind) + ":" + std::to_string(e.mode) + ":" + e.path + "\n");
    h = Fnv1a(h, std::to_string(e.data.size()) + ":");
    h = Fnv1a(h, e.data);
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

Status Materialize(const std::string& root, const std::vector<Entry>& entries) {
  if (::mkdir(root.c_str(), 0755) < 0) return Error::Sys(Code::kS300, "mkdir", root, errno);
  for (const auto& e : entries) {
    std::string p = root + "/" + e.path;
    switch (e.kind) {
      case Entry::kDir:
        if (::mkdir(p.c_str(), 0755) < 0 && errno != EEXIST)
          return Error::Sys(Code::kS300, "mkdir", p, errno);
        if (::chmod(p.c_str(), e.mode) < 0) return Error::Sys(Code::kS300, "chmod", p, errno);
        break;
      case Entry::kLink:
        if (::symlink(e.data.c_str(), p.c_str()) < 0)
          return Error::Sys(Code::kS300, "symlink", p, errno);
        break;
      case Entry::kFile: {
        int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, e.mode);
        if (fd < 0) return Error::Sys(Code::kS300, "open", p, errno);
        size_t off = 0;
        while (off < e.data.size()) {
          ssize_t n = ::write(fd, e.data.data() + off, e.data.size() - off);
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) {
            int err = errno;
            ::close(fd);
            return Error::Sys(Code::kS300, "write", p, err);
          }
          off += static_cast<size_t>(n);
        }
        ::fchmod(fd, e.mode);
        ::close(fd);
        break;
      }
    }
  }
  return OkStatus();
}

Status MkdirP(const std::string& path) {
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    std::string cur = path.substr(0, pos);
    if (!cur.empty() && ::mkdir(cur.c_str(), 0755) < 0 && errno != EEXIST)
      return Error::Sys(Code::kS300, "mkdir", cur, errno);
  }
  return OkStatus();
}

}  // namespace

Result<ResolvedImage> HostImage() {
  // Built once per process (and once per content on disk): the skeleton only
  // changes when the host's /etc allow list does.
  static std::mutex mu;
  static std::optional<ResolvedImage> cached;
  std::lock_guard<std::mutex> g(mu);
  if (cached && ::access(cached->rootfs.layers[0].lower[0].c_str(), F_OK) == 0) return *cached;

  std::vector<std::string> layer_dirs;
  std::vector<Entry> entries = BuildSkeleton(&layer_dirs);
  if (layer_dirs.empty() || layer_dirs[0] != "/usr")
    return Platform("image", "host: /usr is not a directory on this host");
  std::string base = paths::CacheDir() + "/host-etc";
  std::string dir = base + "/" + Hash(entries);
  std::string root = dir + "/root";
  if (::access(root.c_str(), F_OK) != 0) {
    SKIFF_RETURN_IF_ERROR(MkdirP(base));
    std::string tmp = base + "/.tmp-" + RandomHex(8);
    if (::mkdir(tmp.c_str(), 0755) < 0) return Error::Sys(Code::kS300, "mkdir", tmp, errno);
    Status st = Materialize(tmp + "/root", entries);
    if (!st.ok()) {
      (void)RemoveTree(tmp);
      return Platform("image", "host: " + st.error().message());
    }
    if (::rename(tmp.c_str(), dir.c_str()) < 0) {
      int err = errno;
      (void)RemoveTree(tmp);  // lost a race with another process: theirs is identical
      if (err != EEXIST && err != ENOTEMPTY)
        return Error::Sys(Code::kS300, "rename", dir, err);
    }
    SKIFF_LOG(Info) << "images: host image skeleton in " << dir;
  }

  ResolvedImage img;
  img.name = "host";
  img.rootfs.layers.push_back({"/", {root}});
  for (const auto& d : layer_dirs) img.rootfs.layers.push_back({d, {d}});
  img.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             "LANG=C.UTF-8"};
  cached = img;
  return img;
}

}  // namespace skiff
