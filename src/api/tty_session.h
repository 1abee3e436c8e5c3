// A live process attached over WebSocket
// (GET /v1/sandboxes/{id}/processes/{pid}/tty, docs/api.md#process-terminal):
// binary messages from the client are the process's input (keystrokes, for a
// PTY), binary messages to it are the process's output from `from` on (so a
// reconnect replays what it missed), and text messages carry control as JSON:
//
//   client -> skiffd  {"type":"resize","rows":R,"cols":C}
//   skiffd -> client  {"type":"start","from":N}      output starts at offset N
//                     {"type":"gap","from":N,"to":M} bytes lost to the ring
//                     {"type":"exit","process":{…}}   the process ended; then close
//                     {"type":"error","code":…,"message":…}
//
// Two pool threads on the sandbox's stream lane move the bytes (one output
// stream, one input stream to the agent), each through a bounded channel,
// so neither a slow client nor a fast typist makes the daemon buffer more
// than a few frames. Closing the WebSocket detaches; the process goes on.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "api/channels.h"
#include "api/ws_session.h"
#include "base/text.h"
#include "functions/errors.h"
#include "protocol/process_call.h"

namespace skiff::api {

template <class Protocol>
class TtySession : public WsBase<Protocol> {
  using Base = WsBase<Protocol>;

 public:
  TtySession(Server::Impl& srv, typename Base::Stream&& s, SandboxService& caller, std::string sandbox_id,
             int64_t pid, int64_t from)
      : Base(srv, std::move(s)),
        caller_(caller),
        id_(std::move(sandbox_id)),
        pid_(pid),
        from_(from),
        screen_(std::make_shared<Channel>(16)),
        keys_(std::make_shared<Channel>(16)) {
    this->ws_.auto_fragment(false);
  }
  ~TtySession() override {
    screen_->ReaderGone();
    keys_->CloseWrite();
  }

 private:
  std::shared_ptr<TtySession> Self() {
    return std::static_pointer_cast<TtySession>(this->shared_from_this());
  }

  void OnOpen() override {
    StartOutput();
    StartInput();
    Read();
    Pump();
  }

  // Output: the process's stdout (a PTY's screen) from `from_`, followed.
  void StartOutput() {
    auto out = screen_;
    SandboxService* caller = &caller_;
    std::string id = id_, docs = this->srv_.config.docs_base;
    proto::ProcOutputRequest req{pid_, from_, from_, true};
    Status queued = this->srv_.Dispatch(CallTarget{id, false, true}, caller_, [out, caller, id, req, docs]() {
      struct Sink final : ProcessOutputSink {
        std::shared_ptr<Channel> ch;
        bool Text(const json& j) { return ch->PushBlocking(Frame{false, Dump(j)}).ok(); }
        bool OnStart(int64_t out_from, int64_t) override {
          return Text({{"type", "start"}, {"from", out_from}});
        }
        bool OnData(uint8_t channel, int64_t, std::string_view bytes) override {
          (void)channel;  // a PTY writes only stdout; a plain process's stderr is shown too
          return ch->PushBlocking(Frame{true, std::string(bytes)}).ok();
        }
        bool OnGap(uint8_t, int64_t from, int64_t to) override {
          return Text({{"type", "gap"}, {"from", from}, {"to", to}});
        }
        bool Wanted() override { return !ch->Finished(); }
      } sink;
      sink.ch = out;
      auto info = caller->ProcessOutput(id, req, sink);
      if (info.ok()) {
        sink.Text({{"type", "exit"}, {"process", info->ToJson()}});
      } else {
        json e = ErrorToWire(info.error(), docs);
        e["type"] = "error";
        sink.Text(e);
      }
      out->CloseWrite();
    });
    if (!queued.ok()) {
      json e = this->srv_.ErrorBody(queued.error());
      e["type"] = "error";
      (void)screen_->TryPush(Frame{false, Dump(e)});
      screen_->CloseWrite();
    }
  }

  // Input: one proc.input stream for the session's keystrokes, ended
  // (without closing the process's stdin) when the client goes.
  void StartInput() {
    auto in = keys_, out = screen_;
    SandboxService* caller = &caller_;
    std::string id = id_, docs = this->srv_.config.docs_base;
    int64_t pid = pid_;
    Status queued =
        this->srv_.Dispatch(CallTarget{id, false, true}, caller_, [in, out, caller, id, pid, docs]() {
          ByteSource source = [in]() -> Result<std::string> {
            for (;;) {
              auto f = in->PopBlocking(std::chrono::seconds(1));
              if (!f.ok()) {
                if (in->Finished()) return std::string();  // the session ended
                continue;                                  // no keystroke for a while
              }
              if (!f->has_value()) return std::string();
              if ((*f)->data.empty()) continue;
              return std::move((*f)->data);
            }
          };
          auto r = caller->ProcessInput(id, proto::ProcInputRequest{pid, false}, source);
          if (!r.ok()) {
            in->ReaderGone();  // further keystrokes are dropped
            // Input refused (no stdin, the process exited): said once, output goes on.
            json e = ErrorToWire(r.error(), docs);
            e["type"] = "error";
            (void)out->TryPush(Frame{false, Dump(e)});
          }
        });
    if (!queued.ok()) keys_->ReaderGone();
  }

