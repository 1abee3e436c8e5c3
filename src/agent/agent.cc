#include "agent/agent.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/fs_ops.h"
#include "agent/spawn.h"
#include "agent/vm_init.h"
#include "base/log.h"
#include "protocol/frame.h"
#include "protocol/ops.h"

#ifndef SKIFF_VERSION
#define SKIFF_VERSION "0.0.0"
#endif

namespace skiff::agent {
namespace {

using nlohmann::json;
using proto::Type;

constexpr uint64_t kDefaultOutputLimit = 1u << 20;
// Above this much queued output, the agent stops producing more (pipes and
// files are not read) until the host drains the channel.
constexpr size_t kOutHighWater = 8u << 20;
// Bytes read from the host channel per read(), straight into the decoder.
constexpr size_t kReadSize = 512u * 1024;
// At most this many requests at once.
constexpr size_t kMaxStreams = 4096;
// Credit is capped so a hostile or buggy host cannot overflow counters.
constexpr uint64_t kMaxCredit = uint64_t{1} << 40;

int64_t NowMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

int64_t BootMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

void SetNonBlock(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) (void)::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

enum class Kind { kExec, kWrite, kRead, kDrain };

struct StreamState {
  uint32_t id = 0;
  Kind kind = Kind::kDrain;
  uint64_t credit[proto::kChannels] = {proto::kInitialWindow, proto::kInitialWindow,
                                       proto::kInitialWindow};
  // exec
  pid_t pid = -1;
  bool exited = false;
  int wstatus = 0;
  UniqueFd stdin_w;
  std::string stdin_buf;
  bool stdin_end = false;
  UniqueFd out[proto::kChannels];  // [kStdout], [kStderr]
  uint64_t limit = kDefaultOutputLimit;
  uint64_t sent[proto::kChannels] = {0, 0, 0};
  bool truncated[proto::kChannels] = {false, false, false};
  int64_t start_ms = 0;
  int64_t deadline_ms = -1;
  bool timed_out = false;
  bool cancelled = false;
  bool killed = false;
  // fs.write
  std::optional<AtomicWrite> write;
  // fs.read
  UniqueFd rfd;
  // drain: queued bytes per channel, then END, then `final`
  std::string pending[proto::kChannels];
  size_t pending_off[proto::kChannels] = {0, 0, 0};
  bool pending_end[proto::kChannels] = {false, false, false};
  Type final_type = Type::kResult;
  json final;
};

class Loop {
 public:
  Loop(UniqueFd ch, const AgentOptions& opt) : ch_(std::move(ch)), opt_(opt) {}
  int Run();

 private:
  // Output.
  void Send(uint32_t stream, Type t, uint8_t flags, std::string_view payload) {
    proto::AppendFrame(out_, stream, t, flags, payload);
  }
  void SendJson(uint32_t stream, Type t, const json& j) { Send(stream, t, 0, j.dump(-1, ' ', false, json::error_handler_t::replace)); }
  void SendError(uint32_t stream, const Error& e);
  void SendResult(uint32_t stream, const json& j);
  void GrantCredit(uint32_t stream, uint8_t ch, uint64_t n) {
    while (n > 0) {
      auto part = static_cast<uint32_t>(std::min<uint64_t>(n, UINT32_MAX));
      out_ += proto::EncodeCredit(stream, ch, part);
      n -= part;
    }
  }
  bool OutputRoom() const { return out_.size() - out_off_ < kOutHighWater; }
  bool Flush();  // false when the channel is dead

  // Input.
  void OnFrame(proto::Frame f);
  void OnResume(const json& r);
  void OnOpen(uint32_t id, const std::string& payload);
  void StartExec(uint32_t id, const json& req);
  void StartWrite(uint32_t id, const json& req);
  void StartRead(uint32_t id, const json& req);

  // Streams.
  void PumpExec(StreamState& s, const pollfd* pout, const pollfd* perr, const pollfd* pin);
  void PumpRead(StreamState& s);
  void PumpDrain(StreamState& s);
  bool ExecDone(const StreamState& s) const;
  void FinishExec(StreamState& s);
  void KillExec(StreamState& s);
  void Reap();
  void KillEverything();

