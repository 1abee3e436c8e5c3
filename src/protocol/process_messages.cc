#include "protocol/process_messages.h"

#include <signal.h>

#include <array>
#include <utility>

#include "protocol/message_fields.h"

namespace skiff::proto {

using nlohmann::json;

namespace {

constexpr std::array<std::pair<std::string_view, int>, 10> kSignals = {{
    {"INT", SIGINT},
    {"TERM", SIGTERM},
    {"KILL", SIGKILL},
    {"HUP", SIGHUP},
    {"QUIT", SIGQUIT},
    {"USR1", SIGUSR1},
    {"USR2", SIGUSR2},
    {"STOP", SIGSTOP},
    {"CONT", SIGCONT},
    {"WINCH", SIGWINCH},
}};

constexpr size_t kMaxTagBytes = 256;

template <typename F>
auto Answer(std::string_view what, F&& parse) -> decltype(parse()) {
  auto r = parse();
  if (!r.ok()) return field::AnswerError(what, r.error());
  return r;
}

// A list of strings without NUL bytes; `nonempty`: at least one, the first
// non-empty (argv).
Result<std::vector<std::string>> StringList(const json& j, const char* key, bool nonempty) {
  std::vector<std::string> out;
  if (field::Missing(j, key)) {
    if (nonempty) return InvalidRequest(std::string(key) + ": expected a non-empty array of strings");
    return out;
  }
  const json& a = j[key];
  if (!a.is_array() || (nonempty && a.empty()))
    return InvalidRequest(std::string(key) + (nonempty ? ": expected a non-empty array of strings"
                                                       : ": expected an array of strings"));
  for (const auto& v : a) {
    if (!v.is_string()) return InvalidRequest(std::string(key) + ": expected strings");
    std::string s = v.get<std::string>();
    if (s.find('\0') != std::string::npos) return InvalidRequest(std::string(key) + ": NUL byte");
    out.push_back(std::move(s));
  }
  if (nonempty && out[0].empty()) return InvalidRequest("no program given");
  return out;
}

Result<std::optional<std::string>> OptText(const json& j, const char* key) {
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> v, field::OptString(j, key));
  if (v && v->find('\0') != std::string::npos) return InvalidRequest(std::string(key) + ": NUL byte");
  return v;
}

Result<int64_t> Pid(const json& j) { return field::IntIn(j, "pid", 1, INT32_MAX); }

Result<TermSize> SizeFields(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "pty size"));
  TermSize t;
  SKIFF_ASSIGN_OR_RETURN(int64_t rows, field::IntIn(j, "rows", 1, kMaxTermSize));
  SKIFF_ASSIGN_OR_RETURN(int64_t cols, field::IntIn(j, "cols", 1, kMaxTermSize));
  t.rows = static_cast<int>(rows);
  t.cols = static_cast<int>(cols);
  return t;
}

Result<RingSpan> SpanFields(const json& j, const char* key) {
  if (!j.contains(key)) return InvalidRequest(std::string(key) + ": required");
  const json& s = j[key];
  SKIFF_RETURN_IF_ERROR(field::RequireObject(s, key));
  RingSpan r;
  SKIFF_ASSIGN_OR_RETURN(r.start, field::IntIn(s, "start", 0, INT64_MAX));
  SKIFF_ASSIGN_OR_RETURN(r.end, field::IntIn(s, "end", r.start, INT64_MAX));
  return r;
}

