// /otel: the telemetry WebSocket. Accepted; every frame is discarded.
#pragma once

#include <memory>

#include "api/ws_session.h"

namespace skiff::api {

template <class Protocol>
class DiscardSession : public WsBase<Protocol> {
  using Base = WsBase<Protocol>;

 public:
  using Base::Base;

 private:
  void OnOpen() override { Read(); }
  void Read() {
    auto self = std::static_pointer_cast<DiscardSession>(this->shared_from_this());
    this->ws_.async_read(this->in_, [self](beast::error_code ec, size_t) {
      if (ec) return;
      self->in_.consume(self->in_.size());
      self->Read();
    });
  }
};

}  // namespace skiff::api
