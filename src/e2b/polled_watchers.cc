#include "e2b/polled_watchers.h"

#include <condition_variable>
#include <optional>

#include "base/thread.h"
#include "e2b/watch_event.h"

namespace skiff::e2b {

namespace {

using nlohmann::json;

// What the watch's thread tells Create: the watch is set, or it failed.
struct Setup {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Status> outcome;

  void Settle(Status st) {
    std::lock_guard<std::mutex> lk(mu);
    if (outcome) return;
    outcome = std::move(st);
    cv.notify_all();
  }
  Status Wait() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return outcome.has_value(); });
    return *outcome;
  }
};

// The sink of one watcher's fs.watch: its events into the table.
class TableSink final : public FsWatchSink {
 public:
  TableSink(SandboxService& svc, WatcherTable& table, std::string sandbox_id, std::string id, std::string dir,
            bool include_entry, Setup& setup)
      : svc_(svc),
        table_(table),
        sandbox_id_(std::move(sandbox_id)),
        id_(std::move(id)),
        dir_(std::move(dir)),
        include_entry_(include_entry),
        setup_(setup) {}

  bool OnStart() override {
    setup_.Settle(OkStatus());
    return table_.Wanted(id_);
  }
  bool OnEvent(const proto::FsWatchEvent& e) override {
    if (!table_.Wanted(id_)) return false;
    return table_.Push(id_, FilesystemEvent(svc_, sandbox_id_, dir_, include_entry_, e));
  }
  bool Wanted() override { return table_.Wanted(id_); }

 private:
  SandboxService& svc_;
  WatcherTable& table_;
  std::string sandbox_id_, id_, dir_;
  bool include_entry_;
  Setup& setup_;
};

}  // namespace

PolledWatchers::~PolledWatchers() {
  table_.RemoveAll();  // every watch's Wanted() now says no
  std::map<std::string, Runner> runners;
  {
    std::lock_guard<std::mutex> lk(mu_);
    runners.swap(runners_);
  }
  for (auto& [id, r] : runners)
    if (r.thread.joinable()) r.thread.join();
}

Result<std::string> PolledWatchers::Create(const std::string& sandbox_id, const proto::FsWatchRequest& req,
                                           bool include_entry, int64_t now_ms) {
  Reap();
  SKIFF_ASSIGN_OR_RETURN(std::string id, table_.Add(sandbox_id, now_ms));
  auto setup = std::make_shared<Setup>();
  auto done = std::make_shared<std::atomic<bool>>(false);
  auto t = StartThread("e2b watcher", [this, sandbox_id, id, req, include_entry, setup, done] {
    TableSink sink(svc_, table_, sandbox_id, id, req.path, include_entry, *setup);
    Status st = svc_.FsWatch(sandbox_id, req, sink);
    // Before its start: the watch never was (Create answers the error).
    if (st.ok()) {
      setup->Settle(Error(Code::kS211, "file not found: directory vanished: " + req.path));
    } else {
      setup->Settle(st);
    }
    table_.End(id, st);
    done->store(true);
  });
  if (!t.ok()) {
    table_.Remove(sandbox_id, id);
    return t.error();
  }
  Status set = setup->Wait();
  if (!set.ok()) {
    table_.Remove(sandbox_id, id);
    t->join();
    return set.error();
  }
  std::lock_guard<std::mutex> lk(mu_);
  runners_[id] = Runner{std::move(*t), done};
  return id;
}

Result<std::vector<json>> PolledWatchers::Events(const std::string& sandbox_id, const std::string& id,
                                                 int64_t now_ms) {
  return table_.Take(sandbox_id, id, now_ms);
}

Status PolledWatchers::Remove(const std::string& sandbox_id, const std::string& id) {
  if (!table_.Remove(sandbox_id, id))
    return Error(Code::kS211, "file not found: watcher with id " + id.substr(0, 64) + " not found");
  return OkStatus();
}

void PolledWatchers::RemoveSandbox(const std::string& sandbox_id) { table_.RemoveSandbox(sandbox_id); }

void PolledWatchers::Expire(int64_t now_ms) {
  table_.Expire(now_ms);
  Reap();
}

void PolledWatchers::Reap() {
  std::vector<std::thread> finished;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = runners_.begin(); it != runners_.end();) {
      if (it->second.done->load()) {
        finished.push_back(std::move(it->second.thread));
        it = runners_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& t : finished)
    if (t.joinable()) t.join();
}

}  // namespace skiff::e2b
