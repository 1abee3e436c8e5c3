#include "agent/exec_engine.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "agent/text_util.h"
#include "base/log.h"
#include "protocol/exec_messages.h"

namespace skiff::agent {
namespace {

using nlohmann::json;
using proto::Type;

void SetNonBlock(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) (void)::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

// The request, checked by its protocol type, with the agent's own meaning
// given to it.
struct ExecPlan {
  SpawnRequest spawn;
  uint64_t limit = kDefaultOutputLimit;
  int64_t timeout_ms = -1;  // none
  bool want_stdin = false;
};

Result<ExecPlan> PlanExec(const json& req) {
  SKIFF_ASSIGN_OR_RETURN(proto::ExecRequest r, proto::ExecRequest::FromJson(req));
  ExecPlan plan;
  SpawnRequest& sr = plan.spawn;
  sr.argv = std::move(r.argv);
  for (auto& v : r.env) {
    size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0) continue;  // ignored, as the spec says
    sr.env.push_back(std::move(v));
  }
  if (r.cwd) sr.cwd = r.cwd->empty() ? std::string("/") : std::move(*r.cwd);
  if (r.user) {
    // Resolved inside the sandbox, against the image's own passwd/group.
    auto creds = ResolveUser(*r.user);
    if (!creds.ok()) return creds.error();
    sr.creds = std::move(creds).value();
  }
  plan.limit = static_cast<uint64_t>(r.output_limit);
  if (r.timeout_ms) plan.timeout_ms = std::min<int64_t>(*r.timeout_ms, int64_t{1} << 40);
  plan.want_stdin = r.has_stdin;
  return plan;
}

// The RESULT of an exec that ended, or could not start.
proto::ExecResult ResultOf(int exit_code, int signal, int64_t duration_ms) {
  proto::ExecResult r;
  r.exit_code = exit_code;
  r.signal = signal;
  r.duration_ms = duration_ms;
  return r;
}

}  // namespace

int64_t NowMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

Result<ExecStart> ExecEngine::Start(uint32_t id, const json& req, uint64_t* credit) {
  int64_t start_ms = NowMs();
  SKIFF_ASSIGN_OR_RETURN(ExecPlan er, PlanExec(req));
  auto outcome = Spawn(er.spawn, policy_);
  if (!outcome.ok()) return outcome.error();
  ExecStart r;
  if (!outcome->started) {
    r.stderr_text = outcome->failure.stderr_text;
    r.result = ResultOf(outcome->failure.exit_code, 0, NowMs() - start_ms).ToJson();
    return r;
  }
  auto e = std::make_unique<Exec>();
  e->id = id;
  e->credit = credit;
  e->start_ms = start_ms;
  e->limit = er.limit;
  if (er.timeout_ms >= 0) e->deadline_ms = start_ms + er.timeout_ms;
  Spawned& p = outcome->proc;
  e->pid = p.pid;
  e->stdin_w = std::move(p.stdin_w);
  e->out[proto::kStdout] = std::move(p.stdout_r);
  e->out[proto::kStderr] = std::move(p.stderr_r);
  SetNonBlock(e->stdin_w.get());
  SetNonBlock(e->out[proto::kStdout].get());
  SetNonBlock(e->out[proto::kStderr].get());
  if (!er.want_stdin) e->stdin_end = true;
  pids_[p.pid] = id;
  sink_.SendJson(id, Type::kMeta, proto::ExecStarted{p.pid}.ToJson());
  r.exec = std::move(e);
  return r;
}

void ExecEngine::OnStdin(Exec& e, std::string_view bytes) {
  if (!e.stdin_w || e.stdin_end) {
    sink_.GrantCredit(e.id, proto::kStdin, bytes.size());  // nobody reads it: discard
    return;
  }
  if (e.stdin_buf.size() + bytes.size() > 2 * size_t{proto::kInitialWindow}) {
    // The host ignored its credit; drop rather than grow.
    SKIFF_LOG(Warn) << "stream " << e.id << ": stdin beyond the granted credit dropped";
    return;
  }
  e.stdin_buf.append(bytes);
}

void ExecEngine::Cancel(Exec& e) {
  e.cancelled = true;
  Kill(e);
}

void ExecEngine::Kill(Exec& e) {
  if (e.pid > 0 && !e.killed) {
    ::kill(-e.pid, SIGKILL);
    if (!e.exited) ::kill(e.pid, SIGKILL);
  }
  e.killed = true;
  e.stdin_w.reset();
  e.stdin_buf.clear();
}

bool ExecEngine::Tick(Exec& e, int64_t now) {
  // The host ended stdin and everything was delivered: the child sees EOF.
  if (e.stdin_w && e.stdin_end && e.stdin_buf.empty()) e.stdin_w.reset();
  if (!e.killed && e.deadline_ms >= 0 && now >= e.deadline_ms) {
    e.timed_out = true;
    Kill(e);
  }
  if (!Done(e)) return false;
  Finish(e);
  return true;
}

bool ExecEngine::Done(const Exec& e) {
  if (!e.exited) return false;
  if (e.killed) return true;  // killed: the pipes are not waited for
  return !e.out[proto::kStdout] && !e.out[proto::kStderr];
}

