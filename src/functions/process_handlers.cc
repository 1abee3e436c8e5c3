#include "functions/process_handlers.h"

#include <memory>
#include <utility>

#include "base/text.h"
#include "functions/decode.h"
#include "functions/errors.h"
#include "functions/process_output_lines.h"
#include "protocol/process_call.h"

namespace skiff::fn {

namespace {

using nlohmann::json;

Result<int64_t> ReadPid(const Fields& f) {
  const json* v = f.Get("pid");
  if (v == nullptr) return MissingField("pid", "integer");
  SKIFF_ASSIGN_OR_RETURN(std::optional<uint64_t> pid, f.OptUint("pid", INT32_MAX));
  if (!pid || *pid == 0) return BadField("pid", "expected a process id > 0");
  return static_cast<int64_t>(*pid);
}

// sandbox_id and pid, the head of every request but start and list.
struct Target {
  std::string id;
  int64_t pid = 0;
};
Result<Target> ReadTarget(const Fields& f) {
  SKIFF_ASSIGN_OR_RETURN(std::string raw, f.RequiredString("sandbox_id"));
  SKIFF_ASSIGN_OR_RETURN(int64_t pid, ReadPid(f));
  SKIFF_ASSIGN_OR_RETURN(std::string id, ParseSandboxId(raw));
  return Target{std::move(id), pid};
}

Result<proto::TermSize> ReadSize(const Fields& f) {
  proto::TermSize t;
  SKIFF_ASSIGN_OR_RETURN(std::optional<uint64_t> rows, f.OptUint("rows", proto::kMaxTermSize));
  SKIFF_ASSIGN_OR_RETURN(std::optional<uint64_t> cols, f.OptUint("cols", proto::kMaxTermSize));
  if (!rows) return MissingField(f.Path("rows"), "integer");
  if (!cols) return MissingField(f.Path("cols"), "integer");
  if (*rows == 0) return BadField(f.Path("rows"), "expected 1 to " + std::to_string(proto::kMaxTermSize));
  if (*cols == 0) return BadField(f.Path("cols"), "expected 1 to " + std::to_string(proto::kMaxTermSize));
  t.rows = static_cast<int>(*rows);
  t.cols = static_cast<int>(*cols);
  return t;
}

}  // namespace

Result<json> HandleProcessStart(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(std::string raw_id, f.RequiredString("sandbox_id"));
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> cmd, f.OptString("cmd"));
  SKIFF_ASSIGN_OR_RETURN(std::vector<std::string> args, f.OptStringArray("args"));
  SKIFF_ASSIGN_OR_RETURN(std::vector<std::string> argv, f.OptStringArray("argv"));
  const json* env = f.Get("env");
  if (env != nullptr && !env->is_array() && !env->is_object()) return WrongType("env", "env", *env);
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> workdir, f.OptPath("workdir"));
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> user, f.OptString("user"));
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> tag, f.OptString("tag"));
  SKIFF_ASSIGN_OR_RETURN(bool with_stdin, f.OptBool("stdin", false));
  SKIFF_ASSIGN_OR_RETURN(std::optional<uint64_t> buffer,
                         f.OptUint("buffer_bytes", static_cast<uint64_t>(proto::kMaxProcBuffer)));
  SKIFF_ASSIGN_OR_RETURN(std::optional<uint64_t> timeout, f.OptUint("timeout_ms", kMax32));
  SKIFF_ASSIGN_OR_RETURN(bool hold_output, f.OptBool("hold_output", false));
  std::optional<proto::TermSize> pty;
  if (const json* p = f.Get("pty")) {
    if (p->is_boolean()) {
      if (p->get<bool>()) pty = proto::TermSize{};
    } else if (p->is_object()) {
      SKIFF_ASSIGN_OR_RETURN(pty, ReadSize(Fields(*p, "pty")));
    } else {
      return WrongType("pty", "boolean or {rows, cols}", *p);
    }
  }
  // Request-only rules.
  SKIFF_ASSIGN_OR_RETURN(std::string id, ParseSandboxId(raw_id));
  std::string cmd_s = cmd.value_or("");
  SKIFF_RETURN_IF_ERROR(NoNul(cmd_s, "cmd"));
  for (size_t i = 0; i < args.size(); ++i) {
    SKIFF_RETURN_IF_ERROR(NoNul(args[i], "args[" + std::to_string(i) + "]"));
  }
  for (size_t i = 0; i < argv.size(); ++i) {
    SKIFF_RETURN_IF_ERROR(NoNul(argv[i], "argv[" + std::to_string(i) + "]"));
  }
  proto::ProcStartRequest req;
  SKIFF_ASSIGN_OR_RETURN(req.argv, ResolveCommand(cmd_s, args, argv));
  SKIFF_ASSIGN_OR_RETURN(Env parsed_env, ParseEnv(env, "env"));
  for (auto& [k, v] : parsed_env) req.env.push_back(k + "=" + v);
  req.cwd = std::move(workdir);
  if (user) {
    SKIFF_RETURN_IF_ERROR(NoNul(*user, "user"));
    if (user->empty()) return BadField("user", "must not be empty");
    req.user = std::move(user);
  }
  if (tag) {
    SKIFF_RETURN_IF_ERROR(NoNul(*tag, "tag"));
    if (tag->size() > 256) return BadField("tag", "at most 256 bytes");
    req.tag = std::move(tag);
  }
  req.pty = pty;
  req.has_stdin = with_stdin || pty.has_value();
  req.hold_output = hold_output;
  if (buffer) {
    if (*buffer < static_cast<uint64_t>(proto::kMinProcBuffer))
      return BadField("buffer_bytes", "expected " + std::to_string(proto::kMinProcBuffer) + " to " +
                                          std::to_string(proto::kMaxProcBuffer));
    req.buffer_bytes = static_cast<int64_t>(*buffer);
  }
  if (timeout) {
    if (*timeout == 0) return BadField("timeout_ms", "expected an integer > 0 (absent: no deadline)");
    req.timeout_ms = static_cast<int64_t>(*timeout);
  }
  SKIFF_ASSIGN_OR_RETURN(json info, ctx.manager.Process(id, req));
  info["sandbox_id"] = id;
  return info;
}

