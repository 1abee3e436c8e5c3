#include "sandbox/snapshot_store.h"

#include <sys/stat.h>

#include <algorithm>

#include "base/file_io.h"
#include "base/fs_util.h"
#include "base/log.h"
#include "base/scoped_dir.h"
#include "base/text.h"

namespace skiff {
namespace {

using nlohmann::json;

constexpr const char* kRecord = "record.json";

Error NotFound(const std::string& what) { return Error(Code::kS007, "snapshot " + what + " not found"); }

}  // namespace

void SnapshotStore::Load() {
  std::lock_guard<std::mutex> lk(mu_);
  Result<ScopedDir> dir = ScopedDir::Open(root_);
  if (!dir.ok()) return;  // none yet: Begin creates the directory
  (void)::chmod(root_.c_str(), 0700);
  std::vector<std::string> remove;
  while (const dirent* e = dir->Next()) {
    std::string id = e->d_name;
    Result<std::string> text = ReadFile(Dir(id) + "/" + kRecord);
    Result<SnapshotRecord> r = text.ok() ? SnapshotRecord::FromRecordJson(json::parse(*text, nullptr, false))
                                         : Result<SnapshotRecord>(text.error());
    if (!r.ok() || r->snapshot_id != id || (r->internal && !r->sandbox)) {
      remove.push_back(id);  // unfinished, foreign, or a fork's (its sandboxes are gone)
      continue;
    }
    records_[id] = std::move(r).value();
  }
  for (const std::string& id : remove) {
    if (Status st = RemoveTree(Dir(id)); !st.ok()) SKIFF_LOG(Warn) << "snapshots: " << st.error().message();
  }
  if (!records_.empty()) SKIFF_LOG(Info) << "snapshots: " << records_.size() << " kept in " << root_;
}

std::vector<SnapshotRecord> SnapshotStore::Hibernations() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<SnapshotRecord> out;
  for (const auto& [id, r] : records_)
    if (r.sandbox) out.push_back(r);
  std::sort(out.begin(), out.end(), [](const SnapshotRecord& a, const SnapshotRecord& b) {
    return a.created_unix_ms != b.created_unix_ms ? a.created_unix_ms < b.created_unix_ms
                                                  : a.snapshot_id < b.snapshot_id;
  });
  return out;
}

Result<SnapshotRecord> SnapshotStore::Publish(const std::string& id, const std::string& name) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = records_.find(id);
  if (it == records_.end()) return NotFound(id);
  SnapshotRecord r = it->second;
  r.internal = false;
  r.sandbox.reset();
  r.name = name;
  for (const auto& [rid, other] : records_)
    if (rid != id && !other.internal && other.name == name) r.name.clear();  // taken: unnamed
  SKIFF_RETURN_IF_ERROR(WriteFileAtomic(Dir(id) + "/" + kRecord, r.ToRecordJson().dump() + "\n", 0600));
  it->second = r;
  return r;
}

void SnapshotStore::Close() {
  std::lock_guard<std::mutex> lk(mu_);
  closed_ = true;
}

uint64_t SnapshotStore::used_bytes() const {
  std::lock_guard<std::mutex> lk(mu_);
  uint64_t n = 0;
  for (const auto& [id, r] : records_) n += r.size_bytes;
  return n;
}

Result<SnapshotStore::Pending> SnapshotStore::Begin(const std::string& name, bool internal) {
  std::lock_guard<std::mutex> lk(mu_);
  size_t listed = 0;
  uint64_t used = 0;
  for (const auto& [id, r] : records_) {
    if (!name.empty() && r.name == name)
      return InvalidRequest("field 'name': a snapshot named '" + name + "' exists");
    if (!r.internal) listed++;
    used += r.size_bytes;
  }
  for (const auto& [id, n] : pending_)
    if (!name.empty() && n == name)
      return InvalidRequest("field 'name': a snapshot named '" + name + "' is being saved");
  if (!internal && listed + pending_.size() >= max_count_)
    return Error(Code::kS400, "resource limit exceeded: snapshot_max_count=" + std::to_string(max_count_) +
                                  " snapshots exist; delete one with sandbox::snapshot::delete");
  if (used >= max_bytes_)
    return Error(Code::kS400, "resource limit exceeded: snapshots take " + std::to_string(used >> 20) +
                                  " MiB of snapshot_max_bytes=" + std::to_string(max_bytes_ >> 20) + " MiB");
  SKIFF_RETURN_IF_ERROR(MakeDirs(root_, 0700));
  Pending p;
  p.id = NewUuid();
  p.dir = Dir(p.id);
  p.room = max_bytes_ - used;
  if (::mkdir(p.dir.c_str(), 0700) != 0) return Error::Sys(Code::kS300, "mkdir", p.dir, errno);
  pending_[p.id] = name;
  return p;
}