void ExecEngine::Finish(Exec& e) {
  for (uint8_t ch = proto::kStdout; ch <= proto::kStderr; ++ch) {
    if (e.out[ch]) {
      e.out[ch].reset();
      sink_.Send(e.id, Type::kEnd, ch, {});
    }
  }
  int code = 0, sig = 0;
  if (WIFEXITED(e.wstatus)) {
    code = WEXITSTATUS(e.wstatus);
  } else if (WIFSIGNALED(e.wstatus)) {
    sig = WTERMSIG(e.wstatus);
    code = 128 + sig;
  }
  proto::ExecResult r = ResultOf(code, sig, NowMs() - e.start_ms);
  r.stdout_truncated = e.truncated[proto::kStdout];
  r.stderr_truncated = e.truncated[proto::kStderr];
  r.timed_out = e.timed_out;
  r.cancelled = e.cancelled;
  sink_.SendJson(e.id, Type::kResult, r.ToJson());
}

ExecPollSlots ExecEngine::AddPollFds(const Exec& e, std::vector<pollfd>& pfds, int& timeout,
                                     int64_t now) const {
  ExecPollSlots sl{e.id};
  for (uint8_t ch = proto::kStdout; ch <= proto::kStderr; ++ch) {
    if (!e.out[ch]) continue;
    bool over = e.sent[ch] >= e.limit;
    if (!over && (e.credit[ch] == 0 || !sink_.OutputRoom())) continue;  // backpressure
    (ch == proto::kStdout ? sl.out : sl.err) = static_cast<int>(pfds.size());
    pfds.push_back({e.out[ch].get(), POLLIN, 0});
  }
  if (e.stdin_w && !e.stdin_buf.empty()) {
    sl.in = static_cast<int>(pfds.size());
    pfds.push_back({e.stdin_w.get(), POLLOUT, 0});
  }
  if (e.deadline_ms >= 0 && !e.killed) {
    int64_t left = std::max<int64_t>(0, e.deadline_ms - now);
    if (timeout < 0 || left < timeout) timeout = static_cast<int>(std::min<int64_t>(left, 1 << 30));
  }
  return sl;
}

void ExecEngine::Pump(Exec& e, const ExecPollSlots& slots, const std::vector<pollfd>& pfds) {
  const pollfd* pin = slots.in >= 0 ? &pfds[slots.in] : nullptr;
  // stdin: write what the host sent; grant credit for what the child took.
  if (pin != nullptr && (pin->revents & (POLLOUT | POLLERR | POLLHUP)) && e.stdin_w) {
    while (!e.stdin_buf.empty()) {
      ssize_t n = ::write(e.stdin_w.get(), e.stdin_buf.data(), e.stdin_buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n < 0) {  // EPIPE: the child closed stdin; the rest is discarded
        sink_.GrantCredit(e.id, proto::kStdin, e.stdin_buf.size());
        e.stdin_buf.clear();
        e.stdin_w.reset();
        break;
      }
      sink_.GrantCredit(e.id, proto::kStdin, static_cast<uint64_t>(n));
      e.stdin_buf.erase(0, static_cast<size_t>(n));
    }
  }
  if (e.stdin_w && e.stdin_end && e.stdin_buf.empty()) e.stdin_w.reset();

  const pollfd* pf[proto::kChannels] = {nullptr, slots.out >= 0 ? &pfds[slots.out] : nullptr,
                                        slots.err >= 0 ? &pfds[slots.err] : nullptr};
  for (uint8_t ch = proto::kStdout; ch <= proto::kStderr; ++ch) {
    if (pf[ch] == nullptr || !e.out[ch] || !(pf[ch]->revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char buf[proto::kChunk];
    // A few reads per wakeup keep one busy stream from starving the rest.
    for (int rounds = 0; rounds < 4 && e.out[ch]; ++rounds) {
      uint64_t room = e.sent[ch] < e.limit ? e.limit - e.sent[ch] : 0;
      size_t want = sizeof buf;
      if (room > 0) {
        want = static_cast<size_t>(std::min<uint64_t>({sizeof buf, room, e.credit[ch]}));
        if (want == 0 || !sink_.OutputRoom()) break;  // wait for credit / channel
      }
      ssize_t n = ::read(e.out[ch].get(), buf, want);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n <= 0) {  // EOF (or error): this channel is done
        e.out[ch].reset();
        sink_.Send(e.id, Type::kEnd, ch, {});
        break;
      }
      if (room == 0) {
        e.truncated[ch] = true;  // over the cap: read and discarded
        continue;
      }
      sink_.Send(e.id, Type::kData, ch, std::string_view(buf, static_cast<size_t>(n)));
      e.sent[ch] += static_cast<uint64_t>(n);
      e.credit[ch] -= static_cast<uint64_t>(n);
    }
  }
}

bool ExecEngine::OnChildExit(pid_t pid, int status, const std::function<Exec*(uint32_t id)>& find) {
  auto it = pids_.find(pid);
  if (it == pids_.end()) return false;
  Exec* e = find(it->second);
  pids_.erase(it);
  if (e == nullptr) return true;
  e->exited = true;
  e->wstatus = status;
  // The leader is gone; its group may live on holding the pipes. Kill it
  // too when the exec was already killed (timeout, cancel).
  if (e->killed) ::kill(-pid, SIGKILL);
  return true;
}

void ExecEngine::KillAll(const std::vector<Exec*>& execs) {
  for (Exec* e : execs)
    if (e->pid > 0) ::kill(-e->pid, SIGKILL);
  if (::getpid() == 1) ::kill(-1, SIGKILL);
}

}  // namespace skiff::agent