  UniqueFd ch_;
  AgentOptions opt_;
  UniqueFd sigfd_;
  proto::Decoder dec_;
  std::string out_;
  size_t out_off_ = 0;
  std::unique_ptr<char[]> bulk_;  // fs.read body buffer, with a header slot
  bool hello_ = false;
  bool shutdown_ = false;
  bool channel_eof_ = false;
  int64_t ready_ms_ = 0;
  bool restored_ = false;  // resumed from a snapshot
  std::map<uint32_t, std::unique_ptr<StreamState>> streams_;
  std::map<pid_t, uint32_t> exec_pids_;
};

void Loop::SendError(uint32_t stream, const Error& e) {
  json j{{"code", std::string(CodeName(e.code()))}, {"message", e.message()}};
  if (!e.fix().is_null()) j["fix"] = e.fix();
  if (e.details()) j["details"] = *e.details();
  SendJson(stream, Type::kError, j);
}

void Loop::SendResult(uint32_t stream, const json& j) {
  std::string text = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() <= proto::kMaxPayload) {
    Send(stream, Type::kResult, 0, text);
    return;
  }
  // Too big for one frame: the JSON travels as DATA on kStdout (under the
  // host's credit), then END, then RESULT {"result_in_data": true}.
  auto s = std::make_unique<StreamState>();
  s->id = stream;
  s->kind = Kind::kDrain;
  s->pending[proto::kStdout] = std::move(text);
  s->pending_end[proto::kStdout] = true;
  s->final = json{{"result_in_data", true}};
  streams_[stream] = std::move(s);
}

bool Loop::Flush() {
  while (out_off_ < out_.size()) {
    ssize_t n = ::send(ch_.get(), out_.data() + out_off_, out_.size() - out_off_, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = ::write(ch_.get(), out_.data() + out_off_, out_.size() - out_off_);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      return false;
    }
    out_off_ += static_cast<size_t>(n);
  }
  if (out_off_ == out_.size()) {
    out_.clear();
    out_off_ = 0;
  } else if (out_off_ > (1u << 20)) {
    out_.erase(0, out_off_);
    out_off_ = 0;
  }
  return true;
}

// The host restored this VM from a snapshot (docs/microvm.md, "Snapshots")
// and sends, before its own HELLO, what makes the copy this sandbox's own.
// Only a VM guest accepts it, only before the host's HELLO; a guest that
// cannot apply it ends rather than serve a copied CRNG state.
void Loop::OnResume(const json& r) {
  if (!opt_.vm || hello_) {
    SKIFF_LOG(Warn) << "resume ignored: " << (opt_.vm ? "after the host's HELLO" : "not a VM guest");
    return;
  }
  std::string seed;
  const json* hex = r.is_object() && r.contains("seed") ? &r["seed"] : nullptr;
  bool ok = hex && hex->is_string() && hex->get_ref<const std::string&>().size() % 2 == 0 &&
            r.contains("realtime_ns") && r["realtime_ns"].is_number_integer() &&
            (!r.contains("hostname") || r["hostname"].is_string());
  if (ok) {
    const std::string& h = hex->get_ref<const std::string&>();
    auto nib = [](char c) {
      return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    };
    for (size_t i = 0; ok && i < h.size(); i += 2) {
      int hi = nib(h[i]), lo = nib(h[i + 1]);
      ok = hi >= 0 && lo >= 0;
      seed += static_cast<char>(hi * 16 + lo);
    }
  }
  Status st = ok ? VmResume(seed, r["realtime_ns"].get<int64_t>(), r.value("hostname", std::string()))
                 : Status(InvalidRequest("malformed resume request"));
  explicit_bzero(seed.data(), seed.size());
  if (!st.ok()) VmPowerOff("skiff-agent: resume: " + st.error().message());
  restored_ = true;
  ready_ms_ = BootMs();
  json ops = json::array();
  for (const auto& o : SupportedOps()) ops.push_back(o);
  SendJson(0, Type::kHello,
           json{{"proto", proto::kVersion}, {"agent", AgentName()}, {"ops", ops}, {"restored", true}});
}

void Loop::OnFrame(proto::Frame f) {
  switch (f.type) {
    case Type::kHello: {
      json h = json::parse(f.payload, nullptr, false);
      if (h.is_object() && h.contains("resume")) {
        OnResume(h["resume"]);
        return;
      }
      if (!h.is_object() || !h.contains("proto") || h["proto"] != proto::kVersion) {
        SKIFF_LOG(Warn) << "host HELLO is not protocol " << proto::kVersion;
      }
      hello_ = true;
      return;
    }
    case Type::kOpen:
      if (f.stream == 0 || streams_.count(f.stream)) {
        SendError(f.stream, InvalidRequest("stream " + std::to_string(f.stream) + " is already open"));
        return;
      }
      OnOpen(f.stream, f.payload);
      return;
    case Type::kCredit: {
      auto it = streams_.find(f.stream);
      auto c = proto::DecodeCredit(f.payload);
      if (it == streams_.end() || !c || f.flags >= proto::kChannels) return;
      auto& cr = it->second->credit[f.flags];
      cr = std::min(kMaxCredit, cr + *c);
      return;
    }
    case Type::kData: {
      auto it = streams_.find(f.stream);
      if (it == streams_.end() || f.flags != proto::kStdin) return;
      StreamState& s = *it->second;
      if (s.kind == Kind::kExec) {
        if (!s.stdin_w || s.stdin_end) {
          GrantCredit(s.id, proto::kStdin, f.payload.size());  // nobody reads it: discard
          return;
        }
        if (s.stdin_buf.size() + f.payload.size() > 2 * size_t{proto::kInitialWindow}) {
          // The host ignored its credit; drop rather than grow.
          SKIFF_LOG(Warn) << "stream " << s.id << ": stdin beyond the granted credit dropped";
          return;
        }
        s.stdin_buf.append(f.payload);
      } else if (s.kind == Kind::kWrite && s.write) {
        auto st = s.write->Append(f.payload);
        if (!st.ok()) {
          s.write.reset();
          SendError(s.id, st.error());
          streams_.erase(it);
          return;
        }
        GrantCredit(s.id, proto::kStdin, f.payload.size());
      }
      return;
    }
    case Type::kEnd: {
      auto it = streams_.find(f.stream);
      if (it == streams_.end() || f.flags != proto::kStdin) return;
      StreamState& s = *it->second;
      if (s.kind == Kind::kExec) {
        s.stdin_end = true;
      } else if (s.kind == Kind::kWrite && s.write) {
        auto st = s.write->Commit();
        uint64_t n = s.write->written();
        s.write.reset();
        if (st.ok()) {
          SendResult(s.id, json{{"bytes_written", n}});
        } else {
          SendError(s.id, st.error());
        }
        streams_.erase(it);
      }
      return;
    }
    case Type::kCancel: {
      auto it = streams_.find(f.stream);
      if (it == streams_.end()) return;
      StreamState& s = *it->second;
      if (s.kind == Kind::kExec) {
        s.cancelled = true;
        KillExec(s);
        return;
      }
      if (s.kind == Kind::kWrite && s.write) s.write->Abort();
      SendError(s.id, Error(Code::kS218, "fs channel aborted: cancelled by the host"));
      streams_.erase(it);
      return;
    }
    default:
      // Unknown frame types and agent->host types sent by the host.
      SendError(f.stream, Error(Code::kS219, "operation not supported by this sandbox's agent: frame type " +
                                                 std::to_string(static_cast<int>(f.type))));
      return;
  }
}

void Loop::OnOpen(uint32_t id, const std::string& payload) {
  json req = json::parse(payload, nullptr, false);
  if (req.is_discarded() || !req.is_object())
    return SendError(id, InvalidRequest("request is not a JSON object"));
  if (!req.contains("op") || !req["op"].is_string())
    return SendError(id, InvalidRequest("op: expected a string"));
  if (streams_.size() >= kMaxStreams)
    return SendError(id, Platform("sandbox", "agent has too many open requests"));
  std::string op = req["op"].get<std::string>();
  namespace o = proto::op;
  Result<json> r = json();
  try {
    if (op == o::kExec) return StartExec(id, req);
    if (op == o::kFsWrite) return StartWrite(id, req);
    if (op == o::kFsRead) return StartRead(id, req);
    if (op == o::kInfo) {
      utsname u{};
      ::uname(&u);
      r = json{{"proto", proto::kVersion}, {"agent", AgentName()}, {"kernel", u.release},
               {"ready_ms", ready_ms_}, {"pid", ::getpid()}, {"restored", restored_}};
    } else if (op == o::kShutdown) {
      shutdown_ = true;
      r = json::object();
    } else if (op == o::kFsLs) {
      r = FsLs(req);
    } else if (op == o::kFsStat) {
      r = FsStat(req);
    } else if (op == o::kFsMkdir) {
      r = FsMkdir(req);
    } else if (op == o::kFsRm) {
      r = FsRm(req);
    } else if (op == o::kFsMv) {
      r = FsMv(req);
    } else if (op == o::kFsChmod) {
      r = FsChmod(req);
    } else if (op == o::kFsGrep) {
      r = FsGrep(req);
    } else if (op == o::kFsSed) {
      r = FsSed(req);
    } else {
      r = Error(Code::kS219, "operation not supported by this sandbox's agent: " + op);
    }
  } catch (const std::exception& e) {
    // nlohmann::json type errors on hostile input, std::bad_alloc, ...
    r = InvalidRequest(std::string("malformed request: ") + e.what());
  }
  if (r.ok()) {
    SendResult(id, *r);
  } else {
    SendError(id, r.error());
  }
}

void Loop::StartExec(uint32_t id, const json& req) {
  auto s = std::make_unique<StreamState>();
  s->id = id;
  s->kind = Kind::kExec;
  s->start_ms = NowMs();
  SpawnRequest sr;
  if (!req.contains("argv") || !req["argv"].is_array() || req["argv"].empty())
    return SendError(id, InvalidRequest("argv: expected a non-empty array of strings"));
  for (const auto& a : req["argv"]) {
    if (!a.is_string()) return SendError(id, InvalidRequest("argv: expected strings"));
    std::string v = a.get<std::string>();
    if (v.find('\0') != std::string::npos) return SendError(id, InvalidRequest("argv: NUL byte"));
    sr.argv.push_back(std::move(v));
  }
  if (sr.argv[0].empty()) return SendError(id, InvalidRequest("no program given"));
  if (req.contains("env") && !req["env"].is_null()) {
    if (!req["env"].is_array()) return SendError(id, InvalidRequest("env: expected an array of \"K=V\""));
    for (const auto& e : req["env"]) {
      if (!e.is_string()) return SendError(id, InvalidRequest("env: expected strings"));
      std::string v = e.get<std::string>();
      if (v.find('\0') != std::string::npos) return SendError(id, InvalidRequest("env: NUL byte"));
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0) continue;  // ignored, as the spec says
      sr.env.push_back(std::move(v));
    }
  }
  if (req.contains("cwd") && !req["cwd"].is_null()) {
    if (!req["cwd"].is_string()) return SendError(id, InvalidRequest("cwd: expected a string"));
    sr.cwd = req["cwd"].get<std::string>();
    if (sr.cwd.empty()) sr.cwd = "/";
    if (sr.cwd.find('\0') != std::string::npos) return SendError(id, InvalidRequest("cwd: NUL byte"));
  }
  if (req.contains("user") && !req["user"].is_null()) {
    if (!req["user"].is_string()) return SendError(id, InvalidRequest("user: expected a string"));
    // Resolved inside the sandbox, against the image's own passwd/group.
    auto creds = ResolveUser(req["user"].get<std::string>());
    if (!creds.ok()) return SendError(id, creds.error());
    sr.creds = std::move(creds).value();
  }
  auto timeout = ReqInt(req, "timeout_ms", -1);
  auto limit = ReqInt(req, "output_limit", static_cast<int64_t>(kDefaultOutputLimit));
  auto want_stdin = ReqBool(req, "stdin", false);
  if (!timeout.ok()) return SendError(id, timeout.error());
  if (!limit.ok()) return SendError(id, limit.error());
  if (!want_stdin.ok()) return SendError(id, want_stdin.error());
  if (*limit < 0) return SendError(id, InvalidRequest("output_limit: expected an integer >= 0"));
  s->limit = static_cast<uint64_t>(*limit);
  if (req.contains("timeout_ms") && !req["timeout_ms"].is_null()) {
    if (*timeout < 0) return SendError(id, InvalidRequest("timeout_ms: expected an integer >= 0"));
    s->deadline_ms = s->start_ms + std::min<int64_t>(*timeout, int64_t{1} << 40);
  }

