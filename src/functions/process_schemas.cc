#include "functions/process_schemas.h"

#include <string>

#include "functions/decode.h"
#include "functions/schema_builders.h"
#include "protocol/process_messages.h"

namespace skiff::fn {

namespace {

using nlohmann::json;

json PidProp() { return UInt("The process id inside the sandbox (from sandbox::process::start)"); }

json SpanDef(std::string d) {
  return Object(std::move(d),
                {{"start", UInt("Absolute offset of the first byte still held")},
                 {"end", UInt("Absolute offset one past the last byte the process wrote")}},
                {"start", "end"});
}

json ProcessExample() {
  return {{"pid", 17},
          {"argv", {"python3", "-m", "http.server", "8000"}},
          {"cwd", "/"},
          {"tag", "web"},
          {"started_ms", 1764892800000},
          {"state", "running"},
          {"timed_out", false},
          {"stdin_open", false},
          {"buffer_bytes", 1048576},
          {"stdout", {{"start", 0}, {"end", 58}}},
          {"stderr", {{"start", 0}, {"end", 0}}},
          {"attached", 0}};
}

json IdPid(std::string d, json extra = json::object()) {
  json props = {{"sandbox_id", SandboxIdProp()}, {"pid", PidProp()}};
  for (auto& [k, v] : extra.items()) props[k] = v;
  return Object(std::move(d), std::move(props), {"sandbox_id", "pid"});
}

}  // namespace

void AddProcessDefinitions(json& d) {
  d["term_size"] = Object("A terminal size",
                          {{"rows", UInt("Rows, 1 to " + std::to_string(proto::kMaxTermSize))},
                           {"cols", UInt("Columns, 1 to " + std::to_string(proto::kMaxTermSize))}},
                          {"rows", "cols"});
  d["process_info"] = Object(
      "One live process of a sandbox",
      {{"pid", UInt("Process id inside the sandbox")},
       {"argv", StrArr("The command")},
       {"cwd", Str("Working directory")},
       {"user", Str("The user it runs as, when one was named")},
       {"tag", Str("The caller's label, when one was given")},
       {"pty", Ref("term_size", "The terminal's current size (PTY processes only)")},
       {"started_ms", UInt("Start, Unix milliseconds")},
       {"state", {{"type", "string"}, {"enum", {"running", "exited"}}, {"description", "running or exited"}}},
       {"exit_code", UInt("Exited: the exit status, 128+N when killed by signal N")},
       {"signal", UInt("Exited: the terminating signal, 0 when it exited by itself")},
       {"ended_ms", UInt("Exited: Unix milliseconds")},
       {"timed_out", Bool("Killed at its timeout_ms")},
       {"stdin_open", Bool("sandbox::process::input is accepted")},
       {"buffer_bytes", UInt("Ring size per output stream")},
       {"stdout", SpanDef("The stdout bytes still held, as absolute offsets")},
       {"stderr", SpanDef("The stderr bytes still held (empty for a PTY process)")},
       {"attached", UInt("Output streams open on it now")}},
      {"pid", "argv", "cwd", "started_ms", "state", "timed_out", "stdin_open", "buffer_bytes", "stdout",
       "stderr", "attached"});
}

FunctionSchemas ProcessSchemas(std::string_view id) {
  FunctionSchemas s;
  const json pid_ex = {{"sandbox_id", kUuidEx}, {"pid", 17}};
  if (id == "sandbox::process::start") {
    s.request = Root(
        id,
        Object(
            "Starts a process in the background of a live sandbox and returns at once",
            {{"sandbox_id", SandboxIdProp()},
             {"cmd", WithDefault(Str("Program name, or a shell-style line split into words (as "
                                     "sandbox::exec)"),
                                 "")},
             {"args", StrArrD("Arguments, passed verbatim")},
             {"argv", StrArrD("Full argument vector; cannot be combined with cmd/args")},
             {"env", EnvProp("Layered over the sandbox's environment, as for sandbox::exec")},
             {"workdir", Str("Working directory; default: the image's, else /")},
             {"user", Str("name, uid, name:group or uid:gid inside the sandbox; default: the image's")},
             {"tag", Str("A label of yours, at most 256 bytes, shown by sandbox::process::list")},
             {"pty",
              {{"description",
                "true (24x80) or {rows, cols}: the process gets a pseudo-terminal as its "
                "controlling terminal, TERM=xterm-256color; its output is all on stdout"},
               {"anyOf", json::array({{{"type", "boolean"}}, {{"$ref", "#/definitions/term_size"}}})}}},
             {"stdin", BoolD("Keep stdin open for sandbox::process::input (always for a PTY)", false)},
             {"buffer_bytes", UIntD("Bytes kept per output stream, " + std::to_string(proto::kMinProcBuffer) +
                                        " to " + std::to_string(proto::kMaxProcBuffer),
                                    static_cast<uint64_t>(proto::kDefaultProcBuffer))},
             {"timeout_ms", UInt("Kill the process group after this long; absent: runs until it exits "
                                 "or the sandbox stops")},
             {"hold_output",
              BoolD("Extension: output no reader has taken yet is never overwritten; while it fills "
                    "the buffer the process waits (its writes block), so a reader that follows from "
                    "offset 0 gets every byte. Absent: the buffer keeps the newest bytes and a late "
                    "reader sees a gap",
                    false)}},
            {"sandbox_id"}),
        json::array({{{"sandbox_id", kUuidEx}, {"cmd", "python3 -m http.server 8000"}, {"tag", "web"}},
                     {{"sandbox_id", kUuidEx}, {"cmd", "bash"}, {"pty", {{"rows", 40}, {"cols", 132}}}}}),
        true);
    json info = AllDefinitions().at("process_info");
    info["properties"]["sandbox_id"] = Str("Canonical sandbox id");
    info["description"] = "The started process";
    json ex = ProcessExample();
    ex["sandbox_id"] = kUuidEx;
    s.response = Root(id, info, json::array({ex}), false);
  } else if (id == "sandbox::process::list") {
    s.request = Root(
        id, Object("Lists a sandbox's live processes", {{"sandbox_id", SandboxIdProp()}}, {"sandbox_id"}),
        json::array({{{"sandbox_id", kUuidEx}}}), true);
    s.response = Root(id,
                      Object("Running processes and recently exited ones, by pid",
                             {{"processes", ArrOf("process_info", "The processes")}}, {"processes"}),
                      json::array({{{"processes", json::array({ProcessExample()})}}}), false);
  } else if (id == "sandbox::process::output") {
    s.request = Root(
        id,
        IdPid("Reads a process's output from absolute offsets; with follow, streams it through a data "
              "channel as newline-delimited JSON (docs/api.md#process-output-stream)",
              {{"stdout_from", UIntD("Absolute stdout offset to read from", 0)},
               {"stderr_from", UIntD("Absolute stderr offset to read from", 0)},
               {"follow", BoolD("Stream until the process exits (a data channel; see the response)", false)},
               {"max_bytes", UIntD("Inline reads: bytes returned per stream at most (up to " +
                                       std::to_string(kProcessOutputMaxBytes) + "); ask again from next",
                                   kProcessOutputDefaultBytes)}}),
        json::array({pid_ex, {{"sandbox_id", kUuidEx}, {"pid", 17}, {"stdout_from", 58}, {"follow", true}}}),
        true);
    json chan = Object("One output stream",
                       {{"from", UInt("Offset of the first byte returned (above the asked offset when the "
                                      "ring no longer held it)")},
                        {"next", UInt("Offset to ask from next time")},
                        {"data", Str("The bytes, base64")}},
                       {"from", "next", "data"});
    s.response = Root(
        id,
        Object(
            "Inline: the bytes and the process; with follow: the stream's channel",
            {{"sandbox_id", Str("Canonical sandbox id")},
             {"pid", UInt("The process")},
             {"stdout", chan},
             {"stderr", chan},
             {"gaps", {{"type", "array"}, {"description", "Ranges lost to the ring: {channel, from, to}"}}},
             {"process", Ref("process_info", "The process at the end of the read")},
             {"stream", Ref("channel_ref", "follow: reader of the NDJSON stream")}},
            {"sandbox_id", "pid"}),
        json::array({{{"sandbox_id", kUuidEx},
                      {"pid", 17},
                      {"stdout", {{"from", 0}, {"next", 3}, {"data", "aGkK"}}},
                      {"stderr", {{"from", 0}, {"next", 0}, {"data", ""}}},
                      {"gaps", json::array()},
                      {"process", ProcessExample()}}}),
        false);
  } else if (id == "sandbox::process::input") {
    s.request = Root(id,
                     IdPid("Writes to a process's stdin (a PTY process: keystrokes)",
                           {{"data", Str("UTF-8 text to write")},
                            {"data_base64", Str("Bytes to write, base64; instead of data")},
                            {"content", Ref("channel_ref",
                                            "A data channel whose bytes are written as they "
                                            "come (reader reference); instead of data")},
                            {"close", BoolD("Close stdin afterwards (a PTY: send end-of-file)", false)}}),
                     json::array({{{"sandbox_id", kUuidEx}, {"pid", 17}, {"data", "print(1)\n"}}}), true);
    s.response =
        Root(id,
             Object("What was written",
                    {{"sandbox_id", Str("Canonical sandbox id")},
                     {"pid", UInt("The process")},
                     {"bytes_written", UInt("Bytes the process's stdin took")},
                     {"closed", Bool("stdin was closed")}},
                    {"sandbox_id", "pid", "bytes_written", "closed"}),
             json::array({{{"sandbox_id", kUuidEx}, {"pid", 17}, {"bytes_written", 9}, {"closed", false}}}),
             false);
  } else if (id == "sandbox::process::signal") {
    json names = json::array();
    for (const auto& n : proto::SignalNames()) names.push_back(n);
    s.request = Root(id,
                     IdPid("Sends a signal to a process's process group",
                           {{"signal",
                             {{"type", "string"},
                              {"enum", names},
                              {"description", "Signal name (a SIG prefix is accepted)"}}}}),
                     json::array({{{"sandbox_id", kUuidEx}, {"pid", 17}, {"signal", "TERM"}}}), true);
    s.request["required"] = {"sandbox_id", "pid", "signal"};
    s.response = Root(id,
                      Object("The signal was sent",
                             {{"sandbox_id", Str("Canonical sandbox id")},
                              {"pid", UInt("The process")},
                              {"signal", Str("The signal's name")}},
                             {"sandbox_id", "pid", "signal"}),
                      json::array({{{"sandbox_id", kUuidEx}, {"pid", 17}, {"signal", "TERM"}}}), false);
  } else if (id == "sandbox::process::wait") {
    s.request =
        Root(id,
             IdPid("Waits until a process exits, or its timeout passes",
                   {{"timeout_ms", UIntD("How long to wait, at most " + std::to_string(kProcessWaitMaxMs) +
                                             "; 0 answers at once",
                                         kProcessWaitDefaultMs)}}),
             json::array({{{"sandbox_id", kUuidEx}, {"pid", 17}, {"timeout_ms", 5000}}}), true);
    json info = AllDefinitions().at("process_info");
    info["properties"]["sandbox_id"] = Str("Canonical sandbox id");
    info["description"] = "The process: exited, or still running when the timeout passed";
    json ex = ProcessExample();
    ex["sandbox_id"] = kUuidEx;
    s.response = Root(id, info, json::array({ex}), false);
  } else if (id == "sandbox::process::resize") {
    s.request =
        Root(id,
             IdPid("Resizes a PTY process's terminal (its foreground process group gets SIGWINCH)",
                   {{"rows", UInt("Rows, 1 to " + std::to_string(proto::kMaxTermSize))},
                    {"cols", UInt("Columns, 1 to " + std::to_string(proto::kMaxTermSize))}}),
             json::array({{{"sandbox_id", kUuidEx}, {"pid", 17}, {"rows", 40}, {"cols", 132}}}), true);
    s.request["required"] = {"sandbox_id", "pid", "rows", "cols"};
    s.response =
        Root(id,
             Object("The new size",
                    {{"sandbox_id", Str("Canonical sandbox id")},
                     {"pid", UInt("The process")},
                     {"rows", UInt("Rows")},
                     {"cols", UInt("Columns")}},
                    {"sandbox_id", "pid", "rows", "cols"}),
             json::array({{{"sandbox_id", kUuidEx}, {"pid", 17}, {"rows", 40}, {"cols", 132}}}), false);
  } else if (id == "sandbox::process::forget") {
    s.request = Root(id, IdPid("Removes an exited process from the list (its output is freed)"),
                     json::array({pid_ex}), true);
    s.response = Root(id,
                      Object("The process is gone from the list",
                             {{"sandbox_id", Str("Canonical sandbox id")},
                              {"pid", UInt("The process")},
                              {"forgotten", Bool("Always true")}},
                             {"sandbox_id", "pid", "forgotten"}),
                      json::array({{{"sandbox_id", kUuidEx}, {"pid", 17}, {"forgotten", true}}}), false);
  }
  return s;
}

}  // namespace skiff::fn
