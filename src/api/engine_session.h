// The iii engine protocol skiffd serves on "/" (docs/architecture.md#transports-and-their-limits): one
// session per connection, invocations run on the pool, results go back through the codec.
#pragma once

#include <memory>
#include <string>

#include "api/iii_codec.h"
#include "api/ws_session.h"
#include "base/text.h"

namespace skiff::api {

// The iii engine protocol on "/" (docs/architecture.md#transports-and-their-limits).
template <class Protocol>
class EngineSession : public WsBase<Protocol> {
  using Base = WsBase<Protocol>;

 public:
  // `caller`: the service of the key the upgrade presented; every call of
  // the connection runs against it.
  EngineSession(Server::Impl& srv, typename Base::Stream&& s, SandboxService& caller)
      : Base(srv, std::move(s)), caller_(caller), channels_(std::make_shared<ScopedBroker>(srv.broker)) {
    ++srv.metrics.ws_connections;
  }
  ~EngineSession() override {
    --this->srv_.metrics.ws_connections;
    channels_->Release();
  }

 private:
  std::shared_ptr<EngineSession> Self() {
    return std::static_pointer_cast<EngineSession>(this->shared_from_this());
  }

  void OnOpen() override {
    worker_id_ = NewUuid();
    this->Send(iii::WorkerRegistered(worker_id_, NewUuid()));
    Read();
  }

  void Read() {
    auto self = Self();
    this->ws_.async_read(this->in_, [self](beast::error_code ec, size_t) {
      if (ec) {
        if (ec == websocket::error::message_too_big) {
          SKIFF_LOG_LIMITED(Warn) << "ws: frame over 32 MiB; closing with 1009";
        } else if (ec != websocket::error::closed) {
          SKIFF_LOG(Debug) << "ws: read ended: " << ec.message();
        }
        if (self->in_flight_ > 0) {
          SKIFF_LOG_LIMITED(Warn) << "ws: connection gone with " << self->in_flight_
                                  << " invocation(s) in flight; they run to the end, results dropped";
        }
        self->read_ended_ = true;
        self->channels_->Release();
        return;
      }
      std::string msg = beast::buffers_to_string(self->in_.data());
      bool binary = self->ws_.got_binary();
      self->in_.consume(self->in_.size());
      self->Handle(msg, binary);
      if (self->in_flight_ >= kMaxWsInFlight) {
        self->read_paused_ = true;  // resumed by Finished()
        return;
      }
      self->Read();
    });
  }

  // An invocation ended (event-loop thread): send its reply, resume reading.
  void Finished(std::string reply) {
    --in_flight_;
    if (!reply.empty()) this->Send(std::move(reply));
    if (read_paused_ && !read_ended_ && in_flight_ < kMaxWsInFlight / 2) {
      read_paused_ = false;
      Read();
    }
  }

  void Handle(const std::string& msg, bool binary) {
    if (iii::IsTelemetryFrame(msg, binary)) return;
    auto parsed = ParsePayload(msg);
    if (!parsed.ok() || !parsed->is_object()) {
      SKIFF_LOG_LIMITED(Warn) << "ws: ignoring a frame that is not a JSON object (" << msg.size()
                              << " bytes)";
      return;
    }
    json& m = *parsed;
    std::string type = iii::MessageType(m);
    if (type == "ping") {
      this->Send(iii::Pong());
    } else if (type == "invokefunction") {
      Invokefunction(m);
    } else if (type == "registertrigger") {
      this->Send(iii::TriggerRegistrationResult(m));
    } else if (type == "registerfunction" || type == "unregisterfunction" || type == "registertriggertype" ||
               type == "unregistertrigger" || type == "registerservice" || type == "reattach" ||
               type == "invocationresult" || type == "pong") {
      // Accepted and ignored (docs/architecture.md#transports-and-their-limits).
    } else {
      SKIFF_LOG_LIMITED(Warn) << "ws: ignoring a frame of unknown type '" << type.substr(0, 64) << "'";
    }
  }

  void Invokefunction(json& m) {
    auto req = iii::DecodeInvoke(m);
    if (!req) {
      SKIFF_LOG_LIMITED(Warn) << "ws: invokefunction without a string function_id; ignored";
      return;
    }
    bool reply = req->wants_reply();
    const std::string& fid = req->function_id;
    if (req->action == iii::Action::kEnqueue) {
      if (reply) this->Send(iii::EncodeError(req->invocation_id, fid, iii::EnqueueRefused()));
      return;
    }
    if (req->foreign_namespace) {
      if (reply) this->Send(iii::EncodeError(req->invocation_id, fid, iii::FunctionNotFound(fid)));
      return;
    }
    if (fid == "engine::workers::register") {
      if (reply) this->Send(iii::EncodeResult(req->invocation_id, fid, nullptr));
      return;
    }
    auto self = Self();
    auto target = CallTargetOf(fid, req->data);
    // req moves into the task; a refusal answers with these.
    nlohmann::json invocation_id = req->invocation_id;  // null for a void call
    std::string function_id = fid;
    ++in_flight_;
    // The answer is sent once the call's lane slot is free again.
    auto out = std::make_shared<std::string>();
    Status queued = this->srv_.Dispatch(
        target, caller_,
        [self, reply, out, req = std::move(*req)]() mutable {
          Invocation inv = self->srv_.Call(req.function_id, req.data, self->channels_.get(), self->caller_);
          if (!reply) return;
          *out = iii::EncodeInvocation(req.invocation_id, req.function_id, std::move(inv),
                                       [&](const Error& e) { return self->srv_.ErrorBody(e); });
          Server::Impl::ReturnFreedMemory(out->size());
        },
        [self, out]() {
          net::post(self->ws_.get_executor(),
                    [self, d = std::move(*out)]() mutable { self->Finished(std::move(d)); });
        });
    if (!queued.ok()) {  // the sandbox's lane is full: answered at once
      Invocation inv;
      inv.error = std::move(queued).error();
      Finished(reply ? iii::EncodeInvocation(invocation_id, function_id, std::move(inv),
                                             [&](const Error& e) { return this->srv_.ErrorBody(e); })
                     : std::string());
    }
  }

  SandboxService& caller_;  // the key's service (Server::Impl::Authorized)
  std::shared_ptr<ScopedBroker> channels_;
  std::string worker_id_;
  size_t in_flight_ = 0;  // event-loop thread only
  bool read_paused_ = false, read_ended_ = false;
};

}  // namespace skiff::api
