// A live process of a daemon's sandbox as a ProcessEndpoint (terminal.h):
// output through the NDJSON stream route, input and resize through
// sandbox::process::input / resize, over the CLI's HTTP client.
#pragma once

#include <string>

#include "cli/client.h"
#include "cli/terminal.h"

namespace skiff::cli {

class DaemonProcess final : public ProcessEndpoint {
 public:
  DaemonProcess(Endpoint ep, std::string sandbox_id, int64_t pid)
      : client_(std::move(ep)), id_(std::move(sandbox_id)), pid_(pid) {}

  Result<proto::ProcInfo> Output(int64_t from, ProcessOutputSink& sink) override;
  Status Input(std::string_view bytes, bool close) override;
  Status Resize(proto::TermSize size) override;

 private:
  // POSTs function `fn`; the daemon's error object as an Error.
  Status Call(const std::string& fn, const nlohmann::json& payload);

  Client client_;
  std::string id_;
  int64_t pid_;
};

}  // namespace skiff::cli
