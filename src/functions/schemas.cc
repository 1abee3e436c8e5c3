#include "functions/schemas.h"

#include <set>
#include <string>

#include "functions/decode.h"
#include "functions/host_schemas.h"
#include "functions/process_schemas.h"
#include "functions/schema_builders.h"
#include "functions/snapshot_schemas.h"

namespace skiff::fn {
namespace {

using nlohmann::json;

json Definitions() {
  json d = json::object();
  d["env"] = {{"description",
               "Environment variables: an array of \"NAME=value\" strings (split at the first '='; "
               "entries without '=' or with an empty name are ignored), or an object of string values "
               "whose names match [A-Za-z_][A-Za-z0-9_]* (applied in byte-wise name order). Later "
               "duplicates win."},
              {"anyOf", json::array({{{"type", "array"}, {"items", {{"type", "string"}}}},
                                     {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}})}};
  d["channel_ref"] = Object(
      "A data channel reference (StreamChannelRef), served at "
      "/ws/channels/{channel_id}?key=<access_key>&dir=read|write",
      {{"channel_id", Str("Channel id (a UUID)")},
       {"access_key", Str("Secret key that authorizes attaching to the channel")},
       {"direction",
        {{"type", "string"}, {"enum", {"read", "write"}}, {"description", "Side: read or write"}}}},
      {"channel_id", "access_key", "direction"});
  d["fs_entry"] = Object(
      "Metadata of one filesystem entry (lstat)",
      {{"name", Str("Final path component; for a path with none (e.g. /), the path as given")},
       {"is_dir", Bool("Directory (false for a symlink, which describes the link itself)")},
       {"size", UInt("Byte size; for a directory the inode size")},
       {"mode", Str("4-digit octal permission string, e.g. \"0644\"")},
       {"mtime", Int("Modification time, Unix seconds")},
       {"is_symlink", Bool("The entry itself is a symbolic link")},
       {"uid", UInt("Owner's user id")},
       {"gid", UInt("Group id")},
       {"owner", Str("Owner's name in the sandbox's /etc/passwd, or the uid in decimal when it names none")},
       {"group", Str("Group's name in the sandbox's /etc/group, or the gid in decimal when it names none")},
       {"symlink_target",
        Str("Present only for a symbolic link that could be read: its absolute target, the link text "
            "joined with the link's directory and normalised lexically (. and .. removed; further "
            "links not followed)")},
       {"metadata",
        {{"type", "object"},
         {"additionalProperties", {{"type", "string"}}},
         {"description",
          "Present only for a file or directory that has some: its user.e2b.<key> extended attributes "
          "as {key: value} (E2B's file metadata, docs/e2b.md#file-metadata); at most 32, keys HTTP "
          "tokens, values printable ASCII"}}}},
      {"name", "is_dir", "size", "mode", "mtime", "is_symlink", "uid", "gid", "owner", "group"});
  d["grep_match"] = Object(
      "One matching line",
      {{"path", Str("The root as given joined with the file's path relative to the root")},
       {"line", UInt("1-based line number")},
       {"content", Str("The line without its terminator; cut at max_line_bytes and suffixed with … when "
                       "longer")},
       {"byte_offset",
        UInt("Extension: 0-based byte offset, from the start of the file, of the first match on "
             "this line")}},
      {"path", "line", "content"});
  d["sed_result"] =
      Object("The outcome for one file",
             {{"path", Str("As listed in files, or the walk root joined with the relative path")},
              {"replacements", UInt("Replacements made in this file")},
              {"success", Bool("The file was processed (and rewritten, if needed)")},
              {"error", Str("Present only when success is false")}},
             {"path", "replacements", "success"});
  d["list_entry"] =
      Object("One live sandbox",
             {{"sandbox_id", Str("Canonical sandbox id")},
              {"name", {{"type", {"string", "null"}}, {"description", "The create-time name, or null"}}},
              {"image", Str("Catalog name")},
              {"age_secs", UInt("Whole seconds since creation (for a pooled sandbox: since claim)")},
              {"exec_in_progress", Bool("exec_in_flight > 0")},
              {"exec_in_flight", UInt("Running execs, including the exec step of sandbox::run")},
              {"exec_slots_free", UInt("max(max_concurrent_exec_per_sandbox, 1) - exec_in_flight, never "
                                       "below 0")},
              {"stopped", Bool("true only while a stop or reap is in progress")},
              {"state",
               {{"type", "string"},
                {"enum", {"running", "paused", "stopping"}},
                {"description", "Extension: paused after sandbox::pause (or an idle pause) until resumed"}}},
              {"hibernated", Bool("Extension: paused to disk (sandbox::pause with mode \"disk\"): its state "
                                  "is saved and its VMM freed; it resumes like any paused sandbox")},
              {"isolation", Str("Extension: \"microvm\" or \"jail\"")},
              {"created_at", Str("Extension: RFC 3339 creation (claim) time")},
              {"last_activity_at", Str("Extension: RFC 3339 time of the last liveness event")},
              {"cpus", UInt("Extension: vCPUs / CPU quota")},
              {"memory_mb", UInt("Extension: memory limit in MiB")},
              {"network", Bool("Extension: outbound networking enabled")}},
             {"sandbox_id", "name", "image", "age_secs", "exec_in_progress", "exec_in_flight",
              "exec_slots_free", "stopped"});
  d["catalog_entry"] =
      Object("One catalog image",
             {{"name", Str("Catalog name, usable as image")},
              {"oci_ref", Str("Where the image comes from (an OCI reference, or "
                              "skiff.local/preset/<name>:<recipe version> for presets)")},
              {"kind",
               {{"type", "string"},
                {"enum", {"preset", "host", "custom"}},
                {"description", "Built-in preset, the host image (Extension), or a custom image"}}},
              {"allowed", Bool("Extension: listed in image_allowlist; when false, create returns S100")},
              {"installed", Bool("Extension: the root filesystem is present on the host")}},
             {"name", "oci_ref", "kind"});
  d["run_file"] =
      Object("A UTF-8 file written before the code (mode 0644, parents created)",
             {{"path", Str("Path inside the sandbox")}, {"content", Str("File content (UTF-8 text)")}},
             {"path", "content"});
  AddProcessDefinitions(d);
  AddSnapshotDefinitions(d);
  return d;
}

json ExecResponseProps() {
  return {
      {"stdout", Str("Captured stdout, up to 1 MiB, UTF-8 (invalid sequences become U+FFFD)")},
      {"stderr", Str("Captured stderr, up to 1 MiB, UTF-8 (invalid sequences become U+FFFD)")},
      {"exit_code",
       {{"type", {"integer", "null"}},
        {"description", "Exit status; 128+N for a process killed by signal N. Always set."}}},
      {"timed_out", Bool("Always false (timeouts are S200); kept for iii compatibility")},
      {"duration_ms", UInt("Wall time from admission to completion")},
      {"success", Bool("exit_code == 0")},
      {"stdout_truncated", Bool("Extension: true if stdout exceeded 1 MiB")},
      {"stderr_truncated", Bool("Extension: true if stderr exceeded 1 MiB")},
  };
}
std::vector<std::string> ExecResponseRequired() {
  return {"stdout",      "stderr",  "exit_code",        "timed_out",
          "duration_ms", "success", "stdout_truncated", "stderr_truncated"};
}
json ExecResponseExample() {
  return {{"stdout", "v24.3.0\n"},
          {"stderr", ""},
          {"exit_code", 0},
          {"timed_out", false},
          {"duration_ms", 412},
          {"success", true},
          {"stdout_truncated", false},
          {"stderr_truncated", false}};
}

FunctionSchemas Build(std::string_view id) {
  FunctionSchemas s;
  if (id == "sandbox::create") {
    s.request = Root(
        id,
        Object(
            "Boots a new sandbox from a catalog image",
            {{"image", Str("A catalog name (python, node, or an operator custom image) that is "
                           "listed in image_allowlist")},
             {"cpus",
              {{"type", "integer"},
               {"minimum", kMinCpus},
               {"maximum", kMaxCpus},
               {"default", 1},
               {"description", "vCPUs / CPU quota, 1-255; default: config default_cpus"}}},
             {"memory_mb",
              {{"type", "integer"},
               {"minimum", kMinMemoryMb},
               {"maximum", kMax32},
               {"default", 512},
               {"description",
                "Memory in MiB, at least 64; default: config "
                "default_memory_mb"}}},
             {"name", Str("Free-form label, echoed by sandbox::list")},
             {"network", BoolD("true enables outbound networking under the egress policy", false)},
             {"idle_timeout_secs", UIntD("Idle seconds before the reaper stops the sandbox; default: config "
                                         "default_idle_timeout_secs",
                                         300)},
             {"env", EnvProp("Base environment of every process started in the sandbox")},
             {"on_idle",
              {{"type", "string"},
               {"enum", {"stop", "pause", "hibernate"}},
               {"default", "stop"},
               {"description",
                "Extension: what the reaper does after idle_timeout_secs: stop the sandbox, pause it "
                "(processes stopped, memory kept), or hibernate it (microVM: state saved to disk, VMM freed) "
                "until sandbox::resume or an auto_resume call"}}},
             {"auto_resume", BoolD("Extension: a call that needs the sandbox running (exec, fs, process) "
                                   "resumes it when paused, instead of S005",
                                   false)},
             {"sandbox_id",
              Str("Extension: the new sandbox's id, chosen by the caller (a UUID; a fleet router "
                  "sends one so that a retried create is safe): a create naming a live sandbox "
                  "of the same caller and image answers that sandbox; any other use is S001. "
                  "Such a create never claims a pooled sandbox")},
             {"isolation",
              {{"type", "string"},
               {"enum", {"microvm", "jail"}},
               {"description",
                "Extension: isolation backend; default: the "
                "daemon's default"}}},
             {"snapshot",
              {{"type", "string"},
               {"minLength", 1},
               {"maxLength", 64},
               {"pattern", "^[A-Za-z0-9._-]+$"},
               {"description",
                "Extension: start from this snapshot (id or name, docs/snapshots.md); image, isolation, cpus "
                "and memory_mb are then the snapshot's (given ones must agree) and image may be left out"}}}},
            {}),
        json::array({{{"image", "node"},
                      {"memory_mb", 512},
                      {"env", {{"NODE_ENV", "production"}}},
                      {"idle_timeout_secs", 600}},
                     {{"image", "python"}},
                     {{"snapshot", "after-install"}}}),
        true);
    s.request["anyOf"] = json::array({{{"required", {"image"}}}, {{"required", {"snapshot"}}}});
    s.response =
        Root(id,
             Object("The new sandbox",
                    {{"sandbox_id", Str("New canonical UUID")},
                     {"image", Str("The request's image, echoed")},
                     {"isolation", Str("Extension: \"microvm\" or \"jail\": the backend used")}},
                    {"sandbox_id", "image", "isolation"}),
             json::array({{{"sandbox_id", kUuidEx}, {"image", "node"}, {"isolation", "microvm"}}}), false);
  } else if (id == "sandbox::exec") {
    s.request =
        Root(id,
             Object("Runs one command in a live sandbox and returns its buffered output",
                    {{"sandbox_id", SandboxIdProp()},
                     {"cmd", WithDefault(Str("Program name, or a shell-style line that is split into "
                                             "words (no shell runs)"),
                                         "")},
                     {"args", StrArrD("Arguments, passed verbatim")},
                     {"argv", StrArrD("Full argument vector, argv[0] = program; cannot be combined "
                                      "with cmd/args")},
                     {"stdin", Str("Base64 (RFC 4648) bytes fed to stdin, then EOF")},
                     {"env", EnvProp("Layered over the sandbox's base environment")},
                     {"timeout_ms", UIntD("Deadline from admission; clamped to config "
                                          "max_exec_timeout_ms; 0 fails with S200",
                                          kDefaultExecTimeoutMs)},
                     {"workdir", Str("Working directory; default: the image's working directory, else "
                                     "/")}},
                    {"sandbox_id"}),
             json::array({{{"sandbox_id", kUuidEx},
                           {"cmd", "node"},
                           {"args", {"/home/app/index.js"}},
                           {"env", {{"NODE_ENV", "production"}}},
                           {"timeout_ms", 300000}},
                          {{"sandbox_id", kUuidEx}, {"cmd", "node -v"}},
                          {{"sandbox_id", kUuidEx}, {"argv", {"sh", "-c", "echo $HOME && ls"}}}}),
             true);
    s.response = Root(id, Object("The command's output", ExecResponseProps(), ExecResponseRequired()),
                      json::array({ExecResponseExample()}), false);
  } else if (id == "sandbox::stop") {
    s.request =
        Root(id,
             Object("Stops a sandbox and discards its private writable layer",
                    {{"sandbox_id", SandboxIdProp()},
                     {"wait", BoolD("true: return only after every process has exited and host "
                                    "resources are released",
                                    false)}},
                    {"sandbox_id"}),
             json::array({{{"sandbox_id", kUuidEx}}, {{"sandbox_id", kUuidEx}, {"wait", true}}}), true);
    s.response = Root(id,
                      Object("Stop acknowledgement",
                             {{"sandbox_id", Str("Canonical id")}, {"stopped", Bool("Always true")}},
                             {"sandbox_id", "stopped"}),
                      json::array({{{"sandbox_id", kUuidEx}, {"stopped", true}}}), false);
  } else if (id == "sandbox::pause" || id == "sandbox::resume") {
    const bool pause = id == "sandbox::pause";
    s.request =
        Root(id,
             Object(pause ? "Pauses a running sandbox: its processes stop where they stand (the "
                            "jail's cgroup freezer, the microVM's vCPUs); memory, files and "
                            "host resources are kept (mode memory), or its state is saved to disk "
                            "and its VMM freed (mode disk, microVM)"
                          : "Resumes a paused sandbox: its processes continue where they stood",
                    pause ? json{{"sandbox_id", SandboxIdProp()},
                                 {"mode",
                                  {{"type", "string"},
                                   {"enum", {"memory", "disk"}},
                                   {"default", "memory"},
                                   {"description",
                                    "memory: stopped in place; disk: hibernated (microVM only; the "
                                    "jail answers S300 with the reason)"}}}}
                          : json{{"sandbox_id", SandboxIdProp()}},
                    {"sandbox_id"}),
             pause ? json::array({{{"sandbox_id", kUuidEx}}, {{"sandbox_id", kUuidEx}, {"mode", "disk"}}})
                   : json::array({{{"sandbox_id", kUuidEx}}}),
             true);
    s.response =
        Root(id,
             Object(pause ? "Pause acknowledgement" : "Resume acknowledgement",
                    pause ? json{{"sandbox_id", Str("Canonical id")},
                                 {"state", Str("Always \"paused\"")},
                                 {"hibernated", Bool("true for mode disk")}}
                          : json{{"sandbox_id", Str("Canonical id")}, {"state", Str("Always \"running\"")}},
                    pause ? std::vector<std::string>{"sandbox_id", "state", "hibernated"}
                          : std::vector<std::string>{"sandbox_id", "state"}),
             pause ? json::array({{{"sandbox_id", kUuidEx}, {"state", "paused"}, {"hibernated", false}}})
                   : json::array({{{"sandbox_id", kUuidEx}, {"state", "running"}}}),
             false);
  } else if (id == "sandbox::metrics") {
    s.request = Root(id, Object("Reads one sample", {{"sandbox_id", SandboxIdProp()}}, {"sandbox_id"}),
                     json::array({{{"sandbox_id", kUuidEx}}}), true);
    json pct = {{"type", "number"},
                {"minimum", 0},
                {"maximum", 100},
                {"description",
                 "Percent of cpu_count CPUs busy (100: all of them), since this sandbox's previous "
                 "sandbox::metrics or over a short first sample (jail: 100 ms; microVM: 200 ms of the "
                 "guest's ticks); 0 while paused, and on a jail host without CPU accounting"}};
    s.response = Root(
        id,
        Object(
            "One sample of the sandbox's resource use (running or paused): the jail's from its host "
            "(cgroups), the microVM's from its guest (its agent's counters; a paused VM answers the "
            "sample taken just before its pause, which its stopped vCPUs cannot change)",
            {{"sandbox_id", Str("Canonical id")},
             {"cpu_count", UInt("CPUs the sandbox may use (the microVM's vCPUs)")},
             {"cpu_used_pct", pct},
             {"mem_used_bytes", UInt("Memory in use, bytes (jail: its memory cgroup, page cache and /tmp "
                                     "files included; microVM: the guest's MemTotal - MemAvailable, /tmp "
                                     "files included)")},
             {"mem_total_bytes", UInt("Its memory limit, bytes (microVM: the guest's MemTotal, a little "
                                      "under its RAM)")},
             {"disk_used_bytes", UInt("Used of its writable filesystems (writable layer and /tmp), bytes")},
             {"disk_total_bytes", UInt("Size of those filesystems, bytes")},
             {"timestamp_ms", UInt("When the sample was taken, Unix milliseconds")}},
            {"sandbox_id", "cpu_count", "cpu_used_pct", "mem_used_bytes", "mem_total_bytes",
             "disk_used_bytes", "disk_total_bytes", "timestamp_ms"}),
        json::array({{{"sandbox_id", kUuidEx},
                      {"cpu_count", 1},
                      {"cpu_used_pct", 12.5},
                      {"mem_used_bytes", 73400320},
                      {"mem_total_bytes", 536870912},
                      {"disk_used_bytes", 1048576},
                      {"disk_total_bytes", 536870912},
                      {"timestamp_ms", 1764892800000}}}),
        false);
  } else if (id == "sandbox::list") {
    s.request = Root(id, Object("No fields; any object is accepted", json::object(), {}),
                     json::array({json::object()}), true);
    s.response = Root(id,
                      Object("Live sandboxes, by created_at then sandbox_id",
                             {{"sandboxes", ArrOf("list_entry", "Live sandboxes")}}, {"sandboxes"}),
                      json::array({{{"sandboxes",
                                     {{{"sandbox_id", kUuidEx},
                                       {"name", nullptr},
                                       {"image", "python"},
                                       {"age_secs", 12},
                                       {"exec_in_progress", false},
                                       {"exec_in_flight", 0},
                                       {"exec_slots_free", 4},
                                       {"stopped", false},
                                       {"state", "running"},
                                       {"isolation", "microvm"},
                                       {"created_at", "2026-09-01T12:00:00.000Z"},
                                       {"last_activity_at", "2026-09-01T12:00:09.315Z"},
                                       {"cpus", 1},
                                       {"memory_mb", 512},
                                       {"network", false}}}}}}),
                      false);
  } else if (id == "sandbox::run") {
    s.request = Root(
        id,
        Object("One call: create, write files and code (or run a command), exec, stop",
               {{"image", Str("A catalog name, as in sandbox::create")},
                {"code", Str("Source text, written to /tmp/run.<ext> with mode 0644 (required unless argv)")},
                {"lang", Str("Interpreter: node|js|javascript, python|py, shell|sh, bash, or any "
                             "other program name or path (required unless argv)")},
                {"argv", StrArr("Extension: instead of code and lang, run this command (argv[0] = "
                                "program, no shell); its errors are the steps' own, not wrapped")},
                {"files", WithDefault(ArrOf("run_file", "Files written before the code"), json::array())},
                {"env", EnvProp("Applied at create and to the exec")},
                {"stdin", Str("Base64 (RFC 4648) bytes fed to stdin, then EOF")},
                {"timeout_ms", UIntD("Deadline of the exec step", kDefaultExecTimeoutMs)},
                {"keep_sandbox", BoolD("true: do not stop the sandbox, and return its id", false)},
                {"network", BoolD("Extension: passed to create", false)},
                {"cpus",
                 {{"type", "integer"},
                  {"minimum", kMinCpus},
                  {"maximum", kMaxCpus},
                  {"description", "Extension: passed to create"}}},
                {"memory_mb",
                 {{"type", "integer"},
                  {"minimum", kMinMemoryMb},
                  {"maximum", kMax32},
                  {"description", "Extension: passed to create"}}},
                {"idle_timeout_secs", UInt("Extension: passed to create")},
                {"isolation",
                 {{"type", "string"},
                  {"enum", {"microvm", "jail"}},
                  {"description", "Extension: passed to create"}}},
                {"workdir", Str("Extension: passed to the exec step")}},
               {"image"}),
        json::array({{{"image", "node"},
                      {"code", "console.log('hello world')"},
                      {"lang", "node"},
                      {"timeout_ms", 300000}},
                     {{"image", "python"},
                      {"code", "import util; print(util.X)"},
                      {"lang", "python"},
                      {"files", {{{"path", "/tmp/util.py"}, {"content", "X = 1\n"}}}}},
                     {{"image", "base"}, {"argv", {"sh", "-c", "echo hi"}}}}),
        true);
    // Code and its interpreter, or a command.
    s.request["anyOf"] = json::array({{{"required", {"code", "lang"}}}, {{"required", {"argv"}}}});
    json props = ExecResponseProps();
    props["sandbox_id"] = Str("Present only with keep_sandbox: true: the kept sandbox");
    json ex = ExecResponseExample();
    ex["stdout"] = "hello world\n";
    s.response =
        Root(id, Object("The exec step's output", props, ExecResponseRequired()), json::array({ex}), false);
  } else if (id == "sandbox::catalog::list") {
    s.request = Root(id, Object("No fields; any object is accepted", json::object(), {}),
                     json::array({json::object()}), true);
    s.response = Root(id,
                      Object("The image catalog: presets, host, then custom images by name",
                             {{"images", ArrOf("catalog_entry", "Catalog images")}}, {"images"}),
                      json::array({{{"images",
                                     {{{"name", "python"},
                                       {"oci_ref", "skiff.local/preset/python:debian-12"},
                                       {"kind", "preset"},
                                       {"allowed", true},
                                       {"installed", true}}}}}}),
                      false);
  } else if (id == "sandbox::fs::ls") {
    s.request =
        Root(id,
             Object("Lists a directory",
                    {{"sandbox_id", SandboxIdProp()}, {"path", Path("A directory, or a link to one")}},
                    {"sandbox_id", "path"}),
             json::array({{{"sandbox_id", kUuidEx}, {"path", "/project"}}}), true);
    s.response =
        Root(id, Object("Children sorted by name", {{"entries", ArrOf("fs_entry", "Children")}}, {"entries"}),
             json::array({{{"entries",
                            {{{"name", "main.py"},
                              {"is_dir", false},
                              {"size", 120},
                              {"mode", "0644"},
                              {"mtime", 1788264000},
                              {"is_symlink", false},
                              {"uid", 1000},
                              {"gid", 1000},
                              {"owner", "user"},
                              {"group", "user"}},
                             {{"name", "release"},
                              {"is_dir", false},
                              {"size", 11},
                              {"mode", "0777"},
                              {"mtime", 1788264000},
                              {"is_symlink", true},
                              {"uid", 0},
                              {"gid", 0},
                              {"owner", "root"},
                              {"group", "root"},
                              {"symlink_target", "/project/releases/v2"}}}}}}),
             false);
  } else if (id == "sandbox::fs::stat") {
    s.request =
        Root(id,
             Object("Metadata of one path (lstat)",
                    {{"sandbox_id", SandboxIdProp()}, {"path", Path("The path")}}, {"sandbox_id", "path"}),
             json::array({{{"sandbox_id", kUuidEx}, {"path", "/project/app"}}}), true);
    json fe = AllDefinitions().at("fs_entry");
    s.response = Root(id,
                      Object("The FsEntry of the path itself", fe["properties"],
                             fe["required"].get<std::vector<std::string>>()),
                      json::array({{{"name", "app"},
                                    {"is_dir", true},
                                    {"size", 4096},
                                    {"mode", "0755"},
                                    {"mtime", 1788264000},
                                    {"is_symlink", false},
                                    {"uid", 1000},
                                    {"gid", 1000},
                                    {"owner", "user"},
                                    {"group", "user"}}}),
                      false);
  } else if (id == "sandbox::fs::mkdir") {
    s.request =
        Root(id,
             Object("Creates a directory",
                    {{"sandbox_id", SandboxIdProp()},
                     {"path", Path("Directory to create")},
                     {"mode", ModeProp("Octal mode of the leaf directory", kDefaultDirMode)},
                     {"parents", BoolD("Create missing ancestors; an existing path is then not an "
                                       "error",
                                       false)}},
                    {"sandbox_id", "path"}),
             json::array({{{"sandbox_id", kUuidEx}, {"path", "/project/src"}, {"parents", true}}}), true);
    s.response =
        Root(id, Object("Outcome", {{"created", Bool("A directory was created by this call")}}, {"created"}),
             json::array({{{"created", true}}}), false);
  } else if (id == "sandbox::fs::write") {
    s.request = Root(
        id,
        Object("Writes a whole file atomically; exactly one of content and content_b64",
               {{"sandbox_id", SandboxIdProp()},
                {"path", Path("File to write")},
                {"mode", ModeProp("Final octal mode of the file", kDefaultFileMode)},
                {"parents", BoolD("Create missing parent directories (mode 0755)", false)},
                {"content",
                 {{"description",
                   "A string (written as UTF-8), or the reader reference of a "
                   "data channel whose bytes are streamed"},
                  {"anyOf", json::array({{{"type", "string"}}, {{"$ref", "#/definitions/channel_ref"}}})}}},
                {"content_b64", Str("Binary body, base64 (RFC 4648)")}},
               {"sandbox_id", "path"}),
        json::array({{{"sandbox_id", kUuidEx}, {"path", "/project/hello.txt"}, {"content", "hello world"}},
                     {{"sandbox_id", kUuidEx},
                      {"path", "/project/bin/tool"},
                      {"content_b64", "AAEC"},
                      {"mode", "0755"},
                      {"parents", true}}}),
        true);
    s.response = Root(id,
                      Object("Outcome",
                             {{"bytes_written", UInt("Decoded bytes written")},
                              {"path", Str("The request's path, echoed")}},
                             {"bytes_written", "path"}),
                      json::array({{{"bytes_written", 11}, {"path", "/project/hello.txt"}}}), false);
  } else if (id == "sandbox::fs::read") {
    s.request = Root(id,
                     Object("Reads a file", {{"sandbox_id", SandboxIdProp()}, {"path", Path("File to read")}},
                            {"sandbox_id", "path"}),
                     json::array({{{"sandbox_id", kUuidEx}, {"path", "/project/hello.txt"}}}), true);
    s.response =
        Root(id,
             Object("The file",
                    {{"content", Ref("channel_ref",
                                     "Reader reference that yields the file's bytes "
                                     "(binary frames of at most 64 KiB), then a close")},
                     {"body", Str("Present only when the file is smaller than 1048576 bytes and valid "
                                  "UTF-8")},
                     {"size", UInt("Size when opened")},
                     {"mode", Str("4-digit octal mode (links followed)")},
                     {"mtime", Int("Modification time, Unix seconds")}},
                    {"content", "size", "mode", "mtime"}),
             json::array({{{"content",
                            {{"channel_id", "9b1f0c2e-7d44-4a51-8c0e-5f6a7b8c9d01"},
                             {"access_key", "4c2e"},
                             {"direction", "read"}}},
                           {"body", "hello world"},
                           {"size", 11},
                           {"mode", "0644"},
                           {"mtime", 1788264000}}}),
             false);
  } else if (id == "sandbox::fs::rm") {
    s.request =
        Root(id,
             Object("Removes a file, symlink or directory",
                    {{"sandbox_id", SandboxIdProp()},
                     {"path", Path("Path to remove (a symlink itself is removed, not its target)")},
                     {"recursive", BoolD("Needed to remove a non-empty directory", false)}},
                    {"sandbox_id", "path"}),
             json::array({{{"sandbox_id", kUuidEx}, {"path", "/project/build"}, {"recursive", true}}}), true);
    s.response = Root(id, Object("Outcome", {{"removed", Bool("Always true on success")}}, {"removed"}),
                      json::array({{{"removed", true}}}), false);
  } else if (id == "sandbox::fs::chmod") {
    s.request =
        Root(id,
             Object("Changes mode (and optionally owner/group)",
                    {{"sandbox_id", SandboxIdProp()},
                     {"path", Path("Path to change")},
                     {"mode", Str("Octal mode string, e.g. \"0755\"")},
                     {"uid",
                      {{"type", "integer"},
                       {"minimum", 0},
                       {"maximum", kMax32},
                       {"description", "New owner (sandbox uid); absent = unchanged"}}},
                     {"gid",
                      {{"type", "integer"},
                       {"minimum", 0},
                       {"maximum", kMax32},
                       {"description", "New group; absent = unchanged"}}},
                     {"recursive", BoolD("Apply to the whole tree, the root included; symlinks "
                                         "inside are skipped",
                                         false)}},
                    {"sandbox_id", "path", "mode"}),
             json::array({{{"sandbox_id", kUuidEx}, {"path", "/project/run.sh"}, {"mode", "0755"}}}), true);
    s.response =
        Root(id, Object("Outcome", {{"updated", UInt("Entries the change was applied to")}}, {"updated"}),
             json::array({{{"updated", 4}}}), false);
  } else if (id == "sandbox::fs::mv") {
    s.request = Root(
        id,
        Object("Renames or moves a path",
               {{"sandbox_id", SandboxIdProp()},
                {"src", Path("Path to move (a symlink itself)")},
                {"dst", Path("Final path; never moves into an existing directory")},
                {"overwrite", BoolD("Replace an existing dst", false)}},
               {"sandbox_id", "src", "dst"}),
        json::array({{{"sandbox_id", kUuidEx}, {"src", "/project/a.txt"}, {"dst", "/project/b.txt"}}}), true);
    s.response = Root(id, Object("Outcome", {{"moved", Bool("Always true on success")}}, {"moved"}),
                      json::array({{{"moved", true}}}), false);
  } else if (id == "sandbox::fs::grep") {
    s.request = Root(
        id,
        Object("Searches files for an RE2 pattern",
               {{"sandbox_id", SandboxIdProp()},
                {"path", Path("A file, or a directory (or link to one) to walk")},
                {"pattern", Str("RE2 regular expression")},
                {"recursive", BoolD("false with a directory root fails with S210", true)},
                {"ignore_case", BoolD("Case-insensitive matching", false)},
                {"include_glob", StrArrD("Files must match at least one (when non-empty)")},
                {"exclude_glob", StrArrD("Files matching any are skipped")},
                {"max_matches", UIntD("Stop after this many matches; 0 = 100000", kGrepDefaultMaxMatches)},
                {"max_line_bytes",
                 UIntD("Longer matching lines are cut; 0 = no cut", kGrepDefaultMaxLineBytes)}},
               {"sandbox_id", "path", "pattern"}),
        json::array({{{"sandbox_id", kUuidEx},
                      {"path", "/project"},
                      {"pattern", "TODO\\(\\w+\\)"},
                      {"include_glob", {"*.py"}}}}),
        true);
    s.response = Root(id,
                      Object("Matches in walk order",
                             {{"matches", ArrOf("grep_match", "One object per matching line")},
                              {"truncated", Bool("true if the search stopped early: at max_matches, at a 64 "
                                                 "MiB answer, or after reading 1 GiB or running 10 s in "
                                                 "this call")}},
                             {"matches", "truncated"}),
                      json::array({{{"matches",
                                     {{{"path", "/project/src/app.py"},
                                       {"line", 12},
                                       {"content", "# TODO(ana): retry"},
                                       {"byte_offset", 318}}}},
                                    {"truncated", false}}}),
                      false);
  } else if (id == "sandbox::fs::sed") {
    s.request = Root(
        id,
        Object("Find and replace across a file list (files) or a directory tree (path)",
               {{"sandbox_id", SandboxIdProp()},
                {"pattern", Str("RE2 pattern (regex: true) or literal text; must not be empty")},
                {"replacement", Str("Replacement; in regex mode $N, ${N}, $name, ${name} and $$ "
                                    "expand")},
                {"files", StrArrD("Explicit file list (files form)")},
                {"path", Str("Root of a walk (path form)")},
                {"recursive", BoolD("Path form only; false with a directory root fails with S210", true)},
                {"include_glob", StrArrD("Path form only: files must match at least one")},
                {"exclude_glob", StrArrD("Path form only: files matching any are skipped")},
                {"regex", BoolD("true: pattern is RE2; false: literal text", true)},
                {"first_only", BoolD("At most one replacement per file", false)},
                {"ignore_case", BoolD("Case-insensitive, in both modes", false)}},
               {"sandbox_id", "pattern", "replacement"}),
        json::array({{{"sandbox_id", kUuidEx},
                      {"files", {"/project/a.py"}},
                      {"pattern", "foo"},
                      {"replacement", "bar"}},
                     {{"sandbox_id", kUuidEx},
                      {"path", "/project"},
                      {"pattern", "v(\\d+)"},
                      {"replacement", "version $1"},
                      {"include_glob", {"*.md"}}}}),
        true);
    s.response =
        Root(id,
             Object("Per-file outcomes",
                    {{"results", ArrOf("sed_result", "One entry per file, in files order or walk order")},
                     {"total_replacements", UInt("Sum over successful files")}},
                    {"results", "total_replacements"}),
             json::array({{{"results",
                            {{{"path", "/project/a.py"}, {"replacements", 2}, {"success", true}},
                             {{"path", "/project/missing.py"},
                              {"replacements", 0},
                              {"success", false},
                              {"error", "file not found: /project/missing.py"}}}},
                           {"total_replacements", 2}}}),
             false);
  } else if (id == "engine::functions::list") {
    s.request = Root(id,
                     Object("Lists the functions this server provides",
                            {{"prefix", Str("Exact function id prefix")},
                             {"search", Str("Case-insensitive substring of the id or the description")},
                             {"worker", Str("Exact worker_name")},
                             {"workers", StrArr("Any of these worker_names")},
                             {"include_internal", BoolD("Also list engine::* functions", false)}},
                            {}),
                     json::array({json::object(), {{"prefix", "sandbox::fs::"}}}), true);
    s.response =
        Root(id,
             Object("Functions sorted by id (with search: id matches first)",
                    {{"functions",
                      {{"type", "array"},
                       {"description", "Function summaries"},
                       {"items", Object("One function",
                                        {{"function_id", Str("Function id")},
                                         {"namespace", Str("Always \"default\"")},
                                         {"worker_name", Str("iii-sandbox or iii-engine-functions")},
                                         {"description", Str("One line")}},
                                        {"function_id", "namespace", "worker_name", "description"})}}}},
                    {"functions"}),
             json::array({{{"functions",
                            {{{"function_id", "sandbox::exec"},
                              {"namespace", "default"},
                              {"worker_name", "iii-sandbox"},
                              {"description", "Runs one command in a sandbox"}}}}}}),
             false);
  } else if (id == "engine::functions::info") {
    s.request = Root(id,
                     Object("Schemas of one function, or of 1-32 functions",
                            {{"function_id", Str("One function id (exclusive with function_ids)")},
                             {"function_ids",
                              {{"type", "array"},
                               {"items", {{"type", "string"}}},
                               {"minItems", 1},
                               {"maxItems", kInfoBatchMax},
                               {"description", "1-32 function ids, duplicates removed"}}},
                             {"namespace", Str("Absent or \"default\"")}},
                            {}),
                     json::array({{{"function_id", "sandbox::exec"}},
                                  {{"function_ids", {"sandbox::exec", "sandbox::fs::read"}}}}),
                     true);
    s.response =
        Root(id,
             Object("One function's details, or {functions: [...]} for a batch",
                    {{"function_id", Str("Function id")},
                     {"namespace", Str("Always \"default\"")},
                     {"worker_name", Str("iii-sandbox or iii-engine-functions")},
                     {"description", Str("One line")},
                     {"request_schema", {{"type", "object"}, {"description", "Draft-07 request schema"}}},
                     {"response_schema", {{"type", "object"}, {"description", "Draft-07 response schema"}}},
                     {"registered_triggers", {{"type", "array"}, {"description", "Always empty"}}},
                     {"functions",
                      {{"type", "array"},
                       {"description",
                        "Batch form: one entry per requested id, in input "
                        "order; unknown ids give {function_id, error: "
                        "\"not_found\"}"}}}},
                    {}),
             json::array({{{"function_id", "sandbox::fs::stat"},
                           {"namespace", "default"},
                           {"worker_name", "iii-sandbox"},
                           {"description", "Metadata of one path"},
                           {"request_schema", {{"type", "object"}}},
                           {"response_schema", {{"type", "object"}}},
                           {"registered_triggers", json::array()}}}),
             false);
  } else if (id == "engine::channels::create") {
    s.request = Root(id,
                     Object("Creates a data channel",
                            {{"buffer_size",
                              {{"type", "integer"},
                               {"default", kChannelBufferDefault},
                               {"description", "Frames buffered; clamped to 1-1024"}}}},
                            {}),
                     json::array({json::object(), {{"buffer_size", 64}}}), true);
    s.response = Root(id,
                      Object("Both ends of the channel (same id and key)",
                             {{"writer", Ref("channel_ref", "Writer reference (direction write)")},
                              {"reader", Ref("channel_ref", "Reader reference (direction read)")}},
                             {"writer", "reader"}),
                      json::array({{{"writer",
                                     {{"channel_id", "9b1f0c2e-7d44-4a51-8c0e-5f6a7b8c9d01"},
                                      {"access_key", "4c2e"},
                                      {"direction", "write"}}},
                                    {"reader",
                                     {{"channel_id", "9b1f0c2e-7d44-4a51-8c0e-5f6a7b8c9d01"},
                                      {"access_key", "4c2e"},
                                      {"direction", "read"}}}}}),
                      false);
  }
  return s;
}

}  // namespace

const json& AllDefinitions() {
  static const json* defs = new json(Definitions());
  return *defs;
}

FunctionSchemas SchemasFor(std::string_view id) {
  if (id.rfind("sandbox::process::", 0) == 0) return ProcessSchemas(id);
  if (FunctionSchemas s; SnapshotSchemas(id, &s)) return s;
  if (FunctionSchemas s; HostSchemas(id, &s)) return s;
  return Build(id);
}

}  // namespace skiff::fn