  auto outcome = Spawn(sr, opt_.child_policy);
  if (!outcome.ok()) return SendError(id, outcome.error());
  if (!outcome->started) {
    // Reported as a normal result: stderr text, exit 127/126.
    s->kind = Kind::kDrain;
    s->pending[proto::kStderr] = outcome->failure.stderr_text;
    s->pending_end[proto::kStdout] = true;
    s->pending_end[proto::kStderr] = true;
    s->final = json{{"exit_code", outcome->failure.exit_code}, {"signal", 0},
                    {"stdout_truncated", false}, {"stderr_truncated", false},
                    {"timed_out", false}, {"cancelled", false},
                    {"duration_ms", NowMs() - s->start_ms}};
    streams_[id] = std::move(s);
    return;
  }
  Spawned& p = outcome->proc;
  s->pid = p.pid;
  s->stdin_w = std::move(p.stdin_w);
  s->out[proto::kStdout] = std::move(p.stdout_r);
  s->out[proto::kStderr] = std::move(p.stderr_r);
  SetNonBlock(s->stdin_w.get());
  SetNonBlock(s->out[proto::kStdout].get());
  SetNonBlock(s->out[proto::kStderr].get());
  if (!*want_stdin) s->stdin_end = true;
  exec_pids_[p.pid] = id;
  SendJson(id, Type::kMeta, json{{"pid", p.pid}});
  streams_[id] = std::move(s);
}

