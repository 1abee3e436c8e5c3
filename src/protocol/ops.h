// The request vocabulary of the agent protocol (OPEN payloads), shared by the
// host and the agent. Each OPEN is a JSON object {"op": <name>, ...}.
//
//   op          request fields                          agent answers
//   ----------  --------------------------------------  ---------------------------------------
//   info        -                                       RESULT {proto, agent, kernel, ready_ms, pid}
//   exec        argv[], env[] ("K=V"), cwd, timeout_ms, META {"pid"} once started; DATA/END on
//               stdin (bool: DATA on kStdin follows),   kStdout/kStderr (at most output_limit
//               output_limit (bytes per stream),        bytes each, excess drained); RESULT
//               user? (name|uid[:group|gid], resolved   {exit_code, signal, stdout_truncated,
//               in the sandbox's own /etc)              stderr_truncated, timed_out, cancelled,
//                                                       duration_ms}. Spawn ENOENT/EACCES/ENOEXEC
//                                                       are a RESULT (127/126 + stderr text);
//                                                       a bad cwd is ERROR S211/S212.
//   fs.ls       path                                    RESULT {"entries":[FsEntry]}
//   fs.stat     path                                    RESULT FsEntry
//   fs.mkdir    path, mode (int), parents               RESULT {"created"}
//   fs.write    path, mode (int), parents; body as      RESULT {"bytes_written"}
//               DATA on kStdin, then END (abort: CANCEL)
//   fs.read     path                                    META {size, mode, mtime}, DATA on kStdout,
//                                                       END kStdout, RESULT {}
//   fs.rm       path, recursive                         RESULT {"removed":true}
//   fs.mv       src, dst, overwrite                     RESULT {"moved":true}
//   fs.chmod    path, mode (int), uid?, gid?, recursive RESULT {"updated"}
//   fs.grep     path, pattern, recursive, ignore_case,  RESULT {"matches":[...], "truncated"}
//               include_glob[], exclude_glob[],
//               max_matches, max_line_bytes
//   fs.sed      files[] | path, pattern, replacement,   RESULT {"results":[...],
//               regex, first_only, ignore_case,                 "total_replacements"}
//               recursive, include_glob[], exclude_glob[]
//   shutdown    -                                       RESULT {} then the agent kills every
//                                                       process and exits (the VM powers off)
//
// Details of the agent's answers (additive to the table above):
//   - exec RESULT "signal" is the terminating signal number, 0 when the
//     process exited normally; "timed_out" means the agent's own deadline
//     (timeout_ms from OPEN) killed the process group; "cancelled" a CANCEL.
//     Without "timeout_ms" the agent sets no deadline.
//   - fs.write: the temporary file exists from OPEN; DATA is written as it
//     arrives (credit is returned once written); END commits. CANCEL removes
//     the temporary file and answers ERROR S218.
//   - A RESULT whose JSON exceeds kMaxPayload (e.g. a large fs.grep) is sent
//     as DATA on kStdout (under the usual credit), END kStdout, then RESULT
//     {"result_in_data": true}: the host concatenates the DATA and parses it.
//   - ERROR may carry "fix" (fs.mkdir / fs.write missing parent:
//     {"parents": true}) and "details".
//
// Errors are ERROR {"code":"Sxxx","message":"<prefix><detail>"} with the
// messages of the spec (§3.0, §5.3). An unknown op is ERROR S219
// "operation not supported by this sandbox's agent: <op>" and the channel
// keeps serving. Field values arrive already validated by the host, but the
// agent re-checks types: it trusts nothing it is sent.
#pragma once

#include <string_view>

namespace skiff::proto::op {
inline constexpr std::string_view kInfo = "info";
inline constexpr std::string_view kExec = "exec";
inline constexpr std::string_view kShutdown = "shutdown";
inline constexpr std::string_view kFsLs = "fs.ls";
inline constexpr std::string_view kFsStat = "fs.stat";
inline constexpr std::string_view kFsMkdir = "fs.mkdir";
inline constexpr std::string_view kFsWrite = "fs.write";
inline constexpr std::string_view kFsRead = "fs.read";
inline constexpr std::string_view kFsRm = "fs.rm";
inline constexpr std::string_view kFsMv = "fs.mv";
inline constexpr std::string_view kFsChmod = "fs.chmod";
inline constexpr std::string_view kFsGrep = "fs.grep";
inline constexpr std::string_view kFsSed = "fs.sed";
}  // namespace skiff::proto::op
