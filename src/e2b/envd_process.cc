// envd's process.Process service (docs/e2b.md#processes) over skiff's live
// processes: Start and Connect stream ProcessEvents (start, data, keepalive,
// end) in Connect envelopes; List, SendInput, CloseStdin, SendSignal and
// Update are unary. A process outlives the HTTP stream that started it:
// a client that goes away only stops following its output.
#include <signal.h>

#include <cstring>

#include "base/text.h"
#include "e2b/api.h"
#include "e2b/connect_envelope.h"
#include "e2b/proto_json.h"
#include "protocol/frame.h"

namespace skiff::e2b {

namespace {

using nlohmann::json;

constexpr std::string_view kStreamType = "application/connect+json";

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

Reply UnaryError(ConnectCode c, std::string_view message) {
  return Reply::Json(ConnectHttpStatus(c), ConnectErrorBody(c, message));
}
Reply UnaryError(const Error& e) { return UnaryError(ConnectCodeOf(e), e.message()); }

// The pid a ProcessSelector names ({pid} or {tag}); a tag is looked up.
Result<int64_t> Selected(SandboxService& svc, const std::string& id, const json& msg) {
  const json* sel = Member(msg, "process");
  if (!sel || !sel->is_object()) return InvalidRequest("process: a selector ({pid} or {tag}) is required");
  auto pid = OptUint(*sel, "pid", INT32_MAX);
  if (!pid.ok()) return pid.error();
  auto tag = OptString(*sel, "tag");
  if (!tag.ok()) return tag.error();
  if (*pid && *tag) return InvalidRequest("process: pid and tag are one of a kind; give one");
  if (*pid) return static_cast<int64_t>(**pid);
  if (!*tag) return InvalidRequest("process: a selector ({pid} or {tag}) is required");
  auto listed = svc.Process(id, proto::ProcListRequest{});
  if (!listed.ok()) return listed.error();
  auto list = proto::ProcListResult::FromJson(*listed);
  if (!list.ok()) return list.error();
  for (const proto::ProcInfo& p : list->processes)
    if (p.running && p.tag == **tag) return p.pid;
  return Error(Code::kS220, "process with tag " + **tag + " not found");
}

// What envd reports when a process ended: Go's exec status wording.
json EndEvent(const proto::ProcInfo& info) {
  json end = {{"exited", true}};
  if (info.signal != 0) {
    const char* name = info.signal == SIGKILL   ? "killed"
                       : info.signal == SIGTERM ? "terminated"
                       : info.signal == SIGINT  ? "interrupt"
                                                : nullptr;
    std::string status = "signal: " + std::string(name ? name : strsignal(info.signal));
    end["exitCode"] = -1;
    end["status"] = status;
    end["error"] = status;
  } else {
    std::string status = "exit status " + std::to_string(info.exit_code);
    end["exitCode"] = info.exit_code;
    end["status"] = status;
    if (info.exit_code != 0) end["error"] = status;
  }
  return {{"event", {{"end", end}}}};
}

// Follows a process's output into ProcessEvent envelopes, with keepalives
// while it is quiet.
class EventStream final : public ProcessOutputSink {
 public:
  EventStream(ResponseWriter& out, bool pty, int64_t keepalive_ms)
      : out_(out), pty_(pty), keepalive_ms_(keepalive_ms), last_ms_(MonotonicMillis()) {}
  bool Event(const json& e) {
    last_ms_ = MonotonicMillis();
    return out_.Write(Envelope(kEnvelopeMessage, Dump(e)));
  }
  bool OnStart(int64_t, int64_t) override { return true; }
  bool OnData(uint8_t channel, int64_t, std::string_view bytes) override {
    const char* key = pty_ ? "pty" : channel == proto::kStderr ? "stderr" : "stdout";
    return Event({{"event", {{"data", {{key, Base64Encode(bytes)}}}}}});
  }
  // E2B's events have no gap: the bytes the buffer lost are not sent.
  bool OnGap(uint8_t, int64_t, int64_t) override { return true; }
  bool Wanted() override {
    if (!out_.Alive()) return false;
    if (MonotonicMillis() - last_ms_ >= keepalive_ms_)
      return Event({{"event", {{"keepalive", json::object()}}}});
    return true;
  }

