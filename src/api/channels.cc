#include "api/channels.h"

#include "api/http_util.h"
#include "base/log.h"
#include "base/text.h"

namespace skiff::api {

// ---------------------------------------------------------------- Channel

void Channel::NotifyLocked(std::unique_lock<std::mutex>& lock, bool readable, bool writable) {
  std::function<void()> r, w;
  if (readable) r = std::move(on_readable_), on_readable_ = nullptr;
  if (writable) w = std::move(on_writable_), on_writable_ = nullptr;
  cv_.notify_all();
  lock.unlock();
  if (r) r();
  if (w) w();
}

Channel::Push Channel::TryPush(Frame&& f) {
  std::unique_lock lock(mu_);
  if (aborted_ || reader_gone_ || eof_) return Push::kClosed;
  if (q_.size() >= capacity_) return Push::kFull;
  q_.push_back(std::move(f));
  NotifyLocked(lock, true, false);
  return Push::kOk;
}

Status Channel::PushBlocking(Frame f, std::chrono::milliseconds stall) {
  std::unique_lock lock(mu_);
  auto ready = [&] { return aborted_ || reader_gone_ || eof_ || q_.size() < capacity_; };
  if (stall.count() > 0) {
    if (!cv_.wait_for(lock, stall, ready)) {
      return Error(Code::kS218, "fs channel aborted: reader stalled");
    }
  } else {
    cv_.wait(lock, ready);
  }
  if (aborted_) return Error(Code::kS216, "fs i/o error: channel aborted: " + abort_reason_);
  if (reader_gone_ || eof_) return Error(Code::kS216, "fs i/o error: channel reader went away");
  q_.push_back(std::move(f));
  NotifyLocked(lock, true, false);
  return OkStatus();
}

void Channel::CloseWrite() {
  std::unique_lock lock(mu_);
  if (eof_ || aborted_) return;
  eof_ = true;
  NotifyLocked(lock, true, true);
}

Channel::Pop Channel::TryPop(Frame* out) {
  std::unique_lock lock(mu_);
  if (!q_.empty()) {
    *out = std::move(q_.front());
    q_.pop_front();
    NotifyLocked(lock, false, true);
    return Pop::kFrame;
  }
  if (aborted_) return Pop::kAborted;
  if (eof_) {
    eof_delivered_ = true;
    return Pop::kEof;
  }
  return Pop::kEmpty;
}

Result<std::optional<Frame>> Channel::PopBlocking(std::chrono::milliseconds stall) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, stall, [&] { return !q_.empty() || eof_ || aborted_; })) {
    return Error(Code::kS218,
                 "fs channel aborted: no data for " + std::to_string(stall.count() / 1000) + " s");
  }
  if (!q_.empty()) {
    Frame f = std::move(q_.front());
    q_.pop_front();
    NotifyLocked(lock, false, true);
    return std::optional<Frame>(std::move(f));
  }
  if (aborted_) return Error(Code::kS218, "fs channel aborted: " + abort_reason_);
  eof_delivered_ = true;
  return std::optional<Frame>();
}

void Channel::ReaderGone() {
  std::unique_lock lock(mu_);
  if (reader_gone_) return;
  reader_gone_ = true;
  q_.clear();
  NotifyLocked(lock, false, true);
}

void Channel::Abort(std::string why) {
  std::unique_lock lock(mu_);
  if (aborted_ || eof_delivered_) return;
  aborted_ = true;
  abort_reason_ = std::move(why);
  NotifyLocked(lock, true, true);
}

void Channel::OnReadable(std::function<void()> cb) {
  std::unique_lock lock(mu_);
  if (!q_.empty() || eof_ || aborted_) {
    lock.unlock();
    cb();
    return;
  }
  on_readable_ = std::move(cb);
}

void Channel::OnWritable(std::function<void()> cb) {
  std::unique_lock lock(mu_);
  if (q_.size() < capacity_ || aborted_ || reader_gone_ || eof_) {
    lock.unlock();
    cb();
    return;
  }
  on_writable_ = std::move(cb);
}

bool Channel::Finished() {
  std::lock_guard lock(mu_);
  return aborted_ || reader_gone_ || eof_delivered_;
}

// ---------------------------------------------------------------- Broker

nlohmann::json Broker::NewEntry(uint32_t buffer, Producer producer, std::string* id_out) {
  Entry e;
  e.channel = std::make_shared<Channel>(buffer);
  e.key = RandomHex(32);
  e.created = std::chrono::steady_clock::now();
  e.producer = std::move(producer);
  if (e.producer) e.writer = true;  // skiffd itself writes fs::read channels
  std::string id = NewUuid();
  nlohmann::json ref = {{"channel_id", id}, {"access_key", e.key}, {"direction", "read"}};
  std::lock_guard lock(mu_);
  channels_.emplace(id, std::move(e));
  if (id_out) *id_out = id;
  return ref;
}

Result<nlohmann::json> Broker::CreateReadChannel(Producer producer) {
  if (!producer) return Error(Code::kS216, "fs i/o error: no producer for read channel");
  return NewEntry(64, std::move(producer), nullptr);
}