Result<ProcInfo> InfoFields(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "process"));
  ProcInfo p;
  SKIFF_ASSIGN_OR_RETURN(p.pid, Pid(j));
  SKIFF_ASSIGN_OR_RETURN(p.argv, StringList(j, "argv", false));
  SKIFF_ASSIGN_OR_RETURN(p.cwd, field::String(j, "cwd"));
  SKIFF_ASSIGN_OR_RETURN(p.user, field::OptString(j, "user"));
  SKIFF_ASSIGN_OR_RETURN(p.tag, field::OptString(j, "tag"));
  if (!field::Missing(j, "pty")) {
    SKIFF_ASSIGN_OR_RETURN(TermSize t, SizeFields(j["pty"]));
    p.pty = t;
  }
  SKIFF_ASSIGN_OR_RETURN(p.started_ms, field::IntIn(j, "started_ms", 0, INT64_MAX));
  SKIFF_ASSIGN_OR_RETURN(std::string state, field::String(j, "state"));
  if (state != "running" && state != "exited") return InvalidRequest("state: expected running or exited");
  p.running = state == "running";
  if (!p.running) {
    SKIFF_ASSIGN_OR_RETURN(int64_t code, field::IntIn(j, "exit_code", 0, 255));
    SKIFF_ASSIGN_OR_RETURN(int64_t sig, field::IntIn(j, "signal", 0, 127));
    SKIFF_ASSIGN_OR_RETURN(p.ended_ms, field::IntIn(j, "ended_ms", 0, INT64_MAX));
    p.exit_code = static_cast<int>(code);
    p.signal = static_cast<int>(sig);
  }
  SKIFF_ASSIGN_OR_RETURN(p.timed_out, field::Bool(j, "timed_out", false));
  SKIFF_ASSIGN_OR_RETURN(p.stdin_open, field::RequiredBool(j, "stdin_open"));
  SKIFF_ASSIGN_OR_RETURN(p.buffer_bytes, field::IntIn(j, "buffer_bytes", kMinProcBuffer, kMaxProcBuffer));
  SKIFF_ASSIGN_OR_RETURN(p.out, SpanFields(j, "stdout"));
  SKIFF_ASSIGN_OR_RETURN(p.err, SpanFields(j, "stderr"));
  SKIFF_ASSIGN_OR_RETURN(int64_t attached, field::IntIn(j, "attached", 0, kMaxAttachesPerProcess));
  p.attached = static_cast<int>(attached);
  return p;
}

}  // namespace

std::optional<int> SignalFromName(std::string_view name) {
  for (const auto& [n, sig] : kSignals)
    if (n == name) return sig;
  return std::nullopt;
}

const std::vector<std::string>& SignalNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    v.reserve(std::size(kSignals));
    for (const auto& [n, sig] : kSignals) v.emplace_back(n);
    return v;
  }();
  return names;
}

json TermSize::ToJson() const { return json{{"rows", rows}, {"cols", cols}}; }
json RingSpan::ToJson() const { return json{{"start", start}, {"end", end}}; }

// ------------------------------------------------------------ proc.start

json ProcStartRequest::ToJson() const {
  json j{{"op", kOp}, {"argv", argv}, {"env", env}, {"stdin", has_stdin}, {"buffer_bytes", buffer_bytes}};
  if (cwd) j["cwd"] = *cwd;
  if (user) j["user"] = *user;
  if (tag) j["tag"] = *tag;
  if (pty) j["pty"] = pty->ToJson();
  if (timeout_ms) j["timeout_ms"] = *timeout_ms;
  if (hold_output) j["hold_output"] = true;
  return j;
}

Result<ProcStartRequest> ProcStartRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  ProcStartRequest r;
  SKIFF_ASSIGN_OR_RETURN(r.argv, StringList(j, "argv", true));
  SKIFF_ASSIGN_OR_RETURN(r.env, StringList(j, "env", false));
  SKIFF_ASSIGN_OR_RETURN(r.cwd, OptText(j, "cwd"));
  SKIFF_ASSIGN_OR_RETURN(r.user, OptText(j, "user"));
  SKIFF_ASSIGN_OR_RETURN(r.tag, OptText(j, "tag"));
  if (r.tag && r.tag->size() > kMaxTagBytes)
    return InvalidRequest("tag: at most " + std::to_string(kMaxTagBytes) + " bytes");
  if (!field::Missing(j, "pty")) {
    auto size = SizeFields(j["pty"]);
    if (!size.ok())
      return InvalidRequest("pty: expected {rows, cols} in [1, " + std::to_string(kMaxTermSize) + "]");
    r.pty = *size;
  }
  SKIFF_ASSIGN_OR_RETURN(r.has_stdin, field::Bool(j, "stdin", false));
  if (!field::Missing(j, "buffer_bytes")) {
    SKIFF_ASSIGN_OR_RETURN(r.buffer_bytes, field::IntIn(j, "buffer_bytes", kMinProcBuffer, kMaxProcBuffer));
  }
  SKIFF_ASSIGN_OR_RETURN(r.timeout_ms, field::OptInt(j, "timeout_ms"));
  if (r.timeout_ms && *r.timeout_ms <= 0) return InvalidRequest("timeout_ms: expected an integer > 0");
  SKIFF_ASSIGN_OR_RETURN(r.hold_output, field::Bool(j, "hold_output", false));
  return r;
}