  void Read() {
    auto self = Self();
    this->ws_.async_read(this->in_buf_, [self](beast::error_code ec, size_t) {
      if (ec) {
        self->keys_->CloseWrite();
        self->screen_->ReaderGone();
        return;
      }
      bool binary = self->ws_.got_binary();
      std::string data = beast::buffers_to_string(self->in_buf_.data());
      self->in_buf_.consume(self->in_buf_.size());
      if (!binary) {
        self->Control(data);
        return self->Read();
      }
      self->PushInput(Frame{true, std::move(data)});
    });
  }

  // A keystroke frame is read only once the previous one found room.
  void PushInput(Frame f) {
    switch (keys_->TryPush(std::move(f))) {
      case Channel::Push::kOk:
      case Channel::Push::kClosed:  // input refused: dropped (the error was sent)
        return Read();
      case Channel::Push::kFull: {
        auto self = Self();
        // NOLINTNEXTLINE(bugprone-use-after-move): TryPush leaves `f` untouched on kFull (channels.h).
        auto held = std::make_shared<Frame>(std::move(f));
        keys_->OnWritable([self, held]() {
          net::post(self->ws_.get_executor(), [self, held]() { self->PushInput(std::move(*held)); });
        });
        return;
      }
    }
  }

  void Control(const std::string& text) {
    json j = json::parse(text, nullptr, false);
    if (!j.is_object() || j.value("type", "") != "resize") {
      this->Send(
          Dump({{"type", "error"},
                {"code", "S001"},
                {"message", "invalid request: expected {\"type\":\"resize\",\"rows\":R,\"cols\":C}"}}));
      return;
    }
    auto num = [&](const char* k) -> int {
      if (!j.contains(k) || !j[k].is_number_integer()) return 0;
      int64_t v = j[k].get<int64_t>();
      return v >= 1 && v <= proto::kMaxTermSize ? static_cast<int>(v) : 0;
    };
    proto::TermSize size{num("rows"), num("cols")};
    if (size.rows == 0 || size.cols == 0) {
      this->Send(Dump({{"type", "error"},
                       {"code", "S001"},
                       {"message", "invalid request: rows and cols must be integers from 1 to " +
                                       std::to_string(proto::kMaxTermSize)}}));
      return;
    }
    auto self = Self();
    SandboxService* caller = &caller_;
    std::string id = id_, docs = this->srv_.config.docs_base;
    int64_t pid = pid_;
    (void)this->srv_.Dispatch(CallTarget{id, false, false}, caller_, [self, caller, id, pid, size, docs]() {
      auto r = caller->Process(id, proto::ProcResizeRequest{pid, size});
      if (r.ok()) return;
      json e = ErrorToWire(r.error(), docs);
      e["type"] = "error";
      self->Post(Dump(e));
    });
  }

  void Pump() {
    if (this->closed_ || this->writing_) return;
    Frame f;
    switch (screen_->TryPop(&f)) {
      case Channel::Pop::kFrame:
        this->Send(std::move(f.data), f.binary);
        return;  // OnWritten continues
      case Channel::Pop::kEof:
        this->Close(websocket::close_code::normal);
        return;
      case Channel::Pop::kAborted:
        this->Close(websocket::close_code::internal_error);
        return;
      case Channel::Pop::kEmpty: {
        auto self = Self();
        screen_->OnReadable([self]() { net::post(self->ws_.get_executor(), [self]() { self->Pump(); }); });
        return;
      }
    }
  }
  void OnWritten() override {
    if (this->out_.size() <= 1) {
      auto self = Self();
      net::post(this->ws_.get_executor(), [self]() { self->Pump(); });
    }
  }

  SandboxService& caller_;
  std::string id_;
  int64_t pid_;
  int64_t from_;
  std::shared_ptr<Channel> screen_;  // process output -> client
  std::shared_ptr<Channel> keys_;    // client keystrokes -> process
  beast::flat_buffer in_buf_;
};

}  // namespace skiff::api
