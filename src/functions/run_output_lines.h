// A run's output as newline-delimited JSON (POST /v1/run,
// docs/api.md#run-stream): sandbox::run whose output is written as it
// arrives, in the lines of a process's output stream (process_output_lines.h)
// with the run's own first and last lines:
//
//   {"type":"start","sandbox_id":"…","stdout_from":0,"stderr_from":0}
//   {"type":"data","channel":"stdout"|"stderr","offset":N,"data":"<base64>"}
//   {"type":"end","result":{"exit_code":N,"success":…,"duration_ms":…}}  last line on success
//   {"type":"error","code":"S200","message":…}  last line on failure (the error object of docs/errors.md)
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "functions/process_output_lines.h"
#include "sandbox/types.h"

namespace skiff::fn {

class RunOutputLines final : public OutputSink {
 public:
  // `write` gets each line (with its '\n'); false ends the run (its reader
  // went away). `wanted` is asked while the command is quiet.
  RunOutputLines(ByteSink write, std::function<bool()> wanted)
      : write_(write), wanted_(std::move(wanted)), data_(std::move(write)) {}

  bool OnSandbox(const std::string& sandbox_id) override;
  bool OnStdout(std::string_view bytes) override { return Data(1, bytes); }
  bool OnStderr(std::string_view bytes) override { return Data(2, bytes); }
  bool Wanted() override { return !wanted_ || wanted_(); }

  // Whether the start line was written (after it, the run's outcome is a
  // line; before it, an ordinary error response).
  bool started() const { return started_; }
  // The last line: the run's result (without its output, which was sent),
  // or the error it ended with (`wire_error`: as the transport answers it,
  // ErrorToWire; the output its details may carry is left out too).
  bool End(const ExecResult& result);
  bool Fail(nlohmann::json wire_error);

 private:
  bool Data(uint8_t channel, std::string_view bytes);

  ByteSink write_;
  std::function<bool()> wanted_;
  ProcessOutputLines data_;
  int64_t next_[3] = {0, 0, 0};
  bool started_ = false;
};

}  // namespace skiff::fn
