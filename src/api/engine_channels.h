// Data channels in worker mode (docs/api.md#worker-mode): they live on the
// iii engine, as the contract says, so a caller on any engine listener —
// through a fleet router too — attaches to them where it already is.
// fs::read's `content` and a followed process's output are channels made
// with the engine's engine::channels::create, written by skiffd over
// <engine>/ws/channels/{id}?dir=write; a channel reference given as
// fs::write or process input `content` is read from the engine. Bounded:
// at most kMaxEngineChannelWriters channels are being written at once
// (S400 beyond), each write waits at most the attach deadline for a reader.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "api/channels.h"
#include "api/engine_link_options.h"
#include "api/iii_codec.h"
#include "functions/function_def.h"

namespace skiff::api {

inline constexpr size_t kMaxEngineChannelWriters = 32;

class EngineChannels final : public ChannelBroker {
 public:
  // `create` calls engine::channels::create through the worker link
  // (blocking; never called on the link's event loop). `run_blocking` runs
  // a channel's writer off the calling thread (the server's pool).
  using CreateCall =
      std::function<iii::CallOutcome(const nlohmann::json& data, std::chrono::milliseconds deadline)>;
  EngineChannels(EngineLinkOptions link, CreateCall create, BlockingRunner run_blocking);

  Result<nlohmann::json> CreateReadChannel(Producer producer) override;
  Result<ByteSource> AttachReader(const nlohmann::json& ref) override;
  // engine::channels::create is the engine's own function in worker mode.
  Result<nlohmann::json> CreateChannelPair(uint32_t buffer_size) override;

  // Channels being written now.
  size_t writers() const { return *writers_; }

 private:
  EngineLinkOptions link_;
  CreateCall create_;
  BlockingRunner run_blocking_;
  std::shared_ptr<std::atomic<size_t>> writers_ = std::make_shared<std::atomic<size_t>>(0);
};

}  // namespace skiff::api