void SnapshotStore::Abort(const Pending& p) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    pending_.erase(p.id);
  }
  if (Status st = RemoveTree(p.dir); !st.ok()) SKIFF_LOG(Warn) << "snapshots: " << st.error().message();
}

Result<SnapshotRecord> SnapshotStore::Commit(const Pending& p, SnapshotRecord record) {
  record.snapshot_id = p.id;
  std::string text = record.ToRecordJson().dump() + "\n";
  record.size_bytes += text.size();
  text = record.ToRecordJson().dump() + "\n";
  {
    std::lock_guard<std::mutex> lk(mu_);
    uint64_t used = 0;
    for (const auto& [id, r] : records_) used += r.size_bytes;
    // An internal one was streamed against the room left (Begin): a
    // hibernated sandbox's state is never refused after its VMM has gone.
    if (!record.internal && used + record.size_bytes > max_bytes_) {
      pending_.erase(p.id);
      (void)RemoveTree(p.dir);
      return Error(Code::kS400,
                   "resource limit exceeded: this snapshot (" + std::to_string(record.size_bytes >> 20) +
                       " MiB) would exceed snapshot_max_bytes=" + std::to_string(max_bytes_ >> 20) + " MiB");
    }
  }
  // Written last: a directory without it is an unfinished save.
  if (Status st = WriteFileAtomic(p.dir + "/" + kRecord, text, 0600); !st.ok()) {
    Abort(p);
    return std::move(st).error();
  }
  std::lock_guard<std::mutex> lk(mu_);
  pending_.erase(p.id);
  records_[p.id] = record;
  return record;
}

Result<SnapshotRecord> SnapshotStore::Get(const std::string& id_or_name) const {
  std::lock_guard<std::mutex> lk(mu_);
  if (auto it = records_.find(id_or_name); it != records_.end()) return it->second;
  if (!id_or_name.empty())
    for (const auto& [id, r] : records_)
      if (!r.internal && r.name == id_or_name) return r;
  return NotFound(id_or_name);
}

std::vector<SnapshotRecord> SnapshotStore::List() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<SnapshotRecord> out;
  for (const auto& [id, r] : records_)
    if (!r.internal) out.push_back(r);
  std::sort(out.begin(), out.end(), [](const SnapshotRecord& a, const SnapshotRecord& b) {
    return a.created_unix_ms != b.created_unix_ms ? a.created_unix_ms < b.created_unix_ms
                                                  : a.snapshot_id < b.snapshot_id;
  });
  return out;
}

Status SnapshotStore::Delete(const std::string& id_or_name) {
  std::lock_guard<std::mutex> lk(mu_);
  std::string id;
  if (auto it = records_.find(id_or_name); it != records_.end() && !it->second.internal) {
    id = it->first;
  } else {
    for (const auto& [rid, r] : records_)
      if (!r.internal && !id_or_name.empty() && r.name == id_or_name) id = rid;
  }
  if (id.empty()) return NotFound(id_or_name);
  if (auto u = users_.find(id); u != users_.end() && !u->second.empty())
    return Error(Code::kS008, "snapshot " + id + " is in use by sandbox " + *u->second.begin());
  RemoveLocked(id);
  return OkStatus();
}

void SnapshotStore::RemoveLocked(const std::string& id) {
  records_.erase(id);
  users_.erase(id);
  // The record goes first: a removal cut short leaves an unfinished save.
  ::unlink((Dir(id) + "/" + kRecord).c_str());
  if (Status st = RemoveTree(Dir(id)); !st.ok()) SKIFF_LOG(Warn) << "snapshots: " << st.error().message();
}

void SnapshotStore::Use(const std::string& id, const std::string& sandbox_id) {
  std::lock_guard<std::mutex> lk(mu_);
  users_[id].insert(sandbox_id);
}

void SnapshotStore::Unuse(const std::string& id, const std::string& sandbox_id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto u = users_.find(id);
  if (u == users_.end()) return;
  u->second.erase(sandbox_id);
  if (!u->second.empty()) return;
  users_.erase(u);
  if (auto r = records_.find(id); r != records_.end() && r->second.internal) {
    if (closed_ && r->second.sandbox) return;  // a hibernation stays for the next daemon
    RemoveLocked(id);
  }
}

}  // namespace skiff
