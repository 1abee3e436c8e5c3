// The agent's table of live (background) processes: proc.start spawns into
// it, and the process then outlives the request. The table always reads
// every process's output into its rings (overwriting the oldest bytes), so
// no process ever blocks on a slow or absent client; it enforces the caps
// of process_messages.h (live processes, ring bytes), the processes'
// timeouts, and how long exited processes stay listed. The loop polls the
// table's descriptors, hands it the children it reaps, and kills every
// process group when it ends.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "agent/live_process.h"
#include "base/error.h"
#include "confine/confine.h"
#include "protocol/process_messages.h"

namespace skiff::agent {

class ProcessTable {
 public:
  // `policy` confines every child (nullptr: unconfined); it must outlive
  // the table.
  explicit ProcessTable(const confine::ChildPolicy* policy);

  // Spawns the request's process. S400 beyond kMaxLiveProcesses running or
  // kMaxProcBufferTotal reserved ring bytes; the spawn's own errors (S211 /
  // S212 for the cwd, S300). A program that cannot be run is listed as
  // exited (127 or 126, the reason on its stderr), as exec reports it.
  Result<proto::ProcInfo> Start(const proto::ProcStartRequest& r);

  // The process listed under `pid`, or nullptr (S220 for the caller).
  LiveProcess* Find(int64_t pid);
  // The same process as when a stream found it, or nullptr when it was
  // forgotten since (its pid may have been reused).
  LiveProcess* Find(int64_t pid, uint64_t serial);
  std::vector<proto::ProcInfo> List() const;

  // proc.signal, proc.resize and proc.forget (S220, S221).
  Status Signal(int64_t pid, int sig);
  Status Resize(int64_t pid, TerminalSize size);
  Status Forget(int64_t pid);
  // Ends the process's stdin: the pipe is closed (a terminal's end-of-file
  // bytes are the proc.input stream's to write first).
  static void CloseInput(LiveProcess& p);

  // A child the loop reaped: true when it leads one of the table's
  // processes (now exited).
  bool OnChildExit(pid_t pid, int status);

  // Registers every open output descriptor (always: the rings never push
  // back) and lowers `timeout` to the next deadline or expiry.
  void AddPollFds(std::vector<pollfd>& pfds, int& timeout, int64_t now);
  // Reads what is ready into the rings (the pfds the last AddPollFds added).
  void Pump(const std::vector<pollfd>& pfds);
  // Kills processes at their deadline; forgets exited ones kept too long
  // (kExitedKeepMs) that no stream is attached to.
  void Tick(int64_t now);

  // Kills every running process's group (the channel is gone).
  void KillAll();

 private:
  struct Slot {
    pid_t pid;
    uint64_t serial;
    uint8_t ch;
    size_t index;  // into pfds
  };
  // Forgets the oldest exited processes beyond kMaxExitedProcesses.
  void TrimExited();
  void ReadOutput(LiveProcess& p, uint8_t ch);
  int64_t Reserved() const;

  const confine::ChildPolicy* policy_;
  std::map<pid_t, std::unique_ptr<LiveProcess>> procs_;  // by pid
  uint64_t next_serial_ = 1;
  std::vector<Slot> slots_;  // of the last AddPollFds
  std::unique_ptr<char[]> buf_;
};

}  // namespace skiff::agent
