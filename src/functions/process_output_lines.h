// A live process's output as newline-delimited JSON, the form both streaming
// transports carry it in (GET /v1/sandboxes/{id}/processes/{pid}/output and
// the data channel of sandbox::process::output with follow): one JSON object
// per line, written as soon as its bytes arrive, so any HTTP client or
// channel reader that reads lines can follow a process and resume it from
// the offsets it saw.
//
//   {"type":"start","stdout_from":N,"stderr_from":M}
//   {"type":"data","channel":"stdout"|"stderr","offset":N,"data":"<base64>"}
//   {"type":"gap","channel":...,"from":N,"to":M}     bytes lost to the ring
//   {"type":"end","process":{...}}                    last line on success
//   {"type":"error","code":"Sxxx","message":...}      last line on failure
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/error.h"
#include "protocol/process_messages.h"
#include "sandbox/types.h"

namespace skiff::fn {

// Bytes per "data" line at most (larger DATA is split), so a line stays
// small for readers that buffer whole lines.
inline constexpr size_t kOutputLineBytes = size_t{48} * 1024;

class ProcessOutputLines final : public ProcessOutputSink {
 public:
  // `write` gets each line (with its '\n'); false ends the stream.
  // `wanted` (optional) is asked while the process is quiet.
  explicit ProcessOutputLines(ByteSink write, std::function<bool()> wanted = nullptr)
      : write_(std::move(write)), wanted_(std::move(wanted)) {}

  bool OnStart(int64_t stdout_from, int64_t stderr_from) override;
  bool OnData(uint8_t channel, int64_t offset, std::string_view bytes) override;
  bool OnGap(uint8_t channel, int64_t from, int64_t to) override;
  bool Wanted() override { return !wanted_ || wanted_(); }

  // The last line: the process's record, or the error the stream ended with.
  bool End(const proto::ProcInfo& info);
  // `wire_error`: the error as the transport answers it (ErrorToWire).
  bool Fail(const nlohmann::json& wire_error);

 private:
  bool Line(const nlohmann::json& j);

  ByteSink write_;
  std::function<bool()> wanted_;
};

// "stdout" / "stderr" for a channel number (1 / 2).
std::string_view ChannelName(uint8_t channel);

}  // namespace skiff::fn
