// envd's Filesystem.WatchDir (docs/e2b.md#filesystem) over skiff's fs.watch:
// a start event once the agent's inotify watch is set, then one
// filesystem event per change (names relative to the watched directory,
// with the entry when asked), keepalives while nothing changes, and the
// end of the stream at Connect-Timeout-Ms, when the directory goes away or
// when the client leaves.
#include <string>

#include "base/text.h"
#include "e2b/api.h"
#include "e2b/connect_envelope.h"
#include "e2b/proto_json.h"
#include "e2b/watch_event.h"

namespace skiff::e2b {

namespace {

using nlohmann::json;

constexpr std::string_view kStreamType = "application/connect+json";

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// A positive integer header (milliseconds or seconds) up to `max`.
std::optional<int64_t> PositiveHeader(const std::string& v, int64_t max) {
  if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  int64_t n = std::stoll(v);
  if (n <= 0 || n > max) return std::nullopt;
  return n;
}

// The WatchDirResponse stream of one request. Its oneof `event` is the
// message's own: {"start": {}}, {"filesystem": ...}, {"keepalive": {}}.
class WatchStream final : public FsWatchSink {
 public:
  WatchStream(SandboxService& svc, std::string sandbox_id, std::string dir, bool include_entry,
              ResponseWriter& out, int64_t keepalive_ms, std::optional<int64_t> deadline_ms)
      : svc_(svc),
        id_(std::move(sandbox_id)),
        dir_(std::move(dir)),
        include_entry_(include_entry),
        out_(out),
        keepalive_ms_(keepalive_ms),
        deadline_ms_(deadline_ms),
        last_ms_(MonotonicMillis()) {}

  bool OnStart() override {
    started_ = true;
    return out_.Start(200, kStreamType, {}) && Event({{"start", json::object()}});
  }
  bool OnEvent(const proto::FsWatchEvent& e) override {
    if (Expired()) return false;
    return Event({{"filesystem", FilesystemEvent(svc_, id_, dir_, include_entry_, e)}});
  }
  bool Wanted() override {
    if (!out_.Alive() || Expired()) return false;
    if (MonotonicMillis() - last_ms_ >= keepalive_ms_) return Event({{"keepalive", json::object()}});
    return true;
  }

  bool started() const { return started_; }
  bool expired() const { return expired_; }

 private:
  bool Event(const json& e) {
    last_ms_ = MonotonicMillis();
    return out_.Write(Envelope(kEnvelopeMessage, Dump(e)));
  }
  bool Expired() {
    if (deadline_ms_ && MonotonicMillis() >= *deadline_ms_) expired_ = true;
    return expired_;
  }

  SandboxService& svc_;
  std::string id_;
  std::string dir_;
  bool include_entry_;
  ResponseWriter& out_;
  int64_t keepalive_ms_;
  std::optional<int64_t> deadline_ms_;
  int64_t last_ms_;
  bool started_ = false;
  bool expired_ = false;
};

}  // namespace

void Api::WatchDirRpc(const Envd& e, const Request& req, const std::string& body, ResponseWriter& out) {
  const std::string& id = e.record.sandbox_id;
  auto end_with = [&](const Error& err) {
    return out.Write(
        EndStream(std::make_pair(std::string(ConnectCodeName(ConnectCodeOf(err))), err.message())));
  };
  // Before the start: the stream is opened to carry the error alone.
  auto fail = [&](const Error& err) {
    if (out.Start(200, kStreamType, {})) end_with(err);
  };
  Result<std::string> text = SingleMessage(body);
  Result<json> msg = text.ok() ? ParseMessage(*text) : Result<json>(text.error());
  if (!msg.ok()) return fail(msg.error());
  auto path = OptString(*msg, "path");
  if (!path.ok()) return fail(path.error());
  if (!*path || (*path)->empty()) return fail(InvalidRequest("path: required"));
  auto recursive = OptBool(*msg, "recursive");
  if (!recursive.ok()) return fail(recursive.error());
  auto include_entry = OptBool(*msg, "includeEntry", "include_entry");
  if (!include_entry.ok()) return fail(include_entry.error());
  // allowNetworkMounts: a sandbox has no network mounts to refuse.
  if (auto nm = OptBool(*msg, "allowNetworkMounts", "allow_network_mounts"); !nm.ok())
    return fail(nm.error());

  proto::FsWatchRequest watch;
  watch.path = e.Resolve(**path);
  watch.recursive = recursive->value_or(false);
  int64_t keepalive_ms = 90000;
  if (auto k = PositiveHeader(req.Header("keepalive-ping-interval"), 3600)) keepalive_ms = *k * 1000;
  std::optional<int64_t> deadline_ms;
  if (auto t = PositiveHeader(req.Header("connect-timeout-ms"), int64_t{1} << 40))
    deadline_ms = MonotonicMillis() + *t;

  WatchStream stream(all_, id, watch.path, include_entry->value_or(false), out, keepalive_ms, deadline_ms);
  Status st = all_.FsWatch(id, watch, stream);
  if (!stream.started()) {
    if (st.ok()) return fail(Error(Code::kS211, "directory vanished: " + watch.path));
    return fail(st.error());
  }
  if (st.ok()) {
    out.Write(EndStream());  // the watched directory went away
    return;
  }
  if (stream.expired()) {
    end_with(Error(Code::kS200, "the watch reached its Connect-Timeout-Ms"));
    return;
  }
  if (!out.Alive()) return;  // the client left: nobody to tell
  Code c = st.error().code();
  // The sandbox went away (killed) or its agent failed: dropped, as envd's
  // streams are when their sandbox dies.
  if (c == Code::kS002 || c == Code::kS004 || c == Code::kS300) return out.Drop();
  end_with(st.error());
}

}  // namespace skiff::e2b