// ------------------------------------------------------------ ProcInfo

json ProcInfo::ToJson() const {
  json j{{"pid", pid},
         {"argv", argv},
         {"cwd", cwd},
         {"started_ms", started_ms},
         {"state", running ? "running" : "exited"},
         {"timed_out", timed_out},
         {"stdin_open", stdin_open},
         {"buffer_bytes", buffer_bytes},
         {"stdout", out.ToJson()},
         {"stderr", err.ToJson()},
         {"attached", attached}};
  if (user) j["user"] = *user;
  if (tag) j["tag"] = *tag;
  if (pty) j["pty"] = pty->ToJson();
  if (!running) {
    j["exit_code"] = exit_code;
    j["signal"] = signal;
    j["ended_ms"] = ended_ms;
  }
  return j;
}

Result<ProcInfo> ProcInfo::FromJson(const json& j) {
  return Answer("process record", [&] { return InfoFields(j); });
}

// ------------------------------------------------------------ proc.list

json ProcListRequest::ToJson() const { return json{{"op", kOp}}; }

Result<ProcListRequest> ProcListRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  return ProcListRequest{};
}

json ProcListResult::ToJson() const {
  json a = json::array();
  for (const auto& p : processes) a.push_back(p.ToJson());
  return json{{"processes", std::move(a)}};
}

Result<ProcListResult> ProcListResult::FromJson(const json& j) {
  return Answer("proc.list RESULT", [&]() -> Result<ProcListResult> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "RESULT"));
    SKIFF_ASSIGN_OR_RETURN(const json* arr, field::Array(j, "processes"));
    ProcListResult r;
    for (size_t i = 0; i < arr->size(); ++i) {
      auto p = InfoFields((*arr)[i]);
      if (!p.ok())
        return Error(p.error().code(), p.error().message() + " (processes[" + std::to_string(i) + "])");
      r.processes.push_back(std::move(p).value());
    }
    return r;
  });
}

// ------------------------------------------------------------ proc.output

json ProcOutputRequest::ToJson() const {
  return json{{"op", kOp},
              {"pid", pid},
              {"stdout_from", stdout_from},
              {"stderr_from", stderr_from},
              {"follow", follow}};
}

Result<ProcOutputRequest> ProcOutputRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  ProcOutputRequest r;
  SKIFF_ASSIGN_OR_RETURN(r.pid, Pid(j));
  SKIFF_ASSIGN_OR_RETURN(r.stdout_from, field::Int(j, "stdout_from", 0));
  SKIFF_ASSIGN_OR_RETURN(r.stderr_from, field::Int(j, "stderr_from", 0));
  if (r.stdout_from < 0) return InvalidRequest("stdout_from: expected an integer >= 0");
  if (r.stderr_from < 0) return InvalidRequest("stderr_from: expected an integer >= 0");
  SKIFF_ASSIGN_OR_RETURN(r.follow, field::Bool(j, "follow", false));
  return r;
}

json ProcOutputMeta::ToJson() const {
  json j = json::object();
  if (stdout_from) j["stdout_from"] = *stdout_from;
  if (stderr_from) j["stderr_from"] = *stderr_from;
  if (gap) j["gap"] = json{{"channel", gap->channel}, {"from", gap->from}, {"to", gap->to}};
  return j;
}