void Loop::StartWrite(uint32_t id, const json& req) {
  auto path = ReqPath(req, "path");
  if (!path.ok()) return SendError(id, path.error());
  uint32_t mode = 0644;
  if (req.contains("mode") && !req["mode"].is_null()) {
    const auto& m = req["mode"];
    bool okm = (m.is_number_integer() || m.is_number_unsigned()) && m.get<int64_t>() >= 0 &&
               m.get<int64_t>() <= 07777;
    if (!okm) return SendError(id, Error(Code::kS210, "invalid octal mode: " + m.dump()));
    mode = static_cast<uint32_t>(m.get<int64_t>());
  }
  auto parents = ReqBool(req, "parents", false);
  if (!parents.ok()) return SendError(id, parents.error());
  auto w = AtomicWrite::Begin(*path, mode, *parents);
  if (!w.ok()) return SendError(id, w.error());
  auto s = std::make_unique<StreamState>();
  s->id = id;
  s->kind = Kind::kWrite;
  s->write.emplace(std::move(*w));
  streams_[id] = std::move(s);
}

void Loop::StartRead(uint32_t id, const json& req) {
  auto path = ReqPath(req, "path");
  if (!path.ok()) return SendError(id, path.error());
  auto h = OpenForRead(*path);
  if (!h.ok()) return SendError(id, h.error());
  auto s = std::make_unique<StreamState>();
  s->id = id;
  s->kind = Kind::kRead;
  s->rfd = std::move(h->fd);
  SendJson(id, Type::kMeta, h->meta);
  streams_[id] = std::move(s);
}