Result<json> HandleProcessList(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(std::string id, ReadSandboxId(f));
  return ctx.manager.Process(id, proto::ProcListRequest{});
}

namespace {

// Keeps up to `max` bytes per channel of a non-followed output call.
class InlineOutput final : public ProcessOutputSink {
 public:
  explicit InlineOutput(uint64_t max) : max_(max) {}
  bool OnStart(int64_t out_from, int64_t err_from) override {
    from_[1] = next_[1] = out_from;
    from_[2] = next_[2] = err_from;
    return true;
  }
  bool OnData(uint8_t ch, int64_t offset, std::string_view bytes) override {
    std::string& b = bytes_[ch];
    if (offset != next_[ch] || b.size() >= max_) return true;  // full: the rest is read again later
    size_t n = std::min<size_t>(bytes.size(), max_ - b.size());
    b.append(bytes.substr(0, n));
    next_[ch] += static_cast<int64_t>(n);
    return true;
  }
  bool OnGap(uint8_t ch, int64_t from, int64_t to) override {
    if (bytes_[ch].size() < max_ && next_[ch] == from) {
      gaps_.push_back({{"channel", ChannelName(ch)}, {"from", from}, {"to", to}});
      next_[ch] = to;
    }
    return true;
  }
  json Channel(uint8_t ch) const {
    return {{"from", from_[ch]}, {"next", next_[ch]}, {"data", Base64Encode(bytes_[ch])}};
  }
  const json& gaps() const { return gaps_; }

 private:
  uint64_t max_;
  int64_t from_[3] = {0, 0, 0};
  int64_t next_[3] = {0, 0, 0};
  std::string bytes_[3];
  json gaps_ = json::array();
};

}  // namespace

Result<json> HandleProcessOutput(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(Target t, ReadTarget(f));
  SKIFF_ASSIGN_OR_RETURN(std::optional<uint64_t> out_from, f.OptUint("stdout_from", INT64_MAX));
  SKIFF_ASSIGN_OR_RETURN(std::optional<uint64_t> err_from, f.OptUint("stderr_from", INT64_MAX));
  SKIFF_ASSIGN_OR_RETURN(bool follow, f.OptBool("follow", false));
  SKIFF_ASSIGN_OR_RETURN(std::optional<uint64_t> max_bytes, f.OptUint("max_bytes", kProcessOutputMaxBytes));
  proto::ProcOutputRequest req{t.pid, static_cast<int64_t>(out_from.value_or(0)),
                               static_cast<int64_t>(err_from.value_or(0)), follow};
  if (follow) {
    if (ctx.channels == nullptr)
      return InvalidRequest("follow: streamed output needs a data-channel transport (HTTP or WebSocket)");
    // The stream runs when a reader attaches to the channel; check the
    // process exists first, so a bad pid is this call's error.
    SKIFF_ASSIGN_OR_RETURN(json list, ctx.manager.Process(t.id, proto::ProcListRequest{}));
    bool found = false;
    for (const json& p : list["processes"]) found = found || p.value("pid", int64_t{0}) == t.pid;
    if (!found)
      return Error(Code::kS220, "process not found: " + std::to_string(t.pid) + " in sandbox " + t.id);
    SandboxService* manager = &ctx.manager;
    std::string id = t.id;
    SKIFF_ASSIGN_OR_RETURN(
        json ref, ctx.channels->CreateReadChannel([manager, id, req](const ByteSink& sink) -> Status {
          ProcessOutputLines lines(sink, [&sink] { return sink(std::string_view()); });
          auto info = manager->ProcessOutput(id, req, lines);
          if (!info.ok()) {
            (void)lines.Fail(ErrorToWire(info.error(), ""));
            return info.error();
          }
          (void)lines.End(*info);
          return OkStatus();
        }));
    return json{{"sandbox_id", t.id}, {"pid", t.pid}, {"stream", std::move(ref)}};
  }
  InlineOutput out(max_bytes.value_or(kProcessOutputDefaultBytes));
  SKIFF_ASSIGN_OR_RETURN(proto::ProcInfo info, ctx.manager.ProcessOutput(t.id, req, out));
  return json{{"sandbox_id", t.id},       {"pid", t.pid},       {"stdout", out.Channel(1)},
              {"stderr", out.Channel(2)}, {"gaps", out.gaps()}, {"process", info.ToJson()}};
}