 private:
  ResponseWriter& out_;
  bool pty_;
  int64_t keepalive_ms_;
  int64_t last_ms_;
};

// Streams `pid`'s events from `from` (stdout, stderr offsets) until it ends,
// then the end event and the end of the stream. The start event was sent.
void Follow(SandboxService& svc, const std::string& id, int64_t pid, bool pty,
            std::pair<int64_t, int64_t> from, const Request& req, ResponseWriter& out) {
  int64_t keepalive_ms = 90000;
  if (std::string k = req.Header("keepalive-ping-interval"); !k.empty()) {
    char* end = nullptr;
    long v = std::strtol(k.c_str(), &end, 10);
    if (end != k.c_str() && *end == '\0' && v > 0 && v <= 3600) keepalive_ms = v * 1000;
  }
  EventStream events(out, pty, keepalive_ms);
  auto info = svc.ProcessOutput(id, proto::ProcOutputRequest{pid, from.first, from.second, true}, events);
  if (!info.ok()) {
    // The sandbox went away (killed) or the agent failed: the stream is
    // dropped, as envd's are when its sandbox dies; the SDK then asks
    // /health and reports the sandbox's end.
    if (info.error().code() == Code::kS002 || info.error().code() == Code::kS004 ||
        info.error().code() == Code::kS300)
      return out.Drop();
    out.Write(EndStream(
        std::make_pair(std::string(ConnectCodeName(ConnectCodeOf(info.error()))), info.error().message())));
    return;
  }
  if (!out.Alive()) return;
  if (info->running) return;  // the reader went away (Wanted said no)
  if (events.Event(EndEvent(*info))) out.Write(EndStream());
}

}  // namespace

void Api::ProcessRpc(const Envd& e, const std::string& method, const Request& req, const std::string& body,
                     ResponseWriter& out) {
  const std::string& id = e.record.sandbox_id;
  bool streaming = method == "Start" || method == "Connect";
  // A streaming call's request is one enveloped message; a unary call's is
  // the message itself.
  Result<std::string> text = streaming ? SingleMessage(body) : Result<std::string>(body);
  Result<json> msg = text.ok() ? ParseMessage(*text) : Result<json>(text.error());
  auto fail = [&](const Error& err) {
    if (!streaming) return out.Send(UnaryError(err));
    if (!out.Start(200, kStreamType, {})) return;
    out.Write(EndStream(std::make_pair(std::string(ConnectCodeName(ConnectCodeOf(err))), err.message())));
  };
  if (!msg.ok()) return fail(msg.error());

  if (method == "Start") {
    proto::ProcStartRequest start;
    const json* p = Member(*msg, "process");
    if (!p || !p->is_object()) return fail(InvalidRequest("process: required"));
    auto cmd = OptString(*p, "cmd");
    if (!cmd.ok()) return fail(cmd.error());
    if (!*cmd || (*cmd)->empty()) return fail(InvalidRequest("process.cmd: required"));
    start.argv.push_back(**cmd);
    if (const json* args = Member(*p, "args")) {
      if (!args->is_array()) return fail(InvalidRequest("process.args: expected an array of strings"));
      for (const json& a : *args) {
        if (!a.is_string()) return fail(InvalidRequest("process.args: expected an array of strings"));
        start.argv.push_back(a.get<std::string>());
      }
    }
    if (const json* envs = Member(*p, "envs")) {
      if (!envs->is_object()) return fail(InvalidRequest("process.envs: expected an object of strings"));
      for (auto& [k, v] : envs->items()) {
        if (!v.is_string()) return fail(InvalidRequest("process.envs." + k + ": expected a string"));
        start.env.push_back(k + "=" + v.get<std::string>());
      }
    }
    auto cwd = OptString(*p, "cwd");
    if (!cwd.ok()) return fail(cwd.error());
    start.cwd = *cwd ? e.Resolve(**cwd) : e.Home();
    if (!e.user.empty()) start.user = e.user;
    auto tag = OptString(*msg, "tag");
    if (!tag.ok()) return fail(tag.error());
    start.tag = *tag;
    auto with_stdin = OptBool(*msg, "stdin");
    if (!with_stdin.ok()) return fail(with_stdin.error());
    if (const json* pty = Member(*msg, "pty")) {
      const json* size = Member(*pty, "size");
      proto::TermSize ts;
      if (size) {
        auto cols = OptUint(*size, "cols", proto::kMaxTermSize);
        auto rows = OptUint(*size, "rows", proto::kMaxTermSize);
        if (!cols.ok()) return fail(cols.error());
        if (!rows.ok()) return fail(rows.error());
        if (*cols && **cols > 0) ts.cols = static_cast<int>(**cols);
        if (*rows && **rows > 0) ts.rows = static_cast<int>(**rows);
      }
      start.pty = ts;
    }
    // envd keeps stdin open only when asked; a terminal always has one.
    start.has_stdin = start.pty.has_value() || with_stdin->value_or(false);
    if (std::string t = req.Header("connect-timeout-ms"); !t.empty()) {
      char* end = nullptr;
      long long v = std::strtoll(t.c_str(), &end, 10);
      if (end != t.c_str() && *end == '\0' && v > 0) start.timeout_ms = v;
    }
    auto started = all_.Process(id, start);
    if (!started.ok()) return fail(started.error());
    auto pid = started->value("pid", int64_t{0});
    if (!out.Start(200, kStreamType, {})) return;
    if (!out.Write(Envelope(kEnvelopeMessage, Dump({{"event", {{"start", {{"pid", pid}}}}}})))) return;
    return Follow(all_, id, pid, start.pty.has_value(), {0, 0}, req, out);
  }

  if (method == "Connect") {
    auto pid = Selected(all_, id, *msg);
    if (!pid.ok()) return fail(pid.error());
    // Live output from now on: where each channel has reached.
    auto listed = all_.Process(id, proto::ProcListRequest{});
    if (!listed.ok()) return fail(listed.error());
    auto list = proto::ProcListResult::FromJson(*listed);
    if (!list.ok()) return fail(list.error());
    const proto::ProcInfo* info = nullptr;
    for (const proto::ProcInfo& p : list->processes)
      if (p.pid == *pid && p.running) info = &p;
    if (!info) return fail(Error(Code::kS220, "process with pid " + std::to_string(*pid) + " not found"));
    if (!out.Start(200, kStreamType, {})) return;
    if (!out.Write(Envelope(kEnvelopeMessage, Dump({{"event", {{"start", {{"pid", *pid}}}}}})))) return;
    return Follow(all_, id, *pid, info->pty.has_value(), {info->out.end, info->err.end}, req, out);
  }

  if (method == "List") {
    auto listed = all_.Process(id, proto::ProcListRequest{});
    if (!listed.ok()) return fail(listed.error());
    auto list = proto::ProcListResult::FromJson(*listed);
    if (!list.ok()) return fail(list.error());
    json procs = json::array();
    for (const proto::ProcInfo& p : list->processes) {
      if (!p.running) continue;
      json cfg = {{"cmd", p.argv.empty() ? std::string() : p.argv[0]},
                  {"args", json::array()},
                  {"envs", json::object()},
                  {"cwd", p.cwd}};
      for (size_t i = 1; i < p.argv.size(); ++i) cfg["args"].push_back(p.argv[i]);
      json entry = {{"config", cfg}, {"pid", p.pid}};
      if (p.tag) entry["tag"] = *p.tag;
      procs.push_back(entry);
    }
    return out.Send(Reply::Json(200, {{"processes", procs}}));
  }

  if (method == "SendInput" || method == "CloseStdin") {
    auto pid = Selected(all_, id, *msg);
    if (!pid.ok()) return fail(pid.error());
    std::string bytes;
    if (method == "SendInput") {
      const json* input = Member(*msg, "input");
      if (!input || !input->is_object()) return fail(InvalidRequest("input: required"));
      const json* b = Member(*input, "stdin");
      if (!b) b = Member(*input, "pty");
      if (!b) return fail(InvalidRequest("input: stdin or pty bytes required"));
      auto decoded = Bytes(*b, "input");
      if (!decoded.ok()) return fail(decoded.error());
      bytes = std::move(*decoded);
    }
    bool sent = false;
    ByteSource src = [&]() -> Result<std::string> {
      if (sent) return std::string();
      sent = true;
      return std::move(bytes);
    };
    auto r = all_.ProcessInput(id, proto::ProcInputRequest{*pid, method == "CloseStdin"}, src);
    if (!r.ok()) return fail(r.error());
    return out.Send(Reply::Json(200, json::object()));
  }

  if (method == "SendSignal") {
    auto pid = Selected(all_, id, *msg);
    if (!pid.ok()) return fail(pid.error());
    const json* s = Member(*msg, "signal");
    std::string name;
    if (s && ((s->is_string() && *s == "SIGNAL_SIGKILL") || (s->is_number_integer() && *s == SIGKILL))) {
      name = "KILL";
    } else if (s &&
               ((s->is_string() && *s == "SIGNAL_SIGTERM") || (s->is_number_integer() && *s == SIGTERM))) {
      name = "TERM";
    } else {
      return fail(InvalidRequest("signal: expected SIGNAL_SIGKILL or SIGNAL_SIGTERM"));
    }
    auto r = all_.Process(id, proto::ProcSignalRequest{*pid, name});
    // A process that already exited is, for E2B, not there to signal.
    if (!r.ok() && r.error().code() == Code::kS221)
      return fail(Error(Code::kS220, "process with pid " + std::to_string(*pid) + " not found"));
    if (!r.ok()) return fail(r.error());
    return out.Send(Reply::Json(200, json::object()));
  }

  if (method == "Update") {
    auto pid = Selected(all_, id, *msg);
    if (!pid.ok()) return fail(pid.error());
    const json* pty = Member(*msg, "pty");
    const json* size = pty ? Member(*pty, "size") : nullptr;
    if (!size) return out.Send(Reply::Json(200, json::object()));  // nothing to change
    auto cols = OptUint(*size, "cols", proto::kMaxTermSize);
    auto rows = OptUint(*size, "rows", proto::kMaxTermSize);
    if (!cols.ok()) return fail(cols.error());
    if (!rows.ok()) return fail(rows.error());
    if (!*cols || !*rows || **cols == 0 || **rows == 0)
      return fail(InvalidRequest("pty.size: cols and rows >= 1 required"));
    proto::ProcResizeRequest rz;
    rz.pid = *pid;
    rz.size.cols = static_cast<int>(**cols);
    rz.size.rows = static_cast<int>(**rows);
    auto r = all_.Process(id, rz);
    if (!r.ok()) return fail(r.error());
    return out.Send(Reply::Json(200, json::object()));
  }

  fail(Error(Code::kS219, "process." + method + " is not supported by skiff (docs/e2b.md#differences)"));
}

}  // namespace skiff::e2b
