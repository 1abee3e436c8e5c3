// ProcessClient: the live processes of one sandbox, spoken to its agent
// (docs/api.md#sandboxprocessstart). Each call marks the sandbox active when
// it starts and ends, and every second bytes move through one of its
// streams; a quiet followed stream does not (docs/api.md, "Live processes":
// what counts as activity).
//
// Deadlines: a one-shot op must be answered within `timeout` (proc.wait:
// within its own timeout plus that); an output stream without `follow`, and
// an input stream, must make progress within it. A followed output stream
// has no deadline — a quiet process is normal — and ends with the process,
// with the sink (a reader that went away) or with the sandbox. Past a
// deadline the call fails with S200 and its stream is cancelled; the
// process goes on.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "protocol/process_call.h"
#include "sandbox/sandbox.h"
#include "sandbox/types.h"

namespace skiff {

class ProcessClient {
 public:
  // `stopping` says whether a stop of the sandbox has begun (read under the
  // registry's lock).
  ProcessClient(Sandbox& sandbox, std::function<bool()> stopping, std::chrono::milliseconds timeout);

  // A one-shot op; returns the agent's RESULT, checked against the op's
  // answer type.
  Result<nlohmann::json> Call(const proto::ProcessCall& call);
  // proc.output into `sink`; returns the process's record at the end.
  Result<proto::ProcInfo> Output(const proto::ProcOutputRequest& req, ProcessOutputSink& sink);
  // proc.input of the bytes `source` yields (an empty chunk ends them).
  Result<proto::ProcInputResult> Input(const proto::ProcInputRequest& req, const ByteSource& source);

 private:
  // The end of a stream that did not finish with a RESULT or ERROR.
  Error Ended(const proto::Event& ev) const;
  // An Open that failed: the connection's end, mapped as Ended.
  Error OpenFailed(const Error& e) const;
  Error TimedOut(std::string_view op) const;
  // An agent's answer that breaks proc.output's rules (S300).
  Error Malformed(const std::string& what) const;

  Sandbox& sb_;
  std::function<bool()> stopping_;
  std::chrono::milliseconds timeout_;
};

}  // namespace skiff
