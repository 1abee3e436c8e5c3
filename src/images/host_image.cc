// The `host` image: the host's /usr, /bin, /sbin, /lib* read-only, plus a
// skeleton root with a synthesized minimal /etc. Nothing secret from the
// host's /etc is ever copied (no shadow, ssh keys, machine-id, ...): only an
// allow list of public configuration.
#include "images/host_image.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

#include "base/error.h"
#include "base/file_io.h"
#include "base/fs_util.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/scoped_dir.h"
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

// A host file whole (links followed: /etc/resolv.conf is often one), or
// nullopt when it cannot be read or is over `max`.
std::optional<std::string> ReadHostFile(const std::string& path, size_t max = 8u << 20) {
  Result<std::string> r = ReadFile(path, max, Links::kFollow);
  if (!r.ok()) return std::nullopt;
  return std::move(*r);
}

std::optional<std::string> ReadLink(const std::string& path) {
  char buf[4096];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
  if (n < 0 || n == sizeof buf) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

// Every host path the skeleton was built from whose change could change it
// (see host_image.h: the stamp). Symlinks inside a copied directory are not
// listed: replacing or removing one changes the directory's mtime.
using Watched = std::vector<std::string>;

// Copies a host /etc entry (file or symlink) if it exists.
void CopyEntry(std::vector<Entry>& out, Watched& watched, const std::string& host, const std::string& rel,
               bool in_watched_dir = false) {
  struct stat st;
  bool exists = ::lstat(host.c_str(), &st) == 0;
  if (!(in_watched_dir && exists && S_ISLNK(st.st_mode))) watched.push_back(host);
  if (!exists) return;
  if (S_ISLNK(st.st_mode)) {
    if (auto t = ReadLink(host)) out.push_back({Entry::kLink, rel, *t, 0777});
  } else if (S_ISREG(st.st_mode)) {
    if (auto d = ReadHostFile(host)) out.push_back({Entry::kFile, rel, *d, st.st_mode & 0644});
  }
}

// Copies a host directory's regular files and symlinks, one level deep
// (plus one more level for subdirectories when `depth` > 0).
void CopyDir(std::vector<Entry>& out, Watched& watched, const std::string& host, const std::string& rel,
             int depth = 0) {
  watched.push_back(host);
  Result<ScopedDir> d = ScopedDir::Open(host);
  if (!d.ok()) return;
  std::vector<std::string> names;
  while (const dirent* e = d->Next()) names.push_back(e->d_name);
  std::sort(names.begin(), names.end());
  out.push_back({Entry::kDir, rel, "", 0755});
  for (const auto& n : names) {
    struct stat st;
    std::string h = host;
    h.append("/").append(n);
    if (::lstat(h.c_str(), &st) < 0) continue;
    std::string r = rel;
    r.append("/").append(n);
    if (S_ISDIR(st.st_mode)) {
      if (depth > 0) CopyDir(out, watched, h, r, depth - 1);
      continue;
    }
    CopyEntry(out, watched, h, r, /*in_watched_dir=*/true);
  }
}

std::vector<Entry> BuildSkeleton(std::vector<std::string>* layer_dirs, Watched& watched) {
  std::vector<Entry> e;
  for (const char* d : {"dev", "proc", "sys", "run", "mnt", "opt", "srv", "media", "home", "var", "var/lib",
                        "var/cache", "var/log", "usr", "etc"})
    e.push_back({Entry::kDir, d, "", 0755});
  e.push_back({Entry::kDir, "root", "", 0700});
  e.push_back({Entry::kDir, "tmp", "", 01777});
  e.push_back({Entry::kDir, "var/tmp", "", 01777});
  // Debian 12 has merged /usr: /bin, /lib... are symlinks, kept as symlinks.
  for (const char* d : kHostDirs) {
    std::string host = std::string("/") + d;
    watched.push_back(host);
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
    watched.push_back("/etc/resolv.conf");
    if (auto host = ReadHostFile("/etc/resolv.conf", size_t{64} * 1024)) {
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
  CopyEntry(e, watched, "/etc/ld.so.cache", "etc/ld.so.cache");
  CopyEntry(e, watched, "/etc/ld.so.conf", "etc/ld.so.conf");
  CopyDir(e, watched, "/etc/ld.so.conf.d", "etc/ld.so.conf.d");
  for (const char* f : {"os-release", "debian_version", "localtime", "timezone", "shells", "protocols",
                        "services", "mime.types", "ethertypes", "rpc"})
    CopyEntry(e, watched, std::string("/etc/") + f, std::string("etc/") + f);
  e.push_back({Entry::kDir, "etc/ssl", "", 0755});
  CopyDir(e, watched, "/etc/ssl/certs", "etc/ssl/certs");
  CopyEntry(e, watched, "/etc/ssl/openssl.cnf", "etc/ssl/openssl.cnf");
  CopyDir(e, watched, "/etc/alternatives", "etc/alternatives");
  CopyDir(e, watched, "/etc/ca-certificates", "etc/ca-certificates", 1);
  // Interpreter configuration (public, read by python3 at startup).
  watched.push_back("/etc");  // a python* directory appearing or going
  if (Result<ScopedDir> d = ScopedDir::Open("/etc"); d.ok()) {
    std::vector<std::string> py;
    while (const dirent* x = d->Next())
      if (std::string(x->d_name).rfind("python", 0) == 0) py.push_back(x->d_name);
    std::sort(py.begin(), py.end());
    for (const auto& n : py) CopyDir(e, watched, "/etc/" + n, "etc/" + n, 1);
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
        if (::symlink(e.data.c_str(), p.c_str()) < 0) return Error::Sys(Code::kS300, "symlink", p, errno);
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

// Writes the skeleton <base>/<hash>/root unless it is there; returns it.
Result<std::string> MaterializeOnce(const std::string& base, const std::string& hash,
                                    const std::vector<Entry>& entries) {
  std::string dir = base + "/" + hash;
  std::string root = dir + "/root";
  if (::access(root.c_str(), F_OK) == 0) return root;
  SKIFF_RETURN_IF_ERROR(MakeDirs(base, 0755));
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
    if (err != EEXIST && err != ENOTEMPTY) return Error::Sys(Code::kS300, "rename", dir, err);
  }
  SKIFF_LOG(Info) << "images: host image skeleton in " << dir;
  return root;
}

// A new file with `data`; false (and nothing left) on any failure.
bool WriteNew(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return false;
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  bool ok = off == data.size() && ::close(fd) == 0;
  if (off != data.size()) ::close(fd);
  if (!ok) ::unlink(path.c_str());
  return ok;
}

}  // namespace

namespace host_image {

std::string StatLine(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) < 0) return path + "\t-";
  auto ns = [](const timespec& t) {
    return std::to_string(static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec);
  };
  return path + "\t" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
         std::to_string(st.st_mode) + ":" + std::to_string(st.st_size) + ":" + ns(st.st_mtim) + ":" +
         ns(st.st_ctim);
}

std::string MakeStamp(const std::string& hash, const std::vector<std::string>& watched,
                      int64_t changed_since_ns) {
  std::string out = "skiff-host-etc-stamp 1\n" + hash + "\n";
  for (const auto& p : watched) {
    if (p.find_first_of("\t\n") != std::string::npos) return "";  // not representable
    struct stat st;
    if (::lstat(p.c_str(), &st) == 0 &&
        static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec >= changed_since_ns)
      return "";  // changed during or just before the scan: what was read may be older
    out += StatLine(p) + "\n";
  }
  return out;
}

std::optional<std::string> StampedHash(const std::string& stamp) {
  std::stringstream ss(stamp);
  std::string magic, hash, line;
  if (!std::getline(ss, magic) || magic != "skiff-host-etc-stamp 1") return std::nullopt;
  if (!std::getline(ss, hash) || hash.size() != 16 ||
      hash.find_first_not_of("0123456789abcdef") != std::string::npos)
    return std::nullopt;
  size_t n = 0;
  while (std::getline(ss, line)) {
    auto tab = line.find('\t');
    if (tab == std::string::npos || StatLine(line.substr(0, tab)) != line) return std::nullopt;
    ++n;
  }
  if (n == 0) return std::nullopt;
  return hash;
}

}  // namespace host_image

Result<ResolvedImage> HostImage() {
  // Built once per process (and once per content on disk): the skeleton only
  // changes when the host's /etc allow list does.
  static std::mutex mu;
  static std::optional<ResolvedImage> cached;
  std::lock_guard<std::mutex> g(mu);
  if (cached && ::access(cached->rootfs.layers[0].lower[0].c_str(), F_OK) == 0) return *cached;

  std::vector<std::string> layer_dirs;
  for (const char* d : kHostDirs) {
    struct stat st;
    std::string host = std::string("/") + d;
    if (::lstat(host.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) layer_dirs.push_back(host);
  }
  if (layer_dirs.empty() || layer_dirs[0] != "/usr")
    return Platform("image", "host: /usr is not a directory on this host");
  const std::string base = paths::CacheDir() + "/host-etc";
  const std::string stamp_path = base + "/stamp";
  // A fresh process (every `skiff run host`) would otherwise read and hash
  // some thousand /etc entries (~7 ms) to find the skeleton it already has:
  // the stamp names it, valid while none of the paths it was built from
  // has changed (see host_image.h).
  std::string root;
  if (auto text = ReadHostFile(stamp_path, 1u << 20))
    if (auto hash = host_image::StampedHash(*text))
      if (std::string r = base + "/" + *hash + "/root"; ::access(r.c_str(), F_OK) == 0) root = r;
  if (root.empty()) {
    // File timestamps come from a coarse clock: anything changed within a
    // second of the scan keeps the next process scanning too.
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    const int64_t scan_start_ns = static_cast<int64_t>(now.tv_sec - 1) * 1000000000 + now.tv_nsec;
    Watched watched;
    std::vector<std::string> scanned_dirs;
    std::vector<Entry> entries = BuildSkeleton(&scanned_dirs, watched);
    if (scanned_dirs != layer_dirs) return Platform("image", "host: the host's / changed while read");
    const std::string hash = Hash(entries);
    SKIFF_ASSIGN_OR_RETURN(root, MaterializeOnce(base, hash, entries));
    // Best effort: without a stamp the next process scans again.
    if (std::string stamp = host_image::MakeStamp(hash, watched, scan_start_ns); !stamp.empty()) {
      std::string tmp = stamp_path + ".tmp-" + RandomHex(8);
      if (WriteNew(tmp, stamp) && ::rename(tmp.c_str(), stamp_path.c_str()) != 0) ::unlink(tmp.c_str());
    }
  }

  ResolvedImage img;
  img.name = "host";
  img.rootfs.layers.push_back({"/", {root}});
  for (const auto& d : layer_dirs) img.rootfs.layers.push_back({d, {d}});
  img.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"};
  cached = img;
  return img;
}

}  // namespace skiff
