#include "api/engine_channels.h"

#include <chrono>
#include <utility>

#include "api/engine_channel_socket.h"
#include "api/http_util.h"
#include "base/log.h"
#include "base/text.h"

namespace skiff::api {

using nlohmann::json;
using std::chrono::milliseconds;
using Dir = EngineChannelSocket::Dir;

namespace {

// The engine's channel queue (engine_fn create_channel's default) and how
// long each step on the engine may take.
constexpr int kEngineChannelBuffer = 64;
constexpr milliseconds kEngineStep{10000};
// A writer whose bytes nobody takes gives up after the attach deadline.
constexpr milliseconds kWriteWait = std::chrono::duration_cast<milliseconds>(kChannelAttachDeadline);
// How often a quiet writer shows the engine it is there (see the sink).
constexpr milliseconds kQuietProbe{5000};

struct Ref {
  std::string channel_id, access_key;
};

// A channel reference's two strings, or nullopt.
std::optional<Ref> RefOf(const json& r) {
  if (!r.is_object()) return std::nullopt;
  auto id = r.find("channel_id");
  auto key = r.find("access_key");
  if (id == r.end() || key == r.end() || !id->is_string() || !key->is_string()) return std::nullopt;
  return Ref{id->get<std::string>(), key->get<std::string>()};
}

// Counts a writer for as long as it lives.
class WriterSlot {
 public:
  explicit WriterSlot(std::shared_ptr<std::atomic<size_t>> n) : n_(std::move(n)) {}
  WriterSlot(const WriterSlot&) = delete;
  WriterSlot& operator=(const WriterSlot&) = delete;
  ~WriterSlot() { --*n_; }

 private:
  std::shared_ptr<std::atomic<size_t>> n_;
};

}  // namespace

EngineChannels::EngineChannels(EngineLinkOptions link, CreateCall create, BlockingRunner run_blocking)
    : link_(std::move(link)), create_(std::move(create)), run_blocking_(std::move(run_blocking)) {}

Result<json> EngineChannels::CreateReadChannel(Producer producer) {
  if (++*writers_ > kMaxEngineChannelWriters) {
    --*writers_;
    return Error(Code::kS400, "resource limit exceeded: " + std::to_string(kMaxEngineChannelWriters) +
                                  " channels on the engine are being written already; read them first");
  }
  auto slot = std::make_shared<WriterSlot>(writers_);
  iii::CallOutcome o = create_(json{{"buffer_size", kEngineChannelBuffer}}, kEngineStep);
  if (o.kind != iii::CallOutcome::Kind::kResult)
    return Error(Code::kS218,
                 "fs channel aborted: engine::channels::create failed: " +
                     std::string(o.kind == iii::CallOutcome::Kind::kError     ? o.body.dump()
                                 : o.kind == iii::CallOutcome::Kind::kTimeout ? "no answer in time"
                                                                              : "the engine link is down"));
  std::optional<Ref> writer, reader;
  if (o.body.is_object() && o.body.contains("writer") && o.body.contains("reader")) {
    writer = RefOf(o.body["writer"]);
    reader = RefOf(o.body["reader"]);
  }
  if (!writer || !reader)
    return Error(Code::kS218,
                 "fs channel aborted: engine::channels::create answered without two channel "
                 "references");
  SKIFF_ASSIGN_OR_RETURN(
      std::unique_ptr<EngineChannelSocket> socket,
      EngineChannelSocket::Open(link_, writer->channel_id, writer->access_key, Dir::kWrite, kEngineStep));
  // The writer runs off this thread: the caller gets the reference first and
  // reads while it is written (the engine queues kEngineChannelBuffer
  // messages; a small file fits and is done at once).
  std::shared_ptr<EngineChannelSocket> ws(std::move(socket));
  run_blocking_([ws, slot, producer = std::move(producer)]() {
    auto last_sent = std::chrono::steady_clock::now();
    ByteSink sink = [&ws, &last_sent](std::string_view bytes) -> bool {
      if (bytes.empty()) {
        // A liveness probe (function_def.h). The engine finds out that a
        // channel's reader is gone (it left, or the engine swept a channel
        // nobody attached to) only when it next passes a frame on, so a quiet
        // writer (a followed process with nothing to say) sends an empty
        // binary frame now and then: no bytes for a reader, and the engine
        // drops the writer once nobody reads.
        if (!ws->Alive()) return false;
        if (std::chrono::steady_clock::now() - last_sent < kQuietProbe) return true;
        last_sent = std::chrono::steady_clock::now();
        return ws->Write(std::string(), kWriteWait).ok();
      }
      while (!bytes.empty()) {
        size_t n = std::min(bytes.size(), kChannelChunk);
        if (!ws->Write(std::string(bytes.substr(0, n)), kWriteWait).ok()) return false;
        bytes.remove_prefix(n);
      }
      last_sent = std::chrono::steady_clock::now();
      return true;
    };
    Status st = producer(sink);
    if (!st.ok()) {
      // As on skiffd's own channels: a text message saying why, then the end.
      json msg = {{"error", st.error().message()}, {"code", std::string(CodeName(st.error().code()))}};
      (void)ws->Write(Dump(msg), kWriteWait, /*binary=*/false);
    }
    ws->Finish(kEngineStep);
  });
  return json{{"channel_id", reader->channel_id}, {"access_key", reader->access_key}, {"direction", "read"}};
}

Result<ByteSource> EngineChannels::AttachReader(const json& ref) {
  std::optional<Ref> r = RefOf(ref);
  if (!r) return InvalidRequest("content: expected a channel reference");
  SKIFF_ASSIGN_OR_RETURN(
      std::unique_ptr<EngineChannelSocket> socket,
      EngineChannelSocket::Open(link_, r->channel_id, r->access_key, Dir::kRead, kEngineStep));
  std::shared_ptr<EngineChannelSocket> ws(std::move(socket));
  return ByteSource([ws]() -> Result<std::string> {
    while (true) {
      SKIFF_ASSIGN_OR_RETURN(std::optional<EngineChannelSocket::Message> m,
                             ws->Read(std::chrono::duration_cast<milliseconds>(kChannelStall)));
      if (!m) return std::string();                 // end of stream
      if (!m->binary || m->data.empty()) continue;  // messages carry no file bytes
      return std::move(m->data);
    }
  });
}

Result<json> EngineChannels::CreateChannelPair(uint32_t) {
  return InvalidRequest(
      "engine::channels::create is the engine's own function in worker mode; call it there");
}

}  // namespace skiff::api
