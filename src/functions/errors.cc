// S-code → wire object, HTTP status, type, retryability and fix_note: the
// one place where codes are mapped (docs/errors.md).
#include "functions/errors.h"

#include <array>

namespace skiff {
namespace {

constexpr std::string_view kParentsNote =
    "merge fix into the request you sent and send it again; parents: true creates the missing "
    "directories";
constexpr std::string_view kGoneNote = "this sandbox no longer exists; call sandbox::create to get a new one";

constexpr std::array<CodeInfo, 28> kCodes = {{
    {Code::kS001, "validation", 400, false,
     "Payload not an object; missing or mistyped field; invalid sandbox_id; exec command-shape "
     "errors; invalid map-env names; bad base64; fs::write body both/neither; NUL in a path, "
     "command or env; range checks (cpus, memory_mb); bad isolation/lang value; payload over "
     "32 MiB (HTTP 413)",
     "the message names the field and what is expected"},
    {Code::kS002, "validation", 404, false, "No sandbox with that id (never existed, stopped, or reaped)",
     kGoneNote},
    {Code::kS003, "validation", 429, false,
     "exec while max_concurrent_exec_per_sandbox execs are already running in that sandbox; or any "
     "call to a sandbox that already has max_calls_per_sandbox calls running or waiting; or an fs "
     "call while the sandbox's agent has 68 filesystem operations running or queued (4 workers, 64 "
     "queued)",
     "every exec slot of this sandbox is busy (default 4); a slot frees only when a running exec "
     "exits or hits its timeout_ms, so waiting does not help if those commands are servers, "
     "installs or watchers: start such commands detached (nohup cmd > /tmp/cmd.log 2>&1 &) and "
     "read the log with sandbox::fs::read, or stop this sandbox and create a new one; retrying "
     "after a pause only helps when the running commands are short"},
    {Code::kS004, "validation", 409, false,
     "The sandbox is being stopped or reaped; or it was stopped while this call ran", kGoneNote},
    {Code::kS005, "validation", 409, false,
     "A call that needs the sandbox's processes running (exec, run step, fs, process) while it is "
     "paused, and the sandbox was not created with auto_resume",
     "call sandbox::resume first, or create the sandbox with auto_resume: true so calls resume it"},
    {Code::kS006, "validation", 409, false,
     "sandbox::pause of a sandbox that is already paused, or sandbox::resume of one that is not paused",
     "the sandbox is already in the state you asked for; sandbox::list shows its state"},
    {Code::kS007, "validation", 404, false,
     "No snapshot has this id or name (or it belongs to another tenant)",
     "sandbox::snapshot::list shows the snapshots you can use"},
    {Code::kS008, "validation", 409, false,
     "sandbox::snapshot::delete of a snapshot that a live jail sandbox was created from (it reads the "
     "snapshot's files for its whole life)",
     "stop the sandboxes created from it first; the message names one"},
    {Code::kS100, "config", 400, false, "image is not a catalog name, or is not in image_allowlist",
     "pick one of the images named in the message; others must be added by the operator "
     "(custom_images and image_allowlist)"},
    {Code::kS101, "internal", 503, false, "The image is not installed and auto_install is false",
     "an operator must install this image on the host or turn on auto_install"},
    {Code::kS102, "transient", 503, true,
     "auto-install failed (pull, unpack, or no root filesystem for this architecture)",
     "probably temporary: wait a little and retry"},
    {Code::kS200, "execution", 504, false,
     "exec or run reached its effective timeout; or an fs call or file transfer got no answer or "
     "progress from the agent within fs_timeout_ms",
     "give the command more time with timeout_ms (the operator's max_exec_timeout_ms caps it) or "
     "split the work into shorter commands"},
    {Code::kS210, "filesystem", 400, false,
     "Bad mode string; grep/sed recursive:false on a directory; sed files/path both or neither; "
     "empty sed pattern",
     ""},
    {Code::kS211, "filesystem", 404, false,
     "Path not found (target, mv src, mv dst parent, exec workdir, sed/grep root); or fs::write / "
     "fs::mkdir with parents:false and a missing parent (then fix is {\"parents\": true})",
     ""},
    {Code::kS212, "filesystem", 409, false,
     "Wrong file type: ls on a non-directory, read of a directory, write onto a directory, path "
     "component is a file, mv type conflict, workdir not a directory",
     ""},
    {Code::kS213, "filesystem", 409, false,
     "Already exists: mkdir without parents; mv onto an existing dst without overwrite", ""},
    {Code::kS214, "filesystem", 409, false,
     "Directory not empty: rm without recursive; mv onto a non-empty directory", ""},
    {Code::kS215, "filesystem", 403, false, "Permission denied inside the sandbox", ""},
    {Code::kS216, "filesystem", 500, false,
     "Any other filesystem or I/O error (ENOSPC, EIO, …); sandbox transport failure during an fs "
     "call",
     ""},
    {Code::kS217, "filesystem", 400, false, "Regex (RE2) does not compile (grep, sed)", ""},
    {Code::kS218, "transient", 503, true,
     "Streamed upload stalled (5 s without bytes on a channel; 30 s on HTTP PUT) or ended "
     "abnormally; the target is untouched",
     ""},
    {Code::kS219, "filesystem", 500, false,
     "The sandbox's agent does not understand the request (version skew). Only this request "
     "fails.",
     ""},
    {Code::kS220, "validation", 404, false,
     "No live process with that pid in the sandbox (never started through sandbox::process::start, "
     "or forgotten after it exited)",
     "list the sandbox's processes with sandbox::process::list"},
    {Code::kS221, "validation", 409, false,
     "The process is in the wrong state for the call: input or a signal to an exited process, input "
     "with stdin closed or never opened, resize of a process without a terminal, forget of a running one",
     ""},
    {Code::kS222, "execution", 502, false,
     "Nothing listens on the port inside the sandbox (a forwarded connection, E2B's getHost(port), "
     "was refused on 127.0.0.1 and ::1)",
     "start a server listening on that port inside the sandbox (on 127.0.0.1, ::1 or all addresses), "
     "then retry"},
    {Code::kS300, "platform", 500, false,
     "Boot failure or 30 s boot timeout; requested isolation unavailable; sandbox crashed; "
     "transport failure during exec; other spawn failures",
     "platform failure; resending the same call is unlikely to help; check the skiffd log"},
    {Code::kS301, "platform", 502, false,
     "Fleet router (docs/multihost.md): the host that held the sandbox has left the fleet (its worker "
     "disconnected from the engine, or a call to it was cut off); the sandbox is lost with it",
     "the sandbox cannot be reached any more; create a new one (the router places it on a live host)"},
    {Code::kS400, "config", 429, false,
     "max_concurrent_sandboxes reached; per-image max_cpus/max_memory_mb exceeded; a function result "
     "over 32 MiB encoded; max_connections open connections (the connection is answered 503 and closed)",
     "a configured limit was hit: stop sandboxes you no longer need, lower cpus/memory_mb, or ask "
     "the operator to raise the limit"},
}};

}  // namespace

const CodeInfo& InfoFor(Code c) {
  for (const auto& info : kCodes)
    if (info.code == c) return info;
  return kCodes[kCodes.size() - 2];  // unreachable: every Code has a row
}

std::span<const CodeInfo> AllCodes() { return kCodes; }

std::string_view ParentsFixNote() { return kParentsNote; }

std::string_view ErrorType(Code c) { return InfoFor(c).type; }
int HttpStatus(Code c) { return InfoFor(c).http; }
bool Retryable(Code c) { return InfoFor(c).retryable; }

nlohmann::json FixNoteFor(const Error& e) {
  const nlohmann::json& fix = e.fix();
  // A run-step context (docs/api.md#sandboxrun) always has a null note.
  if (fix.is_object() && fix.contains("context")) return nullptr;
  if (e.fix_note_override()) {
    if (e.fix_note_override()->empty()) return nullptr;
    return *e.fix_note_override();
  }
  if (e.code() == Code::kS211 && fix == nlohmann::json{{"parents", true}}) {
    return std::string(kParentsNote);
  }
  std::string_view note = InfoFor(e.code()).fix_note;
  if (note.empty()) return nullptr;
  return std::string(note);
}

nlohmann::json ErrorToWire(const Error& e, std::string_view docs_base) {
  // nlohmann::json objects keep keys sorted, which gives the wire order
  // code, details, docs_url, fix, fix_note, message, retryable, type.
  nlohmann::json out = nlohmann::json::object();
  out["code"] = std::string(CodeName(e.code()));
  if (e.details()) out["details"] = *e.details();
  out["docs_url"] = std::string(docs_base) + "#" + std::string(CodeName(e.code()));
  out["fix"] = e.fix().is_null() ? nlohmann::json(nullptr) : e.fix();
  out["fix_note"] = FixNoteFor(e);
  out["message"] = e.message();
  out["retryable"] = Retryable(e.code());
  out["type"] = std::string(ErrorType(e.code()));
  return out;
}

Error ParentsMissing(std::string_view parent) {
  Error e(Code::kS211, "parent directory not found: " + std::string(parent));
  e.set_fix(nlohmann::json{{"parents", true}});
  return e;
}

}  // namespace skiff
