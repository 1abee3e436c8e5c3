// SandboxManager::Exec (docs/api.md#sandboxexec): admission against the exec cap, the
// environment layers, the agent's exec stream and its output capture.
#include <algorithm>
#include <limits>
#include <thread>

#include "base/text.h"
#include "base/thread.h"
#include "base/unique_fd.h"
#include "protocol/exec_messages.h"
#include "protocol/ops.h"
#include "sandbox/agent_errors.h"
#include "sandbox/command_env.h"
#include "sandbox/manager.h"

namespace skiff {

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kOutputLimit = 1u << 20;
constexpr uint64_t kDefaultExecTimeoutMs = 300000;

// Keeps the first kOutputLimit bytes of a stream.
struct Capture {
  std::string bytes;
  bool truncated = false;
  void Add(std::string_view b) {
    size_t room = kOutputLimit - std::min(kOutputLimit, bytes.size());
    if (b.size() > room) truncated = true;
    bytes.append(b.substr(0, std::min(room, b.size())));
  }
};

}  // namespace

Result<ExecResult> SandboxManager::Exec(const ExecSpec& spec, OutputSink* sink) {
  SKIFF_ASSIGN_OR_RETURN(auto sb, Running(spec.sandbox_id));
  // Admission: take an exec slot atomically.
  SKIFF_RETURN_IF_ERROR(registry_.AcquireExecSlot(*sb));
  stats_.execs++;
  sb->Touch();
  auto start = Clock::now();
  ScopedCleanup release([&] { registry_.ReleaseExecSlot(*sb); });

  uint64_t effective = std::min(spec.timeout_ms.value_or(kDefaultExecTimeoutMs), config_.exec_timeout_cap());
  if (effective == 0) return Error(Code::kS200, "exec timed out after 0 ms");

  std::vector<std::string> env = LayeredEnv(*sb, spec.env);
  std::string cwd = CommandCwd(*sb, spec.workdir);
  proto::ExecRequest req;
  req.argv = spec.argv;
  req.env = std::move(env);
  req.cwd = std::move(cwd);
  req.timeout_ms = static_cast<int64_t>(effective);
  req.has_stdin = !spec.stdin_bytes.empty();
  // A sink (the CLI's streaming run) gets every byte, under the agent's
  // credit; only the copy kept for the result is capped (Capture).
  req.output_limit =
      sink != nullptr ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(kOutputLimit);
  // The image's User (OCI config), resolved by the agent inside the sandbox;
  // root needs no switch.
  req.user = ImageUser(*sb);
  auto stream_or = sb->client->Open(req.ToJson());
  if (!stream_or.ok()) {
    if (registry_.Stopping(*sb)) return SandboxStopped(sb->id);
    return Platform("exec", stream_or.error().message());
  }
  std::shared_ptr<proto::Stream> stream = std::move(stream_or).value();

  // Feed stdin from a separate thread: the agent can only accept it as fast
  // as the process reads, and we must keep draining its output meanwhile.
  std::thread feeder;
  if (!spec.stdin_bytes.empty()) {
    auto t = StartThread("exec stdin " + sb->id, [stream, &spec] {
      if (stream->Send(proto::kStdin, spec.stdin_bytes).ok()) (void)stream->End(proto::kStdin);
    });
    if (!t.ok()) {
      stream->Cancel();
      return std::move(t).error();
    }
    feeder = std::move(t).value();
  } else {
    (void)stream->End(proto::kStdin);
  }
  ScopedCleanup join([&] {
    if (feeder.joinable()) {
      stream->Cancel();
      feeder.join();
    }
  });

  Capture out, err;
  auto details = [&](uint64_t ms) {
    return nlohmann::json{{"stdout", SanitizeUtf8(out.bytes)},
                          {"stderr", SanitizeUtf8(err.bytes)},
                          {"duration_ms", ms},
                          {"stdout_truncated", out.truncated},
                          {"stderr_truncated", err.truncated}};
  };
  auto elapsed = [&] {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
  };
  // The agent enforces the deadline; this host-side one is a safety net.
  auto host_deadline = start + std::chrono::milliseconds(effective) + std::chrono::seconds(10);
  int64_t last_touch = MonotonicMillis();
  // A sink's reader that went away cancels the command (the caller stops
  // the sandbox); the sink is asked at each piece of output and, while the
  // command is quiet, once a second.
  auto reader_gone = [&] {
    stream->Cancel();
    return Error(Code::kS300, "exec cancelled: its output's reader went away")
        .set_details(details(elapsed()));
  };
  for (;;) {
    auto wait_until =
        sink != nullptr ? std::min(host_deadline, Clock::now() + std::chrono::seconds(1)) : host_deadline;
    auto ev = stream->Next(wait_until);
    if (!ev && sink != nullptr && Clock::now() < host_deadline) {
      if (!sink->Wanted()) return reader_gone();
      continue;
    }
    if (!ev) {
      stream->Cancel();
      return Error(Code::kS200, "exec timed out after " + std::to_string(effective) + " ms")
          .set_details(details(elapsed()));
    }
    switch (ev->kind) {
      case proto::Event::Kind::kData:
        if (ev->channel == proto::kStdout) {
          out.Add(ev->data);
          if (sink && !sink->OnStdout(ev->data)) return reader_gone();
        } else if (ev->channel == proto::kStderr) {
          err.Add(ev->data);
          if (sink && !sink->OnStderr(ev->data)) return reader_gone();
        }
        if (MonotonicMillis() - last_touch > 1000) {
          sb->Touch();
          last_touch = MonotonicMillis();
        }
        break;
      case proto::Event::Kind::kMeta:
      case proto::Event::Kind::kEnd:
        break;
      case proto::Event::Kind::kResult: {
        auto parsed = proto::ExecResult::FromJson(ev->json);
        uint64_t ms = elapsed();
        if (!parsed.ok())
          return std::move(parsed).error().With("reading the agent's exec result").set_details(details(ms));
        const proto::ExecResult& r = *parsed;
        out.truncated = out.truncated || r.stdout_truncated;
        err.truncated = err.truncated || r.stderr_truncated;
        if (r.timed_out)
          return Error(Code::kS200, "exec timed out after " + std::to_string(effective) + " ms")
              .set_details(details(ms));
        if (r.cancelled || registry_.Stopping(*sb)) return SandboxStopped(sb->id).set_details(details(ms));
        ExecResult res;
        res.exit_code = r.exit_code;
        res.stdout_text = SanitizeUtf8(out.bytes);
        res.stderr_text = SanitizeUtf8(err.bytes);
        res.stdout_truncated = out.truncated;
        res.stderr_truncated = err.truncated;
        res.duration_ms = ms;
        return res;
      }
      case proto::Event::Kind::kError:
        return FromAgentError(ev->json);
      case proto::Event::Kind::kClosed: {
        // Closed by us = a stop or reap cut the exec short (S004); anything
        // else means the agent (and with it the sandbox) died (S300).
        uint64_t ms = elapsed();
        return AgentConnectionError(AgentCall::kExec, ev->close_reason, sb->client->failure(), sb->id,
                                    [&] { return sb->instance ? sb->instance->ExitReport() : std::string(); })
            .set_details(details(ms));
      }
    }
  }
}

}  // namespace skiff
