#include "cli/daemon_process.h"

#include "api/http_util.h"
#include "base/text.h"
#include "cli/daemon_call.h"
#include "cli/output_lines.h"

namespace skiff::cli {

using json = nlohmann::json;

Status DaemonProcess::Call(const std::string& fn, const json& payload) {
  auto r = client_.Post("/v1/functions/" + fn, api::Dump(payload));
  if (!r.ok()) return std::move(r).error();
  if (r->status != 200) return DaemonError(r->status, r->body);
  return OkStatus();
}

Status DaemonProcess::Input(std::string_view bytes, bool close) {
  return Call(
      "sandbox::process::input",
      json{{"sandbox_id", id_}, {"pid", pid_}, {"data_base64", Base64Encode(bytes)}, {"close", close}});
}

Status DaemonProcess::Resize(proto::TermSize size) {
  return Call("sandbox::process::resize",
              json{{"sandbox_id", id_}, {"pid", pid_}, {"rows", size.rows}, {"cols", size.cols}});
}

Result<proto::ProcInfo> DaemonProcess::Output(int64_t from, ProcessOutputSink& sink) {
  std::string path = "/v1/sandboxes/" + PercentEncode(id_) + "/processes/" + std::to_string(pid_) +
                     "/output?follow=true&stdout_from=" + std::to_string(from) +
                     "&stderr_from=" + std::to_string(from);
  OutputLines lines(sink);
  bool declined = false;
  auto r = client_.Stream(
      path,
      [&](std::string_view b) {
        if (!lines.Feed(b)) declined = true;
        return !declined;
      },
      [&] { return sink.Wanted(); });
  if (!r.ok()) return std::move(r).error();
  if (r->status != 200) return DaemonError(r->status, r->body);
  if (lines.error()) return DaemonError(500, lines.error()->dump());
  if (!lines.end()) return Error(Code::kS216, "process output: the stream ended early");
  return proto::ProcInfo::FromJson(*lines.end());
}

}  // namespace skiff::cli
