#include "images/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/child_report.h"
#include "base/fd_pair.h"
#include "base/file_io.h"
#include "base/find_executable.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/pidfd.h"
#include "base/sha256.h"
#include "base/text.h"

namespace skiff::images {
namespace fs = std::filesystem;

namespace {

bool ValidCatalogName(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

nlohmann::json MetaToJson(const ImageMeta& m) {
  nlohmann::json j = {
      {"name", m.name},        {"digest", m.digest},   {"kind", m.kind}, {"source", m.source},
      {"env", m.env},          {"workdir", m.workdir}, {"user", m.user}, {"created_ms", m.created_ms},
      {"build_ms", m.build_ms}};
  // Written only when there are some: entries without services stay as
  // they always were.
  if (!m.services.empty()) {
    nlohmann::json services = nlohmann::json::array();
    for (const auto& s : m.services)
      services.push_back({{"name", s.name},
                          {"command", s.command},
                          {"ready", s.ready},
                          {"ready_timeout_secs", s.ready_timeout_secs}});
    j["services"] = std::move(services);
  }
  return j;
}

}  // namespace

Store Store::ForPolicy(const ImagePolicy& policy) {
  return Store(policy.images_dir.empty() ? DefaultRoot() : policy.images_dir);
}

std::string Store::DefaultRoot() {
  if (const char* v = std::getenv("SKIFF_IMAGES_DIR"); v && *v) return v;
  return paths::DataDir() + "/images";
}

std::string Store::EntryDir(const std::string& digest) const { return root_ + "/store/" + digest; }
std::string Store::RootfsDir(const std::string& digest) const { return EntryDir(digest) + "/rootfs"; }
std::string Store::BlockImagePath(const std::string& digest, const std::string& fstype) const {
  return EntryDir(digest) + "/rootfs." + fstype;
}

Status Store::Init() const {
  // Traversable (not listable) by others: a jail's unprivileged ids and
  // apt's _apt sandbox user must reach rootfs paths; nothing here is secret.
  SKIFF_RETURN_IF_ERROR(MakeDirsWithMode(root_, 0711));
  for (const char* sub : {"store", "current", "tmp"}) {
    SKIFF_RETURN_IF_ERROR(MakeDirsWithMode(root_ + "/" + sub, 0711));
  }
  SKIFF_RETURN_IF_ERROR(MakeDirsWithMode(root_ + "/locks", 0700));
  return OkStatus();
}

std::optional<ImageMeta> Store::Read(const std::string& digest) const {
  if (!IsHexDigest(digest)) return std::nullopt;
  Result<std::string> text = ReadFile(EntryDir(digest) + "/image.json", 1 << 20);
  if (!text.ok()) return std::nullopt;
  struct stat st;
  if (::lstat(RootfsDir(digest).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  try {
    auto j = nlohmann::json::parse(*text);
    ImageMeta m;
    m.name = j.at("name").get<std::string>();
    m.digest = j.at("digest").get<std::string>();
    m.kind = j.at("kind").get<std::string>();
    m.source = j.at("source").get<std::string>();
    m.env = j.at("env").get<std::vector<std::string>>();
    m.workdir = j.at("workdir").get<std::string>();
    m.user = j.at("user").get<std::string>();
    m.created_ms = j.value("created_ms", int64_t{0});
    m.build_ms = j.value("build_ms", uint64_t{0});
    if (auto it = j.find("services"); it != j.end()) {
      for (const auto& sj : it->get_ref<const nlohmann::json::array_t&>()) {
        ImageService s;
        s.name = sj.at("name").get<std::string>();
        s.command = sj.at("command").get<std::vector<std::string>>();
        s.ready = sj.value("ready", std::vector<std::string>{});
        s.ready_timeout_secs = sj.value("ready_timeout_secs", uint32_t{30});
        if (s.command.empty()) return std::nullopt;
        m.services.push_back(std::move(s));
      }
    }
    if (m.digest != digest) return std::nullopt;
    return m;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

std::optional<std::string> Store::Current(const std::string& name) const {
  if (!ValidCatalogName(name)) return std::nullopt;
  char buf[512];
  std::string link = root_ + "/current/" + name;
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return std::nullopt;
  std::string target(buf, static_cast<size_t>(n));
  const std::string prefix = "../store/";
  if (!target.starts_with(prefix)) return std::nullopt;
  std::string digest = target.substr(prefix.size());
  if (!IsHexDigest(digest)) return std::nullopt;
  return digest;
}

Status Store::SetCurrent(const std::string& name, const std::string& digest) const {
  if (!ValidCatalogName(name)) return InvalidRequest("invalid image name '" + name + "'");
  if (!IsHexDigest(digest)) return InvalidRequest("invalid digest '" + digest + "'");
  SKIFF_RETURN_IF_ERROR(Init());
  std::string link = root_ + "/current/" + name;
  std::string tmp = link + ".new." + RandomHex(6);
  if (::symlink(("../store/" + digest).c_str(), tmp.c_str()) != 0) {
    return Error::Sys(Code::kS300, "symlink", tmp, errno);
  }
  if (::rename(tmp.c_str(), link.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Error::Sys(Code::kS300, "rename", link, err);
  }
  return OkStatus();
}

Status Store::RemoveCurrent(const std::string& name) const {
  if (!ValidCatalogName(name)) return InvalidRequest("invalid image name '" + name + "'");
  std::string link = root_ + "/current/" + name;
  if (::unlink(link.c_str()) != 0 && errno != ENOENT) {
    return Error::Sys(Code::kS300, "unlink", link, errno);
  }
  return OkStatus();
}

std::vector<std::string> Store::CurrentNames() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root_ + "/current", ec)) {
    std::string n = e.path().filename().string();
    if (ValidCatalogName(n) && n.find(".new.") == std::string::npos) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<UniqueFd> Store::Lock(const std::string& digest) const {
  if (!IsHexDigest(digest)) return InvalidRequest("invalid digest '" + digest + "'");
  SKIFF_RETURN_IF_ERROR(Init());
  std::string path = root_ + "/locks/" + digest + ".lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return Error::Sys(Code::kS300, "open", path, errno);
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return Error::Sys(Code::kS300, "flock", path, errno);
  }
  return fd;
}

Result<std::string> Store::MakeTemp(const std::string& digest) const {
  SKIFF_RETURN_IF_ERROR(Init());
  std::string dir = root_ + "/tmp/" + digest + "." + RandomHex(8);
  if (::mkdir(dir.c_str(), 0711) != 0 || ::chmod(dir.c_str(), 0711) != 0) {
    return Error::Sys(Code::kS300, "mkdir", dir, errno);
  }
  return dir;
}

Status Store::Commit(const std::string& tmp_dir, const ImageMeta& meta) const {
  if (!IsHexDigest(meta.digest)) return InvalidRequest("invalid digest '" + meta.digest + "'");
  if (Read(meta.digest)) {
    (void)RemoveTree(tmp_dir);
    return OkStatus();
  }
  // A leftover incomplete entry (no image.json) cannot exist by construction,
  // but never rename onto one.
  (void)RemoveTree(EntryDir(meta.digest));
  SKIFF_RETURN_IF_ERROR(WriteFileAtomic(tmp_dir + "/image.json", MetaToJson(meta).dump(2) + "\n", 0644));
  std::string dst = EntryDir(meta.digest);
  if (::rename(tmp_dir.c_str(), dst.c_str()) != 0) {
    return Error::Sys(Code::kS300, "rename", dst, errno);
  }
  // Make the rename durable.
  UniqueFd dfd(::open((root_ + "/store").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd) ::fsync(dfd.get());
  return OkStatus();
}

Result<std::string> Store::EnsureBlockImage(const std::string& digest, const std::string& fstype) const {
  if (fstype != "erofs" && fstype != "ext4") {
    return InvalidRequest("block image type must be erofs or ext4");
  }
  std::string out = BlockImagePath(digest, fstype);
  struct stat st;
  if (::stat(out.c_str(), &st) == 0) return out;
  SKIFF_ASSIGN_OR_RETURN(UniqueFd lock, Lock(digest));
  if (::stat(out.c_str(), &st) == 0) return out;  // built while we waited
  if (!Read(digest)) return Platform("sandbox", "image " + digest + " is not installed");
  std::string rootfs = RootfsDir(digest);
  std::string tmp = out + ".tmp." + RandomHex(6);
  ScopedCleanup rm_tmp([&] { ::unlink(tmp.c_str()); });
  std::vector<std::string> argv;
  if (fstype == "erofs") {
    // A fixed timestamp and UUID keep the image reproducible; owners are kept
    // as the rootfs has them (uid 0 from mmdebstrap or the layers' ids).
    // lz4, not lz4hc: lz4hc spent 90 s on 64 MiB of incompressible layer
    // data that lz4 packs in 5 s, for a few percent of size.
    argv = {"mkfs.erofs", "--quiet", "-zlz4", "-T0", "-U00000000-0000-0000-0000-000000000000", tmp, rootfs};
  } else {
    uint64_t bytes = TreeBytes(rootfs);
    uint64_t mib = bytes / (uint64_t{1024} * 1024) * 5 / 4 + 64;
    UniqueFd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!f || ::ftruncate(f.get(), static_cast<off_t>(mib * 1024 * 1024)) != 0) {
      return Error::Sys(Code::kS300, "ftruncate", tmp, errno);
    }
    argv = {"mkfs.ext4",      "-q", "-F",   "-O", "^has_journal", "-m", "0", "-L", "skiff-rootfs", "-E",
            "root_owner=0:0", "-d", rootfs, tmp};
  }
  Status st_run =
      RunLogged(argv, [&](const std::string& line) { SKIFF_LOG(Debug) << argv[0] << ": " << line; });
  SKIFF_RETURN_IF_ERROR(st_run);
  if (::chmod(tmp.c_str(), 0444) != 0) return Error::Sys(Code::kS300, "chmod", tmp, errno);
  if (::rename(tmp.c_str(), out.c_str()) != 0) return Error::Sys(Code::kS300, "rename", out, errno);
  rm_tmp.Cancel();
  return out;
}

Result<UniqueFd> Store::LeaseFd(const std::string& digest, int op) const {
  if (!IsHexDigest(digest)) return InvalidRequest("invalid digest '" + digest + "'");
  SKIFF_RETURN_IF_ERROR(Init());
  std::string path = root_ + "/locks/" + digest + ".lease";
  // O_CLOEXEC: the lease belongs to this process; a crash releases it.
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return Error::Sys(Code::kS300, "open", path, errno);
  while (::flock(fd.get(), op) != 0) {
    if ((op & LOCK_NB) && errno == EWOULDBLOCK) return UniqueFd();  // held by someone
    if (errno != EINTR) return Error::Sys(Code::kS300, "flock", path, errno);
  }
  return fd;
}

Result<ImageLease> Store::Lease(const std::string& digest) const {
  SKIFF_ASSIGN_OR_RETURN(UniqueFd fd, LeaseFd(digest, LOCK_SH));
  // gc and rm delete only under an exclusive lease: with ours held, a
  // complete entry stays complete until it is released.
  if (!Read(digest)) return Platform("sandbox", "image " + digest + " was removed while starting");
  return ImageLease{digest, std::move(fd)};
}

bool Store::InUse(const std::string& digest) const {
  auto fd = LeaseFd(digest, LOCK_EX | LOCK_NB);
  return fd.ok() && !*fd;
}

Result<uint64_t> Store::DeleteEntry(const std::string& digest) const {
  std::string dir = EntryDir(digest);
  // Rename first so a half-removed entry is never seen as an image.
  std::string doomed = root_ + "/tmp/gc." + digest + "." + RandomHex(4);
  if (::rename(dir.c_str(), doomed.c_str()) != 0) {
    if (errno == ENOENT) return uint64_t{0};
    return Error::Sys(Code::kS300, "rename", dir, errno);
  }
  uint64_t bytes = TreeBytes(doomed);
  SKIFF_RETURN_IF_ERROR(RemoveTree(doomed));
  return bytes;
}

Result<GcReport> Store::Gc() const {
  GcReport report;
  std::set<std::string> referenced;
  for (const auto& name : CurrentNames()) {
    if (auto d = Current(name)) referenced.insert(*d);
  }
  std::error_code ec;
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(root_ + "/store", ec)) {
    entries.push_back(e.path().filename().string());
  }
  for (const auto& digest : entries) {
    if (referenced.count(digest)) continue;
    if (!IsHexDigest(digest)) continue;
    // Holding the lock keeps a concurrent build or block-image build out.
    SKIFF_ASSIGN_OR_RETURN(UniqueFd lock, Lock(digest));
    // A running sandbox (of any process) holds a shared lease: keep it.
    SKIFF_ASSIGN_OR_RETURN(UniqueFd lease, LeaseFd(digest, LOCK_EX | LOCK_NB));
    if (!lease) {
      report.kept_in_use.push_back(digest);
      continue;
    }
    SKIFF_ASSIGN_OR_RETURN(uint64_t bytes, DeleteEntry(digest));
    report.bytes_freed += bytes;
    report.removed.push_back(digest);
  }
  std::vector<std::string> temps;
  for (const auto& e : fs::directory_iterator(root_ + "/tmp", ec)) {
    temps.push_back(e.path().filename().string());
  }
  for (const auto& t : temps) {
    std::string digest = t.substr(0, t.find('.'));
    if (t.starts_with("gc.")) digest = t.substr(3, 64);
    if (!IsHexDigest(digest)) continue;
    std::string lock_path = root_ + "/locks/" + digest + ".lock";
    UniqueFd fd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) continue;
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // a builder is at work
    std::string path = root_ + "/tmp/" + t;
    report.bytes_freed += TreeBytes(path);
    SKIFF_RETURN_IF_ERROR(RemoveTree(path));
    report.removed.push_back("tmp/" + t);
  }
  return report;
}

Result<GcReport> Store::Remove(const std::string& name) const {
  if (!ValidCatalogName(name)) return InvalidRequest("invalid image name '" + name + "'");
  auto digest = Current(name);
  if (!digest) return Error(Code::kS101, "image '" + name + "' is not installed");
  SKIFF_ASSIGN_OR_RETURN(UniqueFd lock, Lock(*digest));
  SKIFF_ASSIGN_OR_RETURN(UniqueFd lease, LeaseFd(*digest, LOCK_EX | LOCK_NB));
  if (!lease) {
    return Platform("sandbox", "image '" + name + "' (sha256:" + digest->substr(0, 12) +
                                   ") is in use by a running sandbox; stop the sandboxes "
                                   "started from it, then remove it");
  }
  // Repointed since we looked: the name no longer means this entry.
  if (Current(name) != digest) {
    return Platform("sandbox", "image '" + name + "' changed while removing it; try again");
  }
  SKIFF_RETURN_IF_ERROR(RemoveCurrent(name));
  GcReport report;
  for (const auto& other : CurrentNames()) {
    if (Current(other) == digest) return report;  // still someone's image
  }
  SKIFF_ASSIGN_OR_RETURN(uint64_t bytes, DeleteEntry(*digest));
  report.bytes_freed = bytes;
  report.removed.push_back(*digest);
  return report;
}

uint64_t TreeBytes(const std::string& path) {
  uint64_t total = 0;
  std::error_code ec;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return 0;
  total += static_cast<uint64_t>(st.st_blocks) * 512;
  if (!S_ISDIR(st.st_mode)) return total;
  for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (::lstat(it->path().c_str(), &st) == 0) {
      total += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  return total;
}

Status RunLogged(const std::vector<std::string>& argv, const std::function<void(const std::string&)>& on_line,
                 const std::vector<std::string>& extra_env) {
  if (argv.empty()) return InvalidRequest("empty command");
  std::optional<std::string> found = FindExecutable(argv[0]);
  if (!found) return Platform("sandbox", argv[0] + " not found in PATH");
  const std::string& exe = *found;
  // Everything the child needs is prepared before fork.
  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) env_store.emplace_back(*e);
  for (const auto& e : extra_env) env_store.push_back(e);
  std::vector<char*> cenv;
  cenv.reserve(env_store.size() + 1);
  for (auto& e : env_store) cenv.push_back(e.data());
  cenv.push_back(nullptr);

  SKIFF_ASSIGN_OR_RETURN(FdPair out, MakePipe(O_CLOEXEC));
  UniqueFd rd = std::move(out.first), wr = std::move(out.second);
  SKIFF_ASSIGN_OR_RETURN(ChildReportPipe report, ChildReportPipe::Create());
  const int out_fd = wr.get(), report_fd = report.write_fd();
  pid_t pid = ::fork();
  if (pid < 0) return Error::Sys(Code::kS300, "fork", argv[0], errno);
  if (pid == 0) {
    // Child: async-signal-safe calls only; a failure is reported through
    // `report` (base/child_report.h).
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull < 0) ReportChildFailure(report_fd, errno, "open", "/dev/null");
    if (::dup2(devnull, 0) < 0) ReportChildFailure(report_fd, errno, "dup2", "stdin");
    if (::dup2(out_fd, 1) < 0 || ::dup2(out_fd, 2) < 0)
      ReportChildFailure(report_fd, errno, "dup2", "output");
    // No other descriptor of this process (sockets, locks) reaches the tool;
    // the report pipe is close-on-exec.
    if (report_fd > 3) ::syscall(SYS_close_range, 3u, static_cast<unsigned>(report_fd - 1), 0u);
    ::syscall(SYS_close_range, static_cast<unsigned>(report_fd + 1), ~0u, 0u);
    ::execve(exe.c_str(), cargv.data(), cenv.data());
    ReportChildFailure(report_fd, errno, "execve", exe.c_str());
  }
  wr.reset();
  auto proc = Process::Open(pid);
  if (Status st = report.Read(argv[0]); !st.ok()) {
    if (proc.ok()) {
      (void)proc->Wait(std::nullopt);
    } else {
      int ws;
      while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
      }
    }
    return st;
  }
  std::deque<std::string> tail;
  std::string pending;
  char buf[4096];
  auto emit = [&](const std::string& line) {
    if (on_line) on_line(line);
    tail.push_back(line);
    if (tail.size() > 8) tail.pop_front();
  };
  for (;;) {
    ssize_t n = ::read(rd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = pending.find_first_of("\n\r")) != std::string::npos) {
      std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      if (!line.empty()) emit(line);
    }
  }
  if (!pending.empty()) emit(pending);
  int status = 0;
  if (proc.ok()) {
    auto w = proc->Wait(std::nullopt);
    if (!w.ok()) return std::move(w).error();
    status = w->value_or(0);
  } else {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return OkStatus();
  std::string why = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                      : "killed by signal " + std::to_string(WTERMSIG(status));
  std::string t;
  for (const auto& l : tail) t += (t.empty() ? "" : " | ") + l;
  return Platform("sandbox", argv[0] + " failed (" + why + "): " + t);
}

}  // namespace skiff::images
