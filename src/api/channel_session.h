// One side (reader or writer) of a data channel over WebSocket (docs/api.md#enginechannelscreate),
// with backpressure: a frame is read from the writer only once the channel
// has room, and frames go to the reader one at a time.
#pragma once

#include <memory>
#include <string>

#include "api/channels.h"
#include "api/ws_session.h"

namespace skiff::api {

// A data channel side (docs/api.md#enginechannelscreate).
template <class Protocol>
class ChannelSession : public WsBase<Protocol> {
  using Base = WsBase<Protocol>;

 public:
  ChannelSession(Server::Impl& srv, typename Base::Stream&& s, std::shared_ptr<Channel> ch, bool writer)
      : Base(srv, std::move(s)), ch_(std::move(ch)), writer_(writer) {
    // One WebSocket frame per channel frame (docs/api.md#sandboxfsread: binary frames of at
    // most 64 KiB); Beast would otherwise split them into 4 KiB fragments.
    this->ws_.auto_fragment(false);
    if (writer_) {
      // End of stream is the writer's close frame (docs/api.md#enginechannelscreate). The read that sees
      // it completes only after Beast's server teardown, i.e. once the peer
      // has also closed its TCP connection, which a client may not do for a
      // long time (or until the close-handshake timeout): end the stream as
      // soon as the close frame arrives. All earlier messages were pushed
      // already, since a message is read only after the previous one fit.
      this->ws_.control_callback([this](websocket::frame_type kind, beast::string_view) {
        if (kind == websocket::frame_type::close && !ended_) {
          ended_ = true;
          ch_->CloseWrite();
        }
      });
    }
  }
  ~ChannelSession() override {
    if (writer_) {
      if (!ended_) ch_->Abort("writer went away without closing");
    } else {
      ch_->ReaderGone();
    }
  }

 private:
  std::shared_ptr<ChannelSession> Self() {
    return std::static_pointer_cast<ChannelSession>(this->shared_from_this());
  }
  void OnOpen() override {
    if (writer_) {
      ReadFromWriter();
    } else {
      DrainReader();
      Pump();
    }
  }

  // Writer side: a frame is read only once the previous one found room.
  void ReadFromWriter() {
    auto self = Self();
    this->ws_.async_read(this->in_, [self](beast::error_code ec, size_t) {
      if (ec) {
        if (self->ended_) return;  // the close frame already ended the stream
        if (ec == websocket::error::closed) {
          self->ended_ = true;
          self->ch_->CloseWrite();
        } else {
          self->ch_->Abort("writer connection failed: " + ec.message());
        }
        return;
      }
      Frame f{self->ws_.got_binary(), beast::buffers_to_string(self->in_.data())};
      self->in_.consume(self->in_.size());
      self->PushFrame(std::move(f));
    });
  }
  void PushFrame(Frame f) {
    switch (ch_->TryPush(std::move(f))) {
      case Channel::Push::kOk:
        ReadFromWriter();
        return;
      case Channel::Push::kClosed:
        ended_ = true;
        this->Close(websocket::close_code::going_away);
        return;
      case Channel::Push::kFull: {
        auto self = Self();
        // NOLINTNEXTLINE(bugprone-use-after-move): TryPush leaves `f` untouched on kFull (channels.h).
        auto held = std::make_shared<Frame>(std::move(f));
        ch_->OnWritable([self, held]() {
          net::post(self->ws_.get_executor(), [self, held]() { self->PushFrame(std::move(*held)); });
        });
        return;
      }
    }
  }

  // Reader side: frames from the channel go out in order; a concurrent
  // read notices the peer leaving (and answers its control frames).
  void DrainReader() {
    auto self = Self();
    this->ws_.async_read(this->in_, [self](beast::error_code ec, size_t) {
      if (ec) {
        self->ch_->ReaderGone();
        return;
      }
      self->in_.consume(self->in_.size());
      self->DrainReader();
    });
  }
  void Pump() {
    if (this->closed_ || this->writing_) return;
    Frame f;
    switch (ch_->TryPop(&f)) {
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
        ch_->OnReadable([self]() { net::post(self->ws_.get_executor(), [self]() { self->Pump(); }); });
        return;
      }
    }
  }
  void OnWritten() override {
    if (!writer_ && this->out_.size() <= 1) {
      auto self = Self();
      net::post(this->ws_.get_executor(), [self]() { self->Pump(); });
    }
  }

  std::shared_ptr<Channel> ch_;
  bool writer_;
  bool ended_ = false;
};

}  // namespace skiff::api
