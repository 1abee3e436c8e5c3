// The proc.* requests of the agent protocol (protocol/process_messages.h)
// over the process table (process_table.h). Most are answered at once;
// three live on as streams the event loop drives, like an exec:
//   proc.output  streams a process's rings from the asked offsets under the
//                host's credit (a gap META when the ring overwrote bytes
//                the stream had not sent), following new output on request;
//   proc.input   writes the host's DATA to the process's stdin (or
//                terminal), returning credit as the process takes it;
//   proc.wait    answers once the process exits or its timeout passes.
// Frames go out through the loop's ExecSink.
#pragma once

#include <poll.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "agent/exec_engine.h"
#include "agent/process_table.h"
#include "base/error.h"
#include "protocol/frame.h"

namespace skiff::agent {

// One proc.output, proc.input or proc.wait request in progress. `credit` is
// the stream's window per channel, kept by the loop and spent here.
struct ProcStream {
  enum class Kind { kOutput, kInput, kWait };
  uint32_t id = 0;
  Kind kind = Kind::kWait;
  uint64_t* credit = nullptr;  // [proto::kChannels]
  int64_t pid = 0;
  uint64_t serial = 0;    // of the process when the stream opened
  bool finished = false;  // its final frame was sent

  // kOutput: the next offset to send and, without follow, where to stop.
  bool follow = false;
  bool attached = false;  // counted in the process's `attached`
  int64_t pos[proto::kChannels] = {0, 0, 0};
  int64_t stop[proto::kChannels] = {0, 0, 0};
  bool ended[proto::kChannels] = {true, false, false};  // END sent
  // Gap METAs are not under credit, and a host reader holds at most
  // kMaxQueuedControl (protocol/client.h) unconsumed META/END frames per stream. A gap
  // META is always followed by DATA on its channel, and the host returns
  // credit as it consumes DATA, so credit for a byte sent after the META
  // proves the META was read. Until then it counts here; at the cap, later
  // losses wait and become one larger gap.
  uint64_t sent[proto::kChannels] = {0, 0, 0};         // DATA bytes
  uint64_t base_credit[proto::kChannels] = {0, 0, 0};  // credit at OPEN
  struct UnreadGap {
    uint8_t ch;
    uint64_t sent_before;  // sent[ch] when the META went out
  };
  std::vector<UnreadGap> unread_gaps;

  // kInput: bytes not yet taken by the process, then the terminal's
  // end-of-file bytes (close on a terminal).
  std::string buf;
  std::string eof_bytes;
  bool end_seen = false;
  bool close = false;
  int64_t written = 0;

  // kWait: monotonic deadline, -1 for none.
  int64_t deadline_ms = -1;
};

// What an OPEN of a proc.* op gave: a stream that lives on, or the RESULT.
// NOLINTNEXTLINE(bugprone-exception-escape): a default (null) nlohmann::json cannot throw
struct ProcOpen {
  std::unique_ptr<ProcStream> stream;
  nlohmann::json result;  // !stream
};

class ProcessStreams {
 public:
  ProcessStreams(ProcessTable& table, ExecSink& sink) : table_(table), sink_(sink) {}

  // Whether `op` is one of the proc.* ops.
  static bool IsProcOp(std::string_view op);

  // Validates and starts request `op` on stream `id`. Errors are the
  // request's: the loop answers them with ERROR.
  Result<ProcOpen> Open(uint32_t id, std::string_view op, const nlohmann::json& req, uint64_t* credit);

  // DATA and END on stdin (proc.input); a host that ignores its credit has
  // the excess dropped.
  void OnData(ProcStream& s, std::string_view bytes);
  void OnEnd(ProcStream& s);
  // CANCEL: proc.output detaches (its ENDs and RESULT are sent), proc.wait
  // answers the process's state, proc.input ends with S218 and nothing
  // more is written.
  void Cancel(ProcStream& s);

  // Once per loop round: sends what the stream can, finishes it when done.
  // Returns whether it is finished (the loop then drops it).
  bool Tick(ProcStream& s, int64_t now);

  // Registers what the stream waits on this round (a proc.input's stdin
  // when it has bytes to write) and lowers `timeout` (0 when it has output
  // it could send now, a proc.wait's deadline). Returns the pollfd index,
  // or -1.
  int AddPollFds(const ProcStream& s, std::vector<pollfd>& pfds, int& timeout, int64_t now) const;
  // Writes a proc.input's bytes when its stdin is ready.
  void Pump(ProcStream& s, int slot, const std::vector<pollfd>& pfds);

 private:
  Result<ProcOpen> OpenOutput(uint32_t id, const nlohmann::json& req, uint64_t* credit);
  Result<ProcOpen> OpenInput(uint32_t id, const nlohmann::json& req, uint64_t* credit);
  Result<ProcOpen> OpenWait(uint32_t id, const nlohmann::json& req);
  // proc.output: sends DATA (and gap METAs) under credit; returns whether
  // it stopped for lack of budget with more to send.
  bool SendOutput(ProcStream& s, LiveProcess& p);
  bool CanSend(const ProcStream& s, const LiveProcess& p) const;
  // Whether the stream may send a gap META now (see ProcStream::unread_gaps).
  static bool GapAllowed(ProcStream& s);
  void Detach(ProcStream& s);
  void Finish(ProcStream& s, const nlohmann::json& result);
  void Fail(ProcStream& s, const Error& e);

  ProcessTable& table_;
  ExecSink& sink_;
};

}  // namespace skiff::agent