Result<json> HandleProcessInput(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(Target t, ReadTarget(f));
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> data, f.OptString("data"));
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> data_b64, f.OptString("data_base64"));
  SKIFF_ASSIGN_OR_RETURN(bool close, f.OptBool("close", false));
  const json* content = f.Get("content");
  if ((data ? 1 : 0) + (data_b64 ? 1 : 0) + (content ? 1 : 0) > 1)
    return InvalidRequest("give one of data, data_base64 or content");
  ByteSource source;
  if (content != nullptr) {
    // A data channel's bytes, streamed to the process as they come.
    if (!content->is_object()) return WrongType("content", "channel reference", *content);
    Fields ref(*content, "content");
    SKIFF_ASSIGN_OR_RETURN(std::string channel_id, ref.RequiredString("channel_id"));
    SKIFF_ASSIGN_OR_RETURN(std::string access_key, ref.RequiredString("access_key"));
    SKIFF_ASSIGN_OR_RETURN(std::string direction, ref.RequiredString("direction"));
    if (ctx.channels == nullptr)
      return InvalidRequest("content: channel references are not available on this transport");
    auto inner = std::make_shared<ByteSource>();
    ChannelBroker* broker = ctx.channels;
    json r = {{"channel_id", channel_id}, {"access_key", access_key}, {"direction", direction}};
    source = [inner, broker, r]() -> Result<std::string> {
      if (!*inner) {
        SKIFF_ASSIGN_OR_RETURN(*inner, broker->AttachReader(r));
      }
      return (*inner)();
    };
  } else {
    std::string bytes;
    if (data) bytes = std::move(*data);
    if (data_b64) {
      SKIFF_ASSIGN_OR_RETURN(bytes, DecodeBase64Field(*data_b64, "data_base64"));
    }
    auto shared = std::make_shared<std::string>(std::move(bytes));
    auto given = std::make_shared<bool>(false);
    source = [shared, given]() -> Result<std::string> {
      if (*given) return std::string();
      *given = true;
      return std::move(*shared);
    };
  }
  SKIFF_ASSIGN_OR_RETURN(proto::ProcInputResult r,
                         ctx.manager.ProcessInput(t.id, proto::ProcInputRequest{t.pid, close}, source));
  return json{{"sandbox_id", t.id}, {"pid", t.pid}, {"bytes_written", r.bytes_written}, {"closed", close}};
}

Result<json> HandleProcessSignal(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(Target t, ReadTarget(f));
  SKIFF_ASSIGN_OR_RETURN(std::string sig, f.RequiredString("signal"));
  if (sig.rfind("SIG", 0) == 0) sig = sig.substr(3);  // "SIGTERM" reads as "TERM"
  if (!proto::SignalFromName(sig)) {
    std::string names;
    for (const auto& n : proto::SignalNames()) names += (names.empty() ? "" : ", ") + n;
    return BadField("signal", "expected one of " + names);
  }
  SKIFF_ASSIGN_OR_RETURN(json ignored, ctx.manager.Process(t.id, proto::ProcSignalRequest{t.pid, sig}));
  (void)ignored;
  return json{{"sandbox_id", t.id}, {"pid", t.pid}, {"signal", sig}};
}

Result<json> HandleProcessWait(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(Target t, ReadTarget(f));
  SKIFF_ASSIGN_OR_RETURN(std::optional<uint64_t> timeout, f.OptUint("timeout_ms", kProcessWaitMaxMs));
  proto::ProcWaitRequest req{t.pid, static_cast<int64_t>(timeout.value_or(kProcessWaitDefaultMs))};
  SKIFF_ASSIGN_OR_RETURN(json info, ctx.manager.Process(t.id, req));
  info["sandbox_id"] = t.id;
  return info;
}

Result<json> HandleProcessResize(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(Target t, ReadTarget(f));
  SKIFF_ASSIGN_OR_RETURN(proto::TermSize size, ReadSize(f));
  SKIFF_ASSIGN_OR_RETURN(json ignored, ctx.manager.Process(t.id, proto::ProcResizeRequest{t.pid, size}));
  (void)ignored;
  return json{{"sandbox_id", t.id}, {"pid", t.pid}, {"rows", size.rows}, {"cols", size.cols}};
}

Result<json> HandleProcessForget(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(Target t, ReadTarget(f));
  SKIFF_ASSIGN_OR_RETURN(json ignored, ctx.manager.Process(t.id, proto::ProcForgetRequest{t.pid}));
  (void)ignored;
  return json{{"sandbox_id", t.id}, {"pid", t.pid}, {"forgotten", true}};
}

}  // namespace skiff::fn
