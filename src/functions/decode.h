// Request decoding for the function handlers: a typed field reader over
// nlohmann::json that produces the exact S001 messages of the contract
// (docs/api.md "Conventions"), and the shared value formats: env, base64,
// mode strings, sandbox ids, command shapes (with the POSIX-like splitter)
// and the sandbox::run lang table.
//
// Every function here is pure: no I/O, no sandbox state. That is what lets
// every handler finish all request-only checks before the sandbox lookup.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "sandbox/types.h"

namespace skiff::fn {

using nlohmann::json;

// Limits and defaults the handlers, schemas and docs share.
inline constexpr uint64_t kDefaultExecTimeoutMs = 300000;
inline constexpr uint32_t kMaxCpus = 255;
inline constexpr uint32_t kMinCpus = 1;
inline constexpr uint32_t kMinMemoryMb = 64;
inline constexpr uint64_t kMax32 = 4294967295ULL;
inline constexpr uint64_t kGrepDefaultMaxMatches = 10000;
inline constexpr uint64_t kGrepDefaultMaxLineBytes = 4096;
// The most matches one grep returns: max_matches 0 ("no limit") or above
// means this many, so a result's size in the daemon is bounded.
inline constexpr uint64_t kGrepMaxMatches = 100000;
// The encoded size of one function result; a larger one is answered S400.
inline constexpr size_t kMaxResultBytes = size_t{32} << 20;
inline constexpr uint64_t kReadInlineLimit = 1048576;  // body only when size < this
inline constexpr size_t kChannelChunk = 65536;
inline constexpr uint32_t kChannelBufferDefault = 64;
inline constexpr uint32_t kChannelBufferMin = 1;
inline constexpr uint32_t kChannelBufferMax = 1024;
inline constexpr size_t kInfoBatchMax = 32;
// Inline output of sandbox::process::output: bytes per channel by default
// and at most.
inline constexpr uint64_t kProcessOutputDefaultBytes = uint64_t{1} << 20;
inline constexpr uint64_t kProcessOutputMaxBytes = uint64_t{8} << 20;
// sandbox::process::wait without timeout_ms waits this long, and at most
// kProcessWaitMaxMs.
inline constexpr uint64_t kProcessWaitDefaultMs = 30000;
inline constexpr uint64_t kProcessWaitMaxMs = 300000;
inline constexpr std::string_view kDefaultDirMode = "0755";
inline constexpr std::string_view kDefaultFileMode = "0644";

// "null", "boolean", "number", "string", "array", "object" — the words used
// after "got" in S001 messages.
std::string_view JsonTypeName(const json& v);

// docs/api.md#conventions: null/absent → {}, an object passes, anything else is S001
// "invalid request: payload must be a JSON object, got <type>".
Result<json> NormalizePayload(const json& payload);

// Joins a field path: Child("files[2]", "content") == "files[2].content".
std::string FieldPath(std::string_view prefix, std::string_view name);

// S001 builders with the contract's wording.
Error MissingField(std::string_view field, std::string_view expected);
Error WrongType(std::string_view field, std::string_view expected, const json& got);
Error BadField(std::string_view field, std::string_view detail);  // "field 'x': <detail>"

// A typed reader over one JSON object. Field names in messages are
// `prefix.name`. For optional fields, null means absent.
class Fields {
 public:
  explicit Fields(const json& obj, std::string prefix = "") : obj_(obj), prefix_(std::move(prefix)) {}

  // The raw value, or nullptr when absent or null.
  const json* Get(std::string_view name) const;
  std::string Path(std::string_view name) const { return FieldPath(prefix_, name); }

  Result<std::string> RequiredString(std::string_view name) const;
  Result<std::optional<std::string>> OptString(std::string_view name) const;
  Result<bool> OptBool(std::string_view name, bool def) const;
  // A JSON integer (no fraction/exponent) in [0, max]; "integer ≥ 0" in messages.
  Result<std::optional<uint64_t>> OptUint(std::string_view name, uint64_t max = UINT64_MAX) const;
  // A JSON integer of either sign, for fields typed plain "integer".
  Result<std::optional<int64_t>> OptInt(std::string_view name) const;
  Result<std::vector<std::string>> OptStringArray(std::string_view name) const;

  // Paths inside a sandbox and command words: non-empty (paths), no NUL.
  Result<std::string> RequiredPath(std::string_view name) const;
  Result<std::optional<std::string>> OptPath(std::string_view name) const;

 private:
  const json& obj_;
  std::string prefix_;
};

// NUL check for a value that becomes a path, command word, argument or env
// entry: S001 "invalid request: field '<field>': contains a NUL byte".
Status NoNul(std::string_view value, std::string_view field);

// docs/api.md#conventions env, both shapes. `v` may be null (→ empty). Later duplicates win
// (the result has unique names, in the order they were last set).
Result<Env> ParseEnv(const json* v, std::string_view field = "env");
bool IsValidEnvName(std::string_view name);

// docs/api.md#conventions base64 (RFC 4648 strict) → S001 "<field>: invalid base64: <detail>".
Result<std::string> DecodeBase64Field(std::string_view text, std::string_view field);

// docs/api.md#conventions mode strings → S210 "invalid octal mode: <mode>".
Result<uint32_t> ParseMode(std::string_view mode);
// 4-digit octal string of mode & 07777.
std::string FormatMode(uint32_t mode);

// docs/api.md#conventions → canonical id, or S001 "invalid request: sandbox_id: not a UUID: <input>".
Result<std::string> ParseSandboxId(std::string_view input);
// Reads the required `sandbox_id` of a payload and canonicalizes it.
Result<std::string> ReadSandboxId(const Fields& f);

// Any Unicode White_Space character (docs/api.md#command-shapes-sandboxexec rule 2), UTF-8 encoded.
bool ContainsUnicodeWhitespace(std::string_view s);

// The POSIX-like splitter of docs/api.md#command-shapes-sandboxexec. On failure `error` says why
// ("unbalanced quote", "trailing backslash").
struct ShlexResult {
  std::vector<std::string> words;
  std::string error;  // empty on success
  bool ok() const { return error.empty(); }
};
ShlexResult ShlexSplit(std::string_view line);

// docs/api.md#command-shapes-sandboxexec command-shape resolution → argv (argv[0] = program), or S001.
Result<std::vector<std::string>> ResolveCommand(const std::string& cmd, const std::vector<std::string>& args,
                                                const std::vector<std::string>& argv);

// docs/api.md#sandboxrun: a lang value must be non-empty and contain no whitespace.
Status ValidateLang(std::string_view lang);

// Decoders from payload to the manager's typed specs (steps 1–2 of docs/api.md#conventions).
Result<CreateSpec> DecodeCreate(const json& payload);
// A snapshot id or name (docs/snapshots.md): 1-64 of [A-Za-z0-9._-], or S001
// naming `field`.
Status CheckSnapshotRef(std::string_view ref, std::string_view field);
Result<ExecSpec> DecodeExec(const json& payload);
Result<RunSpec> DecodeRun(const json& payload);

}  // namespace skiff::fn
