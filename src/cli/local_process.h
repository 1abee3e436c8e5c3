// A live process of a sandbox of this process's own SandboxService as a
// ProcessEndpoint (terminal.h): `skiff run -it`, which needs no daemon.
#pragma once

#include <string>

#include "cli/terminal.h"
#include "sandbox/service.h"

namespace skiff::cli {

class LocalProcess final : public ProcessEndpoint {
 public:
  LocalProcess(SandboxService& service, std::string sandbox_id, int64_t pid)
      : service_(service), id_(std::move(sandbox_id)), pid_(pid) {}

  Result<proto::ProcInfo> Output(int64_t from, ProcessOutputSink& sink) override {
    return service_.ProcessOutput(id_, proto::ProcOutputRequest{pid_, from, from, true}, sink);
  }
  Status Input(std::string_view bytes, bool close) override {
    auto given = std::make_shared<bool>(false);
    std::string data(bytes);
    ByteSource source = [given, data]() -> Result<std::string> {
      if (*given) return std::string();
      *given = true;
      return data;
    };
    auto r = service_.ProcessInput(id_, proto::ProcInputRequest{pid_, close}, source);
    if (!r.ok()) return std::move(r).error();
    return OkStatus();
  }
  Status Resize(proto::TermSize size) override {
    auto r = service_.Process(id_, proto::ProcResizeRequest{pid_, size});
    if (!r.ok()) return std::move(r).error();
    return OkStatus();
  }

 private:
  SandboxService& service_;
  std::string id_;
  int64_t pid_;
};

}  // namespace skiff::cli
