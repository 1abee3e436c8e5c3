#include "agent/process_table.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "agent/exec_engine.h"
#include "agent/spawn.h"
#include "base/log.h"

namespace skiff::agent {
namespace {

// What a live process echoes in every ProcInfo (argv, cwd, user, tag) is
// bounded so that its RESULT fits one frame even when every byte needs a
// six-byte JSON escape.
constexpr size_t kMaxEchoedBytes = proto::kMaxPayload / 8;
// Output bytes read per descriptor per wakeup (in chunks): a chatty process
// cannot starve the others or the channel.
constexpr int kReadRounds = 4;
// One read straight into a ring takes at most this much (a pipe holds 64 KiB
// by default; a terminal's master much less).
constexpr size_t kDirectRead = size_t{256} * 1024;

int64_t WallMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

void SetNonBlock(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) (void)::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

Error NotFound(int64_t pid) { return Error(Code::kS220, "no live process " + std::to_string(pid)); }

// The spawn of a start request: the environment as exec takes it ("K=V"
// only), a terminal's TERM unless the request sets one.
Result<SpawnRequest> PlanSpawn(const proto::ProcStartRequest& r) {
  SpawnRequest sr;
  sr.argv = r.argv;
  bool has_term = false;
  for (const auto& v : r.env) {
    size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    if (v.compare(0, eq, "TERM") == 0) has_term = true;
    sr.env.push_back(v);
  }
  if (r.pty && !has_term) sr.env.emplace_back("TERM=xterm-256color");
  if (r.cwd && !r.cwd->empty()) sr.cwd = *r.cwd;
  if (r.user) {
    // Resolved inside the sandbox, against the image's own passwd/group.
    SKIFF_ASSIGN_OR_RETURN(Credentials c, ResolveUser(*r.user));
    sr.creds = std::move(c);
  }
  if (r.pty)
    sr.terminal =
        TerminalSize{static_cast<unsigned short>(r.pty->rows), static_cast<unsigned short>(r.pty->cols)};
  sr.null_stdin = !r.has_stdin;
  return sr;
}

}  // namespace

ProcessTable::ProcessTable(const confine::ChildPolicy* policy)
    : policy_(policy), buf_(std::make_unique<char[]>(proto::kChunk)) {}

int64_t ProcessTable::Reserved() const {
  int64_t total = 0;
  for (const auto& [pid, p] : procs_) total += p->reserved;
  return total;
}

Result<proto::ProcInfo> ProcessTable::Start(const proto::ProcStartRequest& r) {
  size_t echoed = r.cwd.value_or("").size() + r.user.value_or("").size() + r.tag.value_or("").size();
  for (const auto& a : r.argv) echoed += a.size() + 1;
  if (echoed > kMaxEchoedBytes)
    return InvalidRequest("argv, cwd, user and tag: at most " + std::to_string(kMaxEchoedBytes) +
                          " bytes together for a live process");
  int running = 0;
  for (const auto& [pid, p] : procs_) running += p->running ? 1 : 0;
  if (running >= proto::kMaxLiveProcesses)
    return Error(Code::kS400, "resource limit: at most " + std::to_string(proto::kMaxLiveProcesses) +
                                  " live processes per sandbox");
  // A terminal writes everything to one ring; pipes fill two.
  int64_t reserve = r.buffer_bytes * (r.pty ? 1 : 2);
  int64_t reserved = Reserved();
  if (reserved + reserve > proto::kMaxProcBufferTotal)
    return Error(Code::kS400, "resource limit: live processes' output buffers would take " +
                                  std::to_string(reserved + reserve) + " bytes, over the " +
                                  std::to_string(proto::kMaxProcBufferTotal) + " bytes per sandbox");

  SKIFF_ASSIGN_OR_RETURN(SpawnRequest sr, PlanSpawn(r));
  SKIFF_ASSIGN_OR_RETURN(SpawnOutcome o, Spawn(sr, policy_));

  auto p = std::make_unique<LiveProcess>();
  p->serial = next_serial_++;
  p->argv = r.argv;
  p->cwd = sr.cwd;
  p->user = r.user;
  p->tag = r.tag;
  p->pty = sr.terminal;
  p->started_ms = WallMs();
  p->buffer_bytes = r.buffer_bytes;
  p->hold_output = r.hold_output;
  p->reserved = reserve;
  for (uint8_t ch = proto::kStdout; ch <= proto::kStderr; ++ch)
    p->rings[ch] = OutputRing(static_cast<size_t>(r.buffer_bytes));
  if (!o.started) {
    // The child reported why it could not exec and exits by itself: listed
    // as exited, with the reason on its stderr.
    if (o.failure.pid <= 0) return Platform("exec", "spawn of " + r.argv[0] + ": no child to collect");
    int st = 0;
    while (::waitpid(o.failure.pid, &st, 0) < 0 && errno == EINTR) {
    }
    p->pid = o.failure.pid;
    p->running = false;
    p->wstatus = st;
    p->ended_ms = p->started_ms;
    p->ended_mono = NowMs();
    p->rings[proto::kStderr].Append(o.failure.stderr_text);
  } else {
    Spawned& s = o.proc;
    p->pid = s.pid;
    if (s.terminal) {
      p->out[proto::kStdout] = std::move(s.terminal);  // nonblocking already
      p->input_open = true;
    } else {
      p->out[proto::kStdout] = std::move(s.stdout_r);
      p->out[proto::kStderr] = std::move(s.stderr_r);
      SetNonBlock(p->out[proto::kStdout].get());
      SetNonBlock(p->out[proto::kStderr].get());
      if (s.stdin_w) {
        p->stdin_w = std::move(s.stdin_w);
        SetNonBlock(p->stdin_w.get());
        p->input_open = true;
      }
    }
    if (r.timeout_ms) p->deadline_ms = NowMs() + std::min<int64_t>(*r.timeout_ms, int64_t{1} << 40);
  }
  proto::ProcInfo info = p->Info();
  // A pid is listed once: an exited process whose pid the kernel handed out
  // again is forgotten (its streams see S220).
  procs_[p->pid] = std::move(p);
  TrimExited();
  return info;
}

LiveProcess* ProcessTable::Find(int64_t pid) {
  if (pid <= 0 || pid > INT32_MAX) return nullptr;
  auto it = procs_.find(static_cast<pid_t>(pid));
  return it == procs_.end() ? nullptr : it->second.get();
}

LiveProcess* ProcessTable::Find(int64_t pid, uint64_t serial) {
  LiveProcess* p = Find(pid);
  return p != nullptr && p->serial == serial ? p : nullptr;
}

std::vector<proto::ProcInfo> ProcessTable::List() const {
  std::vector<proto::ProcInfo> out;
  out.reserve(procs_.size());
  for (const auto& [pid, p] : procs_) out.push_back(p->Info());
  return out;
}

Status ProcessTable::Signal(int64_t pid, int sig) {
  LiveProcess* p = Find(pid);
  if (p == nullptr) return NotFound(pid);
  if (!p->running) return Error(Code::kS221, "process " + std::to_string(pid) + " has exited");
  // Its group: what the process started goes with it. The leader itself
  // too, should it have left the group it was started in.
  if (::kill(-p->pid, sig) < 0 && ::kill(p->pid, sig) < 0)
    return Error::Sys(Code::kS300, "kill", std::to_string(pid), errno);
  return OkStatus();
}

Status ProcessTable::Resize(int64_t pid, TerminalSize size) {
  LiveProcess* p = Find(pid);
  if (p == nullptr) return NotFound(pid);
  if (!p->running) return Error(Code::kS221, "process " + std::to_string(pid) + " has exited");
  if (!p->pty || !p->out[proto::kStdout])
    return Error(Code::kS221, "process " + std::to_string(pid) + " has no terminal");
  SKIFF_RETURN_IF_ERROR(ResizePty(p->out[proto::kStdout].get(), size));
  p->pty = size;
  return OkStatus();
}

Status ProcessTable::Forget(int64_t pid) {
  LiveProcess* p = Find(pid);
  if (p == nullptr) return NotFound(pid);
  if (p->running) return Error(Code::kS221, "process " + std::to_string(pid) + " is running");
  procs_.erase(p->pid);
  return OkStatus();
}

void ProcessTable::CloseInput(LiveProcess& p) {
  p.input_open = false;
  p.stdin_w.reset();
}

bool ProcessTable::OnChildExit(pid_t pid, int status) {
  auto it = procs_.find(pid);
  if (it == procs_.end() || !it->second->running) return false;
  LiveProcess& p = *it->second;
  p.running = false;
  p.wstatus = status;
  p.ended_ms = WallMs();
  p.ended_mono = NowMs();
  // Input is refused from now on; the output descriptors stay until their
  // end of file (what the process started may still write).
  CloseInput(p);
  // Killed at its deadline: what it started goes too.
  if (p.killed) ::kill(-pid, SIGKILL);
  TrimExited();
  return true;
}

void ProcessTable::TrimExited() {
  for (;;) {
    int exited = 0;
    LiveProcess* oldest = nullptr;
    for (const auto& [pid, p] : procs_) {
      if (p->running) continue;
      ++exited;
      // One a stream is reading stays until it detaches.
      if (p->attached == 0 && (oldest == nullptr || p->ended_mono < oldest->ended_mono)) oldest = p.get();
    }
    if (exited <= proto::kMaxExitedProcesses || oldest == nullptr) return;
    procs_.erase(oldest->pid);
  }
}

void ProcessTable::AddPollFds(std::vector<pollfd>& pfds, int& timeout, int64_t now) {
  slots_.clear();
  int64_t next = -1;  // the next deadline or expiry
  for (auto& [pid, p] : procs_) {
    for (uint8_t ch = proto::kStdout; ch <= proto::kStderr; ++ch) {
      if (!p->out[ch]) continue;
      // Held output fills the ring: the pipe waits for a reader to take some.
      if (p->Room(ch) == 0) continue;
      slots_.push_back({p->pid, p->serial, ch, pfds.size()});
      pfds.push_back({p->out[ch].get(), POLLIN, 0});
    }
    int64_t at = -1;
    if (p->running && p->deadline_ms >= 0 && !p->killed) at = p->deadline_ms;
    if (!p->running && p->attached == 0) at = p->ended_mono + proto::kExitedKeepMs;
    if (at >= 0 && (next < 0 || at < next)) next = at;
  }
  if (next >= 0) {
    int64_t left = std::max<int64_t>(0, next - now);
    if (timeout < 0 || left < timeout) timeout = static_cast<int>(std::min<int64_t>(left, 1 << 30));
  }
}

void ProcessTable::Pump(const std::vector<pollfd>& pfds) {
  for (const Slot& s : slots_) {
    if (s.index >= pfds.size() || !(pfds[s.index].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    // Looked up again: the process may have been forgotten since the poll.
    if (LiveProcess* p = Find(s.pid, s.serial)) ReadOutput(*p, s.ch);
  }
  slots_.clear();
}

void ProcessTable::ReadOutput(LiveProcess& p, uint8_t ch) {
  OutputRing& ring = p.rings[ch];
  for (int rounds = 0; rounds < kReadRounds && p.out[ch]; ++rounds) {
    const size_t allowed = p.Room(ch);
    if (allowed == 0) return;  // held output fills the ring
    // Straight into the ring once its storage is all there (one copy
    // fewer), else through the buffer.
    OutputRing::Room room = ring.Writable(std::min(kDirectRead, allowed));
    bool direct = !room.first.empty();
    ssize_t n;
    if (direct) {
      iovec iov[2] = {{room.first.data(), room.first.size()}, {room.second.data(), room.second.size()}};
      n = ::readv(p.out[ch].get(), iov, room.second.empty() ? 1 : 2);
    } else {
      n = ::read(p.out[ch].get(), buf_.get(), std::min<size_t>(proto::kChunk, allowed));
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {
      // End of file; a terminal's master reads EIO once the last copy of
      // its slave is closed.
      p.out[ch].reset();
      if (p.pty) p.input_open = false;
      return;
    }
    if (direct) {
      ring.Commit(static_cast<size_t>(n));
    } else {
      ring.Append(std::string_view(buf_.get(), static_cast<size_t>(n)));
    }
  }
}

void ProcessTable::Tick(int64_t now) {
  for (auto it = procs_.begin(); it != procs_.end();) {
    LiveProcess& p = *it->second;
    if (p.running && !p.killed && p.deadline_ms >= 0 && now >= p.deadline_ms) {
      p.timed_out = true;
      p.killed = true;
      ::kill(-p.pid, SIGKILL);
      ::kill(p.pid, SIGKILL);
    }
    bool expired = !p.running && p.attached == 0 && now >= p.ended_mono + proto::kExitedKeepMs;
    it = expired ? procs_.erase(it) : std::next(it);
  }
}

void ProcessTable::KillAll() {
  for (auto& [pid, p] : procs_)
    if (p->running) ::kill(-pid, SIGKILL);
}

}  // namespace skiff::agent