Result<ProcOutputMeta> ProcOutputMeta::FromJson(const json& j) {
  return Answer("proc.output META", [&]() -> Result<ProcOutputMeta> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "META"));
    ProcOutputMeta m;
    if (!field::Missing(j, "stdout_from")) {
      SKIFF_ASSIGN_OR_RETURN(int64_t v, field::IntIn(j, "stdout_from", 0, INT64_MAX));
      m.stdout_from = v;
    }
    if (!field::Missing(j, "stderr_from")) {
      SKIFF_ASSIGN_OR_RETURN(int64_t v, field::IntIn(j, "stderr_from", 0, INT64_MAX));
      m.stderr_from = v;
    }
    if (!field::Missing(j, "gap")) {
      const json& g = j["gap"];
      SKIFF_RETURN_IF_ERROR(field::RequireObject(g, "gap"));
      Gap gap;
      SKIFF_ASSIGN_OR_RETURN(int64_t ch, field::IntIn(g, "channel", 1, 2));
      gap.channel = static_cast<uint8_t>(ch);
      SKIFF_ASSIGN_OR_RETURN(gap.from, field::IntIn(g, "from", 0, INT64_MAX));
      SKIFF_ASSIGN_OR_RETURN(gap.to, field::IntIn(g, "to", gap.from, INT64_MAX));
      m.gap = gap;
    }
    if (m.gap.has_value() == (m.stdout_from.has_value() || m.stderr_from.has_value()))
      return InvalidRequest("expected either the start offsets or a gap");
    if (!m.gap && !(m.stdout_from && m.stderr_from)) return InvalidRequest("expected both start offsets");
    return m;
  });
}

// ------------------------------------------------------------ proc.input

json ProcInputRequest::ToJson() const { return json{{"op", kOp}, {"pid", pid}, {"close", close}}; }

Result<ProcInputRequest> ProcInputRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  ProcInputRequest r;
  SKIFF_ASSIGN_OR_RETURN(r.pid, Pid(j));
  SKIFF_ASSIGN_OR_RETURN(r.close, field::Bool(j, "close", false));
  return r;
}

json ProcInputResult::ToJson() const { return json{{"bytes_written", bytes_written}}; }

Result<ProcInputResult> ProcInputResult::FromJson(const json& j) {
  return Answer("proc.input RESULT", [&]() -> Result<ProcInputResult> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "RESULT"));
    ProcInputResult r;
    SKIFF_ASSIGN_OR_RETURN(r.bytes_written, field::IntIn(j, "bytes_written", 0, INT64_MAX));
    return r;
  });
}

// ------------------------------------------------------------ proc.signal

json ProcSignalRequest::ToJson() const { return json{{"op", kOp}, {"pid", pid}, {"signal", signal}}; }

Result<ProcSignalRequest> ProcSignalRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  ProcSignalRequest r;
  SKIFF_ASSIGN_OR_RETURN(r.pid, Pid(j));
  SKIFF_ASSIGN_OR_RETURN(r.signal, field::String(j, "signal"));
  if (!SignalFromName(r.signal)) {
    std::string names;
    for (const auto& n : SignalNames()) names += (names.empty() ? "" : ", ") + n;
    return InvalidRequest("signal: expected one of " + names);
  }
  return r;
}

// ------------------------------------------------------------ proc.wait

json ProcWaitRequest::ToJson() const {
  json j{{"op", kOp}, {"pid", pid}};
  if (timeout_ms) j["timeout_ms"] = *timeout_ms;
  return j;
}

Result<ProcWaitRequest> ProcWaitRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  ProcWaitRequest r;
  SKIFF_ASSIGN_OR_RETURN(r.pid, Pid(j));
  SKIFF_ASSIGN_OR_RETURN(r.timeout_ms, field::OptInt(j, "timeout_ms"));
  if (r.timeout_ms && *r.timeout_ms < 0) return InvalidRequest("timeout_ms: expected an integer >= 0");
  return r;
}

// ------------------------------------------------------------ proc.resize

json ProcResizeRequest::ToJson() const {
  return json{{"op", kOp}, {"pid", pid}, {"rows", size.rows}, {"cols", size.cols}};
}

Result<ProcResizeRequest> ProcResizeRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  ProcResizeRequest r;
  SKIFF_ASSIGN_OR_RETURN(r.pid, Pid(j));
  SKIFF_ASSIGN_OR_RETURN(r.size, SizeFields(j));
  return r;
}

// ------------------------------------------------------------ proc.forget

json ProcForgetRequest::ToJson() const { return json{{"op", kOp}, {"pid", pid}}; }

Result<ProcForgetRequest> ProcForgetRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  ProcForgetRequest r;
  SKIFF_ASSIGN_OR_RETURN(r.pid, Pid(j));
  return r;
}

}  // namespace skiff::proto
