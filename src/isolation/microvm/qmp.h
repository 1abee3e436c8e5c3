// A minimal client of QEMU's machine protocol (QMP) over a connected stream
// socket: the greeting, capability negotiation, commands with an optional
// descriptor passed alongside (SCM_RIGHTS, for "getfd"); events are skipped.
// Used to snapshot a booted template VM, to start a restored one, and to
// pause and resume a sandbox's VM.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "base/unique_fd.h"

namespace skiff::microvm {

class Qmp {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  explicit Qmp(UniqueFd fd) : fd_(std::move(fd)) {}

  // Reads the greeting and leaves negotiation mode.
  Status Handshake(Deadline deadline);
  bool negotiated() const { return negotiated_; }
  // Runs `command`; returns its "return" value, or S300 with QEMU's error
  // description. `pass_fd` >= 0 travels with the command (for "getfd").
  Result<nlohmann::json> Execute(const std::string& command,
                                 const nlohmann::json& arguments = nlohmann::json::object(),
                                 Deadline deadline = Deadline::max(), int pass_fd = -1);

 private:
  Result<nlohmann::json> ReadMessage(Deadline deadline);
  Status Send(const std::string& line, int pass_fd);

  UniqueFd fd_;
  std::string buf_;
  int next_id_ = 1;
  bool negotiated_ = false;
};

}  // namespace skiff::microvm
