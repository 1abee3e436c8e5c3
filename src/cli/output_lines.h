// The CLI's reader of a process's NDJSON output stream
// (GET /v1/sandboxes/{id}/processes/{pid}/output): splits the bytes into
// lines, writes each data line's bytes to the process's own stream (stdout
// to fd 1, stderr to fd 2), says on stderr what a gap lost, and remembers
// how the stream ended.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace skiff::cli {

class OutputLines {
 public:
  // Feeds received bytes; false when a line is not JSON (the stream is
  // not what it should be).
  bool Feed(std::string_view bytes);

  // The last line was "end" (the process's record) or "error".
  const std::optional<nlohmann::json>& end() const { return end_; }
  const std::optional<nlohmann::json>& error() const { return error_; }
  // Where each channel goes on from (to resume the stream).
  int64_t next_stdout() const { return next_[1]; }
  int64_t next_stderr() const { return next_[2]; }

 private:
  bool Line(std::string_view line);

  std::string partial_;
  int64_t next_[3] = {0, 0, 0};
  std::optional<nlohmann::json> end_, error_;
};

}  // namespace skiff::cli