void Loop::KillExec(StreamState& s) {
  if (s.pid > 0 && !s.killed) {
    ::kill(-s.pid, SIGKILL);
    if (!s.exited) ::kill(s.pid, SIGKILL);
  }
  s.killed = true;
  s.stdin_w.reset();
  s.stdin_buf.clear();
}

void Loop::PumpExec(StreamState& s, const pollfd* pout, const pollfd* perr, const pollfd* pin) {
  // stdin: write what the host sent; grant credit for what the child took.
  if (pin != nullptr && (pin->revents & (POLLOUT | POLLERR | POLLHUP)) && s.stdin_w) {
    while (!s.stdin_buf.empty()) {
      ssize_t n = ::write(s.stdin_w.get(), s.stdin_buf.data(), s.stdin_buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n < 0) {  // EPIPE: the child closed stdin; the rest is discarded
        GrantCredit(s.id, proto::kStdin, s.stdin_buf.size());
        s.stdin_buf.clear();
        s.stdin_w.reset();
        break;
      }
      GrantCredit(s.id, proto::kStdin, static_cast<uint64_t>(n));
      s.stdin_buf.erase(0, static_cast<size_t>(n));
    }
  }
  if (s.stdin_w && s.stdin_end && s.stdin_buf.empty()) s.stdin_w.reset();

  const pollfd* pf[proto::kChannels] = {nullptr, pout, perr};
  for (uint8_t ch = proto::kStdout; ch <= proto::kStderr; ++ch) {
    if (pf[ch] == nullptr || !s.out[ch] || !(pf[ch]->revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char buf[proto::kChunk];
    // A few reads per wakeup keep one busy stream from starving the rest.
    for (int rounds = 0; rounds < 4 && s.out[ch]; ++rounds) {
      uint64_t room = s.sent[ch] < s.limit ? s.limit - s.sent[ch] : 0;
      size_t want = sizeof buf;
      if (room > 0) {
        want = static_cast<size_t>(std::min<uint64_t>({sizeof buf, room, s.credit[ch]}));
        if (want == 0 || !OutputRoom()) break;  // wait for credit / channel
      }
      ssize_t n = ::read(s.out[ch].get(), buf, want);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n <= 0) {  // EOF (or error): this channel is done
        s.out[ch].reset();
        Send(s.id, Type::kEnd, ch, {});
        break;
      }
      if (room == 0) {
        s.truncated[ch] = true;  // over the cap: read and discarded
        continue;
      }
      Send(s.id, Type::kData, ch, std::string_view(buf, static_cast<size_t>(n)));
      s.sent[ch] += static_cast<uint64_t>(n);
      s.credit[ch] -= static_cast<uint64_t>(n);
    }
  }
}

bool Loop::ExecDone(const StreamState& s) const {
  if (!s.exited) return false;
  if (s.killed) return true;  // killed: the pipes are not waited for
  return !s.out[proto::kStdout] && !s.out[proto::kStderr];
}

void Loop::FinishExec(StreamState& s) {
  for (uint8_t ch = proto::kStdout; ch <= proto::kStderr; ++ch) {
    if (s.out[ch]) {
      s.out[ch].reset();
      Send(s.id, Type::kEnd, ch, {});
    }
  }
  int code = 0, sig = 0;
  if (WIFEXITED(s.wstatus)) {
    code = WEXITSTATUS(s.wstatus);
  } else if (WIFSIGNALED(s.wstatus)) {
    sig = WTERMSIG(s.wstatus);
    code = 128 + sig;
  }
  SendJson(s.id, Type::kResult,
           json{{"exit_code", code}, {"signal", sig},
                {"stdout_truncated", s.truncated[proto::kStdout]},
                {"stderr_truncated", s.truncated[proto::kStderr]},
                {"timed_out", s.timed_out}, {"cancelled", s.cancelled},
                {"duration_ms", NowMs() - s.start_ms}});
}

void Loop::PumpRead(StreamState& s) {
  if (!bulk_) bulk_ = std::make_unique<char[]>(proto::kHeaderSize + proto::kChunk);
  char* body = bulk_.get() + proto::kHeaderSize;
  for (int rounds = 0; rounds < 4; ++rounds) {
    if (!OutputRoom() || s.credit[proto::kStdout] == 0) return;
    size_t want = static_cast<size_t>(std::min<uint64_t>(proto::kChunk, s.credit[proto::kStdout]));
    ssize_t n = ::read(s.rfd.get(), body, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      SendError(s.id, FsError(errno, "read"));
      s.kind = Kind::kDrain;  // marks it finished (see Run)
      s.final = nullptr;
      return;
    }
    if (n == 0) {
      Send(s.id, Type::kEnd, proto::kStdout, {});
      SendJson(s.id, Type::kResult, json::object());
      s.kind = Kind::kDrain;
      s.final = nullptr;
      return;
    }
    s.credit[proto::kStdout] -= static_cast<uint64_t>(n);
    proto::EncodeHeader(bulk_.get(), static_cast<uint32_t>(n), s.id, Type::kData, proto::kStdout);
    size_t len = proto::kHeaderSize + static_cast<size_t>(n), sent = 0;
    if (out_off_ == out_.size()) {
      // Nothing queued: send straight from the read buffer, queue only
      // what the socket did not take.
      ssize_t w = ::send(ch_.get(), bulk_.get(), len, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0 && errno == ENOTSOCK) w = ::write(ch_.get(), bulk_.get(), len);
      if (w > 0) sent = static_cast<size_t>(w);
    }
    out_.append(bulk_.get() + sent, len - sent);
  }
}

void Loop::PumpDrain(StreamState& s) {
  for (uint8_t ch = 0; ch < proto::kChannels; ++ch) {
    std::string& p = s.pending[ch];
    while (s.pending_off[ch] < p.size()) {
      if (!OutputRoom() || s.credit[ch] == 0) return;
      size_t n = static_cast<size_t>(
          std::min<uint64_t>({p.size() - s.pending_off[ch], proto::kChunk, s.credit[ch]}));
      Send(s.id, Type::kData, ch, std::string_view(p).substr(s.pending_off[ch], n));
      s.pending_off[ch] += n;
      s.credit[ch] -= n;
    }
    if (s.pending_end[ch]) {
      Send(s.id, Type::kEnd, ch, {});
      s.pending_end[ch] = false;
    }
  }
  if (!s.final.is_null()) {
    SendJson(s.id, s.final_type, s.final);
    s.final = nullptr;
  }
}

void Loop::Reap() {
  for (;;) {
    int st = 0;
    pid_t pid = ::waitpid(-1, &st, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return;
    auto it = exec_pids_.find(pid);
    if (it == exec_pids_.end()) continue;  // an orphan or a failed spawn: reaped
    auto s = streams_.find(it->second);
    exec_pids_.erase(it);
    if (s == streams_.end()) continue;
    s->second->exited = true;
    s->second->wstatus = st;
    // The leader is gone; its group may live on holding the pipes. Kill it
    // too when the exec was already killed (timeout, cancel).
    if (s->second->killed) ::kill(-pid, SIGKILL);
  }
}

void Loop::KillEverything() {
  for (auto& [id, s] : streams_)
    if (s->kind == Kind::kExec && s->pid > 0) ::kill(-s->pid, SIGKILL);
  if (::getpid() == 1) ::kill(-1, SIGKILL);
}

int Loop::Run() {
  sigset_t set;
  ::sigemptyset(&set);
  ::sigaddset(&set, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  sigfd_.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sigfd_) {
    SKIFF_LOG(Error) << "signalfd: " << ErrnoName(errno);
    return 1;
  }
  SetNonBlock(ch_.get());
  ready_ms_ = VmReadyMillis() >= 0 ? VmReadyMillis() : BootMs();
  json ops = json::array();
  for (const auto& o : SupportedOps()) ops.push_back(o);
  SendJson(0, Type::kHello, json{{"proto", proto::kVersion}, {"agent", AgentName()}, {"ops", ops}});
  Reap();  // anything that died before the loop started

  std::vector<pollfd> pfds;
  struct Slot { uint32_t id; int out = -1, err = -1, in = -1; };
  std::vector<Slot> slots;
  for (;;) {
    // Finished streams leave; pending drains progress.
    for (auto it = streams_.begin(); it != streams_.end();) {
      StreamState& s = *it->second;
      if (s.kind == Kind::kDrain) PumpDrain(s);
      if (s.kind == Kind::kRead) PumpRead(s);
      bool done = false;
      if (s.kind == Kind::kDrain) {
        done = s.final.is_null();
        for (uint8_t ch = 0; ch < proto::kChannels; ++ch)
          done = done && s.pending_off[ch] >= s.pending[ch].size() && !s.pending_end[ch];
      } else if (s.kind == Kind::kExec) {
        // The host ended stdin and everything was delivered: the child sees EOF.
        if (s.stdin_w && s.stdin_end && s.stdin_buf.empty()) s.stdin_w.reset();
        int64_t now = NowMs();
        if (!s.killed && s.deadline_ms >= 0 && now >= s.deadline_ms) {
          s.timed_out = true;
          KillExec(s);
        }
        if (ExecDone(s)) {
          FinishExec(s);
          done = true;
        }
      }
      it = done ? streams_.erase(it) : std::next(it);
    }
    if (!Flush()) {
      SKIFF_LOG(Info) << "channel write failed; exiting";
      break;
    }
    if (shutdown_ && out_off_ == out_.size()) break;
    if (channel_eof_) break;

    pfds.clear();
    slots.clear();
    pfds.push_back({ch_.get(), static_cast<short>(POLLIN | (out_off_ < out_.size() ? POLLOUT : 0)), 0});
    pfds.push_back({sigfd_.get(), POLLIN, 0});
    int timeout = -1;
    int64_t now = NowMs();
    for (auto& [id, sp] : streams_) {
      StreamState& s = *sp;
      if (s.kind == Kind::kRead && s.credit[proto::kStdout] > 0 && OutputRoom()) timeout = 0;
      if (s.kind == Kind::kDrain && OutputRoom()) {
        for (uint8_t ch = 0; ch < proto::kChannels; ++ch)
          if (s.pending_off[ch] < s.pending[ch].size() && s.credit[ch] > 0) timeout = 0;
      }
      if (s.kind != Kind::kExec) continue;
      Slot sl{id};
      for (uint8_t ch = proto::kStdout; ch <= proto::kStderr; ++ch) {
        if (!s.out[ch]) continue;
        bool over = s.sent[ch] >= s.limit;
        if (!over && (s.credit[ch] == 0 || !OutputRoom())) continue;  // backpressure
        (ch == proto::kStdout ? sl.out : sl.err) = static_cast<int>(pfds.size());
        pfds.push_back({s.out[ch].get(), POLLIN, 0});
      }
      if (s.stdin_w && !s.stdin_buf.empty()) {
        sl.in = static_cast<int>(pfds.size());
        pfds.push_back({s.stdin_w.get(), POLLOUT, 0});
      }
      slots.push_back(sl);
      if (s.deadline_ms >= 0 && !s.killed) {
        int64_t left = std::max<int64_t>(0, s.deadline_ms - now);
        if (timeout < 0 || left < timeout) timeout = static_cast<int>(std::min<int64_t>(left, 1 << 30));
      }
    }
    int r = ::poll(pfds.data(), pfds.size(), timeout);
    if (r < 0) {
      if (errno == EINTR) continue;
      SKIFF_LOG(Error) << "poll: " << ErrnoName(errno);
      break;
    }
    if (pfds[1].revents & POLLIN) {
      signalfd_siginfo si;
      while (::read(sigfd_.get(), &si, sizeof si) > 0) {
      }
      Reap();
    }
    for (const Slot& sl : slots) {
      auto it = streams_.find(sl.id);
      if (it == streams_.end()) continue;
      PumpExec(*it->second, sl.out >= 0 ? &pfds[sl.out] : nullptr,
               sl.err >= 0 ? &pfds[sl.err] : nullptr, sl.in >= 0 ? &pfds[sl.in] : nullptr);
    }
    if (pfds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = ::read(ch_.get(), dec_.Prepare(kReadSize), kReadSize);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
        // retry on the next round
      } else if (n <= 0) {
        SKIFF_LOG(Info) << "channel closed by the host";
        channel_eof_ = true;
        continue;
      } else {
        dec_.Commit(static_cast<size_t>(n));
        for (;;) {
          auto f = dec_.Next();
          if (!f.ok()) {
            SKIFF_LOG(Error) << "corrupt channel: " << f.error().message();
            channel_eof_ = true;
            break;
          }
          if (!*f) break;
          OnFrame(std::move(**f));
        }
      }
    }
  }
  KillEverything();
  // Give the kernel a moment to deliver the kills, then reap what we can.
  Reap();
  // PID 1 of a VM must not exit (the kernel would panic): end the machine.
  if (opt_.vm) VmPowerOff(shutdown_ ? "" : "skiff-agent: host channel closed");
  return 0;
}

}  // namespace

std::string AgentName() { return std::string("skiff-agent/") + SKIFF_VERSION; }

std::vector<std::string> SupportedOps() {
  namespace o = proto::op;
  return {std::string(o::kInfo),    std::string(o::kExec),    std::string(o::kShutdown),
          std::string(o::kFsLs),    std::string(o::kFsStat),  std::string(o::kFsMkdir),
          std::string(o::kFsWrite), std::string(o::kFsRead),  std::string(o::kFsRm),
          std::string(o::kFsMv),    std::string(o::kFsChmod), std::string(o::kFsGrep),
          std::string(o::kFsSed)};
}

void PrepareProcess() {
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ign, nullptr);
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  ::umask(0);
  if (::chdir("/") < 0) {
    SKIFF_LOG(Warn) << "chdir(/): " << ErrnoName(errno);
  }
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &nofile);
  }
}

int RunAgent(UniqueFd channel, const AgentOptions& options) {
  Loop loop(std::move(channel), options);
  return loop.Run();
}

}  // namespace skiff::agent