Result<nlohmann::json> Broker::CreateChannelPair(uint32_t buffer_size) {
  uint32_t b = std::clamp<uint32_t>(buffer_size, 1, 1024);
  nlohmann::json reader = NewEntry(b, nullptr, nullptr);
  nlohmann::json writer = reader;
  writer["direction"] = "write";
  return nlohmann::json{{"writer", writer}, {"reader", reader}};
}

Result<ByteSource> Broker::AttachReader(const nlohmann::json& ref) {
  if (!ref.is_object() || !ref.contains("channel_id") || !ref["channel_id"].is_string() ||
      !ref.contains("access_key") || !ref["access_key"].is_string()) {
    return InvalidRequest("content: expected a channel reference");
  }
  std::string id = ref["channel_id"].get<std::string>();
  std::string key = ref["access_key"].get<std::string>();
  std::shared_ptr<Channel> ch;
  {
    std::lock_guard lock(mu_);
    auto it = channels_.find(id);
    if (it == channels_.end() || !ConstantTimeEquals(it->second.key, key)) {
      return InvalidRequest("content: unknown channel or wrong access key");
    }
    if (it->second.reader) return InvalidRequest("content: channel reader already attached");
    it->second.reader = true;
    ch = it->second.channel;
  }
  // The guard tells the writer when the consumer is done (success or not),
  // so a WebSocket writer never waits on a reader that left.
  struct Guard {
    explicit Guard(std::shared_ptr<Channel> c) : ch(std::move(c)) {}
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() { ch->ReaderGone(); }
    std::shared_ptr<Channel> ch;
  };
  auto guard = std::make_shared<Guard>(ch);
  ByteSource src = [guard]() -> Result<std::string> {
    while (true) {
      auto r = guard->ch->PopBlocking(kChannelStall);
      if (!r.ok()) return std::move(r).error();
      if (!r->has_value()) return std::string();  // end of stream
      Frame& f = **r;
      if (!f.binary || f.data.empty()) continue;  // messages carry no file bytes
      return std::move(f.data);
    }
  };
  return src;
}

void Broker::StartProducer(std::shared_ptr<Channel> ch, Producer producer) {
  run_blocking_([ch, producer = std::move(producer)]() {
    ByteSink sink = [&ch](std::string_view bytes) -> bool {
      if (bytes.empty()) return !ch->Finished();  // a liveness probe (function_def.h)
      while (!bytes.empty()) {
        size_t n = std::min(bytes.size(), kChannelChunk);
        Frame f{true, std::string(bytes.substr(0, n))};
        if (!ch->PushBlocking(std::move(f)).ok()) return false;
        bytes.remove_prefix(n);
      }
      return true;
    };
    Status st = producer(sink);
    if (!st.ok()) {
      nlohmann::json msg = {{"error", st.error().message()},
                            {"code", std::string(CodeName(st.error().code()))}};
      (void)ch->PushBlocking(Frame{false, Dump(msg)});
    }
    ch->CloseWrite();
  });
}

Broker::Attached Broker::Attach(const std::string& id, const std::string& key, const std::string& dir) {
  Attached out;
  if (dir != "read" && dir != "write") {
    out.http_status = 400;
    return out;
  }
  Producer producer;
  {
    std::lock_guard lock(mu_);
    auto it = channels_.find(id);
    if (it == channels_.end() || !ConstantTimeEquals(it->second.key, key)) {
      out.http_status = 404;
      return out;
    }
    bool& side = dir == "read" ? it->second.reader : it->second.writer;
    if (side) {
      out.http_status = 409;
      return out;
    }
    side = true;
    out.channel = it->second.channel;
    if (dir == "read" && it->second.producer) producer = std::move(it->second.producer);
  }
  if (producer) StartProducer(out.channel, std::move(producer));
  return out;
}

void Broker::Remove(const std::string& id) {
  std::shared_ptr<Channel> ch;
  {
    std::lock_guard lock(mu_);
    auto it = channels_.find(id);
    if (it == channels_.end()) return;
    ch = it->second.channel;
    channels_.erase(it);
  }
  ch->Abort("channel deleted");
}

void Broker::Sweep() {
  auto now = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<Channel>> expired;
  {
    std::lock_guard lock(mu_);
    for (auto it = channels_.begin(); it != channels_.end();) {
      Entry& e = it->second;
      bool both = e.reader && e.writer;
      if (!both && now - e.created > kChannelAttachDeadline) {
        expired.push_back(e.channel);
        it = channels_.erase(it);
      } else if (both && e.channel->Finished()) {
        it = channels_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& ch : expired) ch->Abort("channel expired before both sides attached");
  if (!expired.empty()) {
    SKIFF_LOG(Info) << "channels: expired " << expired.size();
  }
}

size_t Broker::size() {
  std::lock_guard lock(mu_);
  return channels_.size();
}

// ---------------------------------------------------------------- ScopedBroker

Result<nlohmann::json> ScopedBroker::CreateChannelPair(uint32_t buffer_size) {
  auto r = broker_.CreateChannelPair(buffer_size);
  if (r.ok()) {
    std::lock_guard lock(mu_);
    owned_.insert((*r)["reader"]["channel_id"].get<std::string>());
  }
  return r;
}

void ScopedBroker::Release() {
  std::set<std::string> ids;
  {
    std::lock_guard lock(mu_);
    ids.swap(owned_);
  }
  for (const auto& id : ids) broker_.Remove(id);
}

}  // namespace skiff::api
