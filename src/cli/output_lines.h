// The CLI's reader of a process's NDJSON output stream
// (GET /v1/sandboxes/{id}/processes/{pid}/output) and of a run's
// (POST /v1/run): splits the bytes into lines and hands start, data and gap
// lines to a ProcessOutputSink as they arrive; remembers how the stream
// ended.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "sandbox/types.h"

namespace skiff::cli {

class OutputLines {
 public:
  explicit OutputLines(ProcessOutputSink& sink) : sink_(sink) {}

  // Feeds received bytes; false when a line is not what the stream carries
  // or the sink wants no more.
  bool Feed(std::string_view bytes);

  // The last line was "end" (the process's record, or the run's result)
  // or "error" (the error object).
  const std::optional<nlohmann::json>& end() const { return end_; }
  const std::optional<nlohmann::json>& error() const { return error_; }
  // Where each channel goes on from (to resume the stream).
  int64_t next_stdout() const { return next_[1]; }
  int64_t next_stderr() const { return next_[2]; }

 private:
  bool Line(std::string_view line);

  ProcessOutputSink& sink_;
  std::string partial_;
  int64_t next_[3] = {0, 0, 0};
  std::optional<nlohmann::json> end_, error_;
};

}  // namespace skiff::cli
