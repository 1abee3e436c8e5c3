#include "agent/dir_watch.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "agent/fs_request.h"
#include "base/log.h"
#include "protocol/fs_watch_messages.h"

namespace skiff::agent {

namespace {

// What a watched directory reports. IN_EXCL_UNLINK: a file removed while
// open writes nothing more into the watch.
constexpr uint32_t kMask = IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB |
                           IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK;

std::string Join(const std::string& dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  std::string s = dir;
  s.push_back('/');
  s.append(name);
  return s;
}

Error TooMany() {
  return Error(Code::kS216, "fs.watch: more than " + std::to_string(proto::kMaxWatchedDirs) +
                                " directories to watch; watch a smaller tree, or not recursively");
}

}  // namespace

Result<std::unique_ptr<DirWatch>> DirWatch::Begin(const std::string& path, bool recursive) {
  UniqueFd fd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!fd) return FsError(errno, "inotify_init1");
  std::unique_ptr<DirWatch> w(new DirWatch(std::move(fd), recursive));
  w->root_ = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return FsError(errno, path);
  if (!S_ISDIR(st.st_mode)) return Error(Code::kS212, std::string(FsPrefix(Code::kS212)) + path);
  SKIFF_RETURN_IF_ERROR(w->AddOne("", true));
  w->root_wd_ = w->dirs_.begin()->first;
  if (recursive) SKIFF_RETURN_IF_ERROR(w->AddTree(""));
  return w;
}

Status DirWatch::AddOne(const std::string& rel, bool follow) {
  if (dirs_.size() >= proto::kMaxWatchedDirs) return TooMany();
  std::string full = rel.empty() ? root_ : root_ + "/" + rel;
  int wd = ::inotify_add_watch(fd_.get(), full.c_str(), kMask | (follow ? 0 : IN_DONT_FOLLOW));
  if (wd < 0) {
    if (errno == ENOSPC)
      return Error(Code::kS216, "fs.watch: the kernel's limit of inotify watches is reached (" + full + ")");
    return FsError(errno, full);
  }
  dirs_[wd] = rel;
  return OkStatus();
}

Status DirWatch::AddTree(const std::string& rel) {
  std::vector<std::string> to_walk = {rel};
  bool first = true;
  while (!to_walk.empty()) {
    std::string dir = std::move(to_walk.back());
    to_walk.pop_back();
    if (!first) {
      Status st = AddOne(dir, false);
      if (!st.ok()) {
        // Gone, or not a directory any more, since it was listed: its
        // parent reports that.
        if (st.error().code() == Code::kS211 || st.error().code() == Code::kS212) continue;
        return st;
      }
    }
    first = false;
    std::string full = dir.empty() ? root_ : root_ + "/" + dir;
    // The root may be a link to a directory (followed, as its watch is);
    // below it, links are not.
    UniqueFd dfd(::open(full.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | (dir.empty() ? 0 : O_NOFOLLOW)));
    if (!dfd) continue;  // vanished or unreadable: nothing below to watch
    DIR* d = ::fdopendir(dfd.get());
    if (!d) continue;
    (void)dfd.release();  // owned by `d` now
    while (dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      bool is_dir = e->d_type == DT_DIR;
      if (e->d_type == DT_UNKNOWN) {
        struct stat st {};
        is_dir = ::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
      }
      if (!is_dir) continue;
      if (dirs_.size() + to_walk.size() >= proto::kMaxWatchedDirs) {
        ::closedir(d);
        return TooMany();
      }
      to_walk.push_back(Join(dir, e->d_name));
    }
    ::closedir(d);
  }
  return OkStatus();
}

void DirWatch::RemoveTree(const std::string& rel) {
  std::string below = rel + "/";
  for (auto it = dirs_.begin(); it != dirs_.end();) {
    if (it->first != root_wd_ && (it->second == rel || it->second.rfind(below, 0) == 0)) {
      (void)::inotify_rm_watch(fd_.get(), it->first);
      it = dirs_.erase(it);
    } else {
      ++it;
    }
  }
}

Result<bool> DirWatch::Read(std::string& lines) {
  alignas(inotify_event) char buf[64 * 1024];
  ssize_t n = ::read(fd_.get(), buf, sizeof buf);
  if (n < 0) {
    if (errno == EAGAIN || errno == EINTR) return true;
    return FsError(errno, "reading the inotify queue");
  }
  bool over = false;
  for (ssize_t off = 0; off + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
    inotify_event ev{};
    std::memcpy(&ev, buf + off, sizeof ev);
    const char* name_at = buf + off + sizeof(inotify_event);
    off += static_cast<ssize_t>(sizeof(inotify_event) + ev.len);
    if (off > n) break;  // the kernel never splits an event; be safe anyway
    if (ev.mask & IN_Q_OVERFLOW)
      return Error(Code::kS218,
                   "fs.watch: events were lost: more changed than the kernel could queue while they were not "
                   "read; watch again (and stat what matters)");
    if (ev.wd == root_wd_ && (ev.mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED))) {
      over = true;
      continue;
    }
    auto it = dirs_.find(ev.wd);
    if (it == dirs_.end()) continue;  // a directory let go of: its last words
    if (ev.mask & IN_IGNORED) {
      dirs_.erase(it);
      continue;
    }
    size_t name_len = ev.len == 0 ? 0 : ::strnlen(name_at, ev.len);
    // A directory's events about itself: its parent's watch names them.
    if (name_len == 0) continue;
    std::string rel = Join(it->second, std::string_view(name_at, name_len));
    if (rel.size() > proto::kMaxWatchName) {
      SKIFF_LOG(Warn) << "fs.watch: an event for a path longer than " << proto::kMaxWatchName
                      << " bytes below the watched directory is not reported";
      continue;
    }
    proto::FsWatchChange change;
    if (ev.mask & (IN_CREATE | IN_MOVED_TO)) {
      change = proto::FsWatchChange::kCreate;
    } else if (ev.mask & IN_DELETE) {
      change = proto::FsWatchChange::kRemove;
    } else if (ev.mask & IN_MOVED_FROM) {
      change = proto::FsWatchChange::kRename;
    } else if (ev.mask & IN_MODIFY) {
      change = proto::FsWatchChange::kWrite;
    } else if (ev.mask & IN_ATTRIB) {
      change = proto::FsWatchChange::kChmod;
    } else {
      continue;
    }
    if (recursive_ && (ev.mask & IN_ISDIR)) {
      if (ev.mask & (IN_CREATE | IN_MOVED_TO)) {
        Status st = AddOne(rel, false);
        if (st.ok()) st = AddTree(rel);
        if (!st.ok() && st.error().code() != Code::kS211 && st.error().code() != Code::kS212)
          return st.error();
      } else if (ev.mask & IN_MOVED_FROM) {
        RemoveTree(rel);
      }
    }
    lines += proto::FsWatchEvent{std::move(rel), change}.ToJson().dump(
        -1, ' ', false, nlohmann::json::error_handler_t::replace);
    lines.push_back('\n');
  }
  return !over;
}

}  // namespace skiff::agent
