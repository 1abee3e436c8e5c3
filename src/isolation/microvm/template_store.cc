#include "isolation/microvm/template_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <utility>

#include "base/file_io.h"
#include "base/scoped_dir.h"
#include "isolation/microvm/vm_launch.h"

namespace skiff::microvm {
namespace {

void Flock(int fd, int op) {
  while (::flock(fd, op) != 0 && errno == EINTR) {
  }
}

bool HasState(const std::string& dir) { return ::access((dir + "/state").c_str(), R_OK) == 0; }

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Result<TemplateLock> TemplateLock::Open(const std::string& root, const std::string& key) {
  std::string path = root + "/" + key + ".lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) return Error::Sys(Code::kS300, "open", path, errno);
  return TemplateLock(std::move(fd));
}

void TemplateLock::LockExclusive() { Flock(fd_.get(), LOCK_EX); }
void TemplateLock::LockShared() { Flock(fd_.get(), LOCK_SH); }
bool TemplateLock::TryLockExclusive() { return ::flock(fd_.get(), LOCK_EX | LOCK_NB) == 0; }
void TemplateLock::Unlock() { Flock(fd_.get(), LOCK_UN); }

void TemplateLease::Discard() {
  lock_.Unlock();
  if (lock_.TryLockExclusive()) RemoveTreeLogged(dir_);
  lock_.Unlock();
}

Result<TemplateLease> TemplateStore::Acquire(const std::string& key, const BuildFn& build, bool* built) {
  if (built != nullptr) *built = false;
  SKIFF_RETURN_IF_ERROR(MakeDirs(root_, 0700));
  std::string dir = Dir(key);
  SKIFF_ASSIGN_OR_RETURN(TemplateLock lock, TemplateLock::Open(root_, key));
  if (!HasState(dir)) {
    lock.LockExclusive();
    if (!HasState(dir)) {  // nobody built it while we waited
      std::string tmp = dir + ".tmp" + std::to_string(::getpid());
      RemoveTreeLogged(tmp);
      if (::mkdir(tmp.c_str(), 0700) != 0) return Error::Sys(Code::kS300, "mkdir", tmp, errno);
      StateDir tmp_dir(tmp);  // removed unless renamed into place
      SKIFF_RETURN_IF_ERROR(build(tmp));
      if (!HasState(tmp)) return Platform("snapshot", "the template build wrote no state");
      if (::rename(tmp.c_str(), dir.c_str()) != 0) return Error::Sys(Code::kS300, "rename", dir, errno);
      tmp_dir.Release();
      if (built != nullptr) *built = true;
      Prune(key);
    }
  }
  lock.LockShared();  // from exclusive: converted without a window
  return TemplateLease(std::move(lock), dir);
}

std::vector<std::string> TemplateStore::List() const {
  std::vector<std::string> keys;
  if (auto d = ScopedDir::Open(root_); d.ok()) {
    while (const dirent* e = d->Next()) {
      std::string n = e->d_name;
      if (n.size() > 2 && n.find('.') == std::string::npos && HasState(root_ + "/" + n)) keys.push_back(n);
    }
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

void TemplateStore::Prune(const std::string& keep) const {
  std::vector<std::pair<int64_t, std::string>> dirs;
  std::vector<std::string> junk;
  {
    Result<ScopedDir> d = ScopedDir::Open(root_);
    if (!d.ok()) return;
    while (const dirent* e = d->Next()) {
      std::string n = e->d_name;
      if (n.size() < 3) continue;
      if (n.find(".tmp") != std::string::npos) {
        junk.push_back(n);
        continue;
      }
      if (EndsWith(n, ".lock")) continue;
      struct stat st {};
      if (::stat((root_ + "/" + n + "/state").c_str(), &st) != 0) {
        junk.push_back(n);
        continue;
      }
      dirs.push_back({int64_t{st.st_atim.tv_sec} * 1000000000 + st.st_atim.tv_nsec, n});
    }
  }
  std::sort(dirs.rbegin(), dirs.rend());
  for (size_t i = max_templates_; i < dirs.size(); i++) junk.push_back(dirs[i].second);
  for (const auto& n : junk) {
    std::string key = n.substr(0, n.find('.'));
    if (key == keep) continue;
    Result<TemplateLock> lock = TemplateLock::Open(root_, key);
    if (!lock.ok() || !lock->TryLockExclusive()) continue;  // busy
    RemoveTreeLogged(root_ + "/" + n);
    if (n == key) ::unlink((root_ + "/" + key + ".lock").c_str());
  }
}

void TemplateStore::Touch(int fd) { ::futimens(fd, nullptr); }

}  // namespace skiff::microvm
