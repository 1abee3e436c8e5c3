#include "functions/decode.h"

#include <algorithm>
#include <limits>

#include "base/text.h"
#include "sandbox/snapshot_record.h"

namespace skiff::fn {

std::string_view JsonTypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "number";
    case json::value_t::string:
      return "string";
    case json::value_t::array:
      return "array";
    case json::value_t::object:
      return "object";
    default:
      return "binary";
  }
}

Result<json> NormalizePayload(const json& payload) {
  if (payload.is_null()) return json::object();
  if (payload.is_object()) return payload;
  return InvalidRequest("payload must be a JSON object, got " + std::string(JsonTypeName(payload)));
}

std::string FieldPath(std::string_view prefix, std::string_view name) {
  if (prefix.empty()) return std::string(name);
  std::string s(prefix);
  if (!name.empty() && name.front() != '[') s += '.';
  s += name;
  return s;
}

Error MissingField(std::string_view field, std::string_view expected) {
  return InvalidRequest("missing required field '" + std::string(field) + "' (expected " +
                        std::string(expected) + ")");
}

Error WrongType(std::string_view field, std::string_view expected, const json& got) {
  return InvalidRequest("field '" + std::string(field) + "': expected " + std::string(expected) + ", got " +
                        std::string(JsonTypeName(got)));
}

Error BadField(std::string_view field, std::string_view detail) {
  return InvalidRequest("field '" + std::string(field) + "': " + std::string(detail));
}

Status NoNul(std::string_view value, std::string_view field) {
  if (value.find('\0') != std::string_view::npos) return BadField(field, "contains a NUL byte");
  return OkStatus();
}

const json* Fields::Get(std::string_view name) const {
  auto it = obj_.find(name);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

Result<std::string> Fields::RequiredString(std::string_view name) const {
  const json* v = Get(name);
  if (v == nullptr) return MissingField(Path(name), "string");
  if (!v->is_string()) return WrongType(Path(name), "string", *v);
  return v->get<std::string>();
}

Result<std::optional<std::string>> Fields::OptString(std::string_view name) const {
  const json* v = Get(name);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return WrongType(Path(name), "string", *v);
  return std::optional<std::string>(v->get<std::string>());
}

Result<bool> Fields::OptBool(std::string_view name, bool def) const {
  const json* v = Get(name);
  if (v == nullptr) return def;
  if (!v->is_boolean()) return WrongType(Path(name), "boolean", *v);
  return v->get<bool>();
}

Result<std::optional<uint64_t>> Fields::OptUint(std::string_view name, uint64_t max) const {
  const json* v = Get(name);
  if (v == nullptr) return std::optional<uint64_t>();
  if (!v->is_number_integer()) return WrongType(Path(name), "integer ≥ 0", *v);
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > max) {
      return BadField(Path(name), "value " + std::to_string(u) + " exceeds " + std::to_string(max));
    }
    return std::optional<uint64_t>(u);
  }
  int64_t i = v->get<int64_t>();
  if (i < 0) return BadField(Path(name), "expected integer ≥ 0, got " + std::to_string(i));
  if (static_cast<uint64_t>(i) > max) {
    return BadField(Path(name), "value " + std::to_string(i) + " exceeds " + std::to_string(max));
  }
  return std::optional<uint64_t>(static_cast<uint64_t>(i));
}

Result<std::optional<int64_t>> Fields::OptInt(std::string_view name) const {
  const json* v = Get(name);
  if (v == nullptr) return std::optional<int64_t>();
  if (!v->is_number_integer()) return WrongType(Path(name), "integer", *v);
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return std::optional<int64_t>(std::numeric_limits<int64_t>::max());
    }
    return std::optional<int64_t>(static_cast<int64_t>(u));
  }
  return std::optional<int64_t>(v->get<int64_t>());
}

Result<std::vector<std::string>> Fields::OptStringArray(std::string_view name) const {
  std::vector<std::string> out;
  const json* v = Get(name);
  if (v == nullptr) return out;
  if (!v->is_array()) return WrongType(Path(name), "array of strings", *v);
  out.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    std::string p = Path(name) + "[" + std::to_string(i) + "]";
    if (!e.is_string()) return WrongType(p, "string", e);
    out.push_back(e.get<std::string>());
  }
  return out;
}

Result<std::string> Fields::RequiredPath(std::string_view name) const {
  SKIFF_ASSIGN_OR_RETURN(std::string s, RequiredString(name));
  if (s.empty()) return BadField(Path(name), "must not be empty");
  SKIFF_RETURN_IF_ERROR(NoNul(s, Path(name)));
  return s;
}

Result<std::optional<std::string>> Fields::OptPath(std::string_view name) const {
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> s, OptString(name));
  if (s) {
    if (s->empty()) return BadField(Path(name), "must not be empty");
    SKIFF_RETURN_IF_ERROR(NoNul(*s, Path(name)));
  }
  return s;
}

// ---- env ----

bool IsValidEnvName(std::string_view name) {
  if (name.empty()) return false;
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!alpha(name[0])) return false;
  for (char c : name.substr(1)) {
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

namespace {
void EnvSet(Env& env, std::string name, std::string value) {
  auto it = std::find_if(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
  if (it != env.end()) env.erase(it);
  env.emplace_back(std::move(name), std::move(value));
}
}  // namespace

Result<Env> ParseEnv(const json* v, std::string_view field) {
  Env env;
  if (v == nullptr || v->is_null()) return env;
  if (v->is_array()) {
    for (size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      std::string p = std::string(field) + "[" + std::to_string(i) + "]";
      if (!e.is_string()) return WrongType(p, "string", e);
      const std::string& s = e.get_ref<const std::string&>();
      SKIFF_RETURN_IF_ERROR(NoNul(s, p));
      size_t eq = s.find('=');
      if (eq == std::string::npos || eq == 0) continue;  // ignored, as in iii
      EnvSet(env, s.substr(0, eq), s.substr(eq + 1));
    }
    return env;
  }
  if (v->is_object()) {
    // nlohmann::json objects iterate in byte-wise key order.
    json bad = json::array();
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (!IsValidEnvName(it.key())) bad.push_back(it.key());
    }
    if (!bad.empty()) {
      return InvalidRequest(std::string(field) + ": invalid variable name(s) " + bad.dump() +
                            "; names must match [A-Za-z_][A-Za-z0-9_]*");
    }
    for (auto it = v->begin(); it != v->end(); ++it) {
      std::string p = std::string(field) + "." + it.key();
      if (!it->is_string()) return WrongType(p, "string", *it);
      SKIFF_RETURN_IF_ERROR(NoNul(it->get_ref<const std::string&>(), p));
      EnvSet(env, it.key(), it->get<std::string>());
    }
    return env;
  }
  return WrongType(field, "env", *v);
}

// ---- base64, mode, uuid ----

Result<std::string> DecodeBase64Field(std::string_view text, std::string_view field) {
  std::string why;
  auto out = Base64Decode(text, &why);
  if (!out) return InvalidRequest(std::string(field) + ": invalid base64: " + why);
  return std::move(*out);
}

Result<uint32_t> ParseMode(std::string_view mode) {
  auto bad = [&] { return Error(Code::kS210, "invalid octal mode: " + std::string(mode)); };
  if (mode.empty()) return bad();
  for (char c : mode) {
    if (c < '0' || c > '7') return bad();
  }
  size_t first = mode.find_first_not_of('0');
  if (first == std::string_view::npos) return 0u;
  std::string_view digits = mode.substr(first);
  if (digits.size() > 4) return bad();
  uint32_t v = 0;
  for (char c : digits) v = v * 8 + static_cast<uint32_t>(c - '0');
  if (v > 07777) return bad();
  return v;
}

std::string FormatMode(uint32_t mode) {
  char buf[8];
  snprintf(buf, sizeof buf, "%04o", mode & 07777);
  return buf;
}

Result<std::string> ParseSandboxId(std::string_view input) {
  std::string s(input);
  // The urn:uuid: prefix is case-insensitive like the rest of the id.
  if (s.size() >= 9) {
    std::string head = s.substr(0, 9);
    std::transform(head.begin(), head.end(), head.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (head == "urn:uuid:") s.replace(0, 9, head);
  }
  auto id = CanonicalUuid(s);
  if (!id) return InvalidRequest("sandbox_id: not a UUID: " + std::string(input));
  return std::move(*id);
}

Result<std::string> ReadSandboxId(const Fields& f) {
  SKIFF_ASSIGN_OR_RETURN(std::string raw, f.RequiredString("sandbox_id"));
  return ParseSandboxId(raw);
}

// ---- command shapes ----

bool ContainsUnicodeWhitespace(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = p[i];
    if ((c >= 0x09 && c <= 0x0D) || c == 0x20) return true;
    if (c == 0xC2 && i + 1 < n && (p[i + 1] == 0x85 || p[i + 1] == 0xA0)) return true;
    if (c == 0xE1 && i + 2 < n && p[i + 1] == 0x9A && p[i + 2] == 0x80) return true;  // U+1680
    if (c == 0xE2 && i + 2 < n) {
      unsigned char b = p[i + 1], d = p[i + 2];
      if (b == 0x80 && ((d >= 0x80 && d <= 0x8A) || d == 0xA8 || d == 0xA9 || d == 0xAF)) return true;
      if (b == 0x81 && d == 0x9F) return true;  // U+205F
    }
    if (c == 0xE3 && i + 2 < n && p[i + 1] == 0x80 && p[i + 2] == 0x80) return true;  // U+3000
  }
  return false;
}

ShlexResult ShlexSplit(std::string_view line) {
  ShlexResult r;
  std::string word;
  bool in_word = false;
  auto finish = [&] {
    if (in_word) r.words.push_back(std::move(word));
    word.clear();
    in_word = false;
  };
  size_t i = 0, n = line.size();
  while (i < n) {
    char c = line[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      finish();
      ++i;
    } else if (c == '#' && !in_word) {
      while (i < n && line[i] != '\n') ++i;  // comment; the newline separates
    } else if (c == '\\') {
      if (i + 1 >= n) {
        r.error = "trailing backslash";
        return r;
      }
      if (line[i + 1] != '\n') {
        word += line[i + 1];
        in_word = true;
      }
      i += 2;  // \<newline> is removed (line continuation)
    } else if (c == '\'') {
      size_t end = line.find('\'', i + 1);
      if (end == std::string_view::npos) {
        r.error = "unbalanced quote";
        return r;
      }
      word.append(line.substr(i + 1, end - i - 1));
      in_word = true;
      i = end + 1;
    } else if (c == '"') {
      in_word = true;
      ++i;
      bool closed = false;
      while (i < n) {
        char d = line[i];
        if (d == '"') {
          closed = true;
          ++i;
          break;
        }
        if (d == '\\' && i + 1 < n) {
          char e = line[i + 1];
          if (e == '\n') {
            i += 2;
          } else if (e == '$' || e == '`' || e == '"' || e == '\\') {
            word += e;
            i += 2;
          } else {
            word += '\\';
            word += e;
            i += 2;
          }
          continue;
        }
        word += d;
        ++i;
      }
      if (!closed) {
        r.error = "unbalanced quote";
        return r;
      }
    } else {
      word += c;
      in_word = true;
      ++i;
    }
  }
  finish();
  return r;
}

Result<std::vector<std::string>> ResolveCommand(const std::string& cmd, const std::vector<std::string>& args,
                                                const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  if (!argv.empty()) {
    if (!cmd.empty() || !args.empty()) {
      return InvalidRequest("argv cannot be combined with cmd/args; pick one shape");
    }
    out = argv;
  } else if (ContainsUnicodeWhitespace(cmd)) {
    if (!args.empty()) {
      return InvalidRequest(
          "ambiguous command: cmd contains whitespace and args is non-empty; put the whole "
          "line in cmd, or the program alone in cmd and its arguments in args");
    }
    ShlexResult split = ShlexSplit(cmd);
    if (!split.ok()) return InvalidRequest("cmd cannot be split: " + split.error);
    if (split.words.empty()) return InvalidRequest("cmd is empty after split");
    out = std::move(split.words);
  } else {
    out.reserve(args.size() + 1);
    out.push_back(cmd);
    out.insert(out.end(), args.begin(), args.end());
  }
  if (out.empty() || out[0].empty()) {
    return InvalidRequest("no program given: set cmd, or argv with at least one element");
  }
  return out;
}

Status ValidateLang(std::string_view lang) {
  if (lang.empty()) return BadField("lang", "must not be empty");
  if (ContainsUnicodeWhitespace(lang)) return BadField("lang", "must not contain whitespace");
  if (lang.find('\0') != std::string_view::npos) return BadField("lang", "contains a NUL byte");
  return OkStatus();
}

// ---- whole-request decoders ----

namespace {

Result<std::optional<std::string>> ReadIsolation(const Fields& f) {
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> iso, f.OptString("isolation"));
  if (iso && *iso != "microvm" && *iso != "jail") {
    return BadField(f.Path("isolation"), "must be \"microvm\" or \"jail\", got " + json(*iso).dump());
  }
  return iso;
}

// cpus / memory_mb / idle_timeout_secs / network / isolation / env, shared by create and run.
Status ReadCreateCommon(const Fields& f, CreateSpec& spec) {
  SKIFF_ASSIGN_OR_RETURN(auto cpus, f.OptUint("cpus", kMax32));
  if (cpus && (*cpus < kMinCpus || *cpus > kMaxCpus)) {
    return BadField(f.Path("cpus"), "must be between 1 and 255, got " + std::to_string(*cpus));
  }
  if (cpus) spec.cpus = static_cast<uint32_t>(*cpus);
  SKIFF_ASSIGN_OR_RETURN(auto mem, f.OptUint("memory_mb", kMax32));
  if (mem && *mem < kMinMemoryMb) {
    return BadField(f.Path("memory_mb"), "must be at least 64, got " + std::to_string(*mem));
  }
  if (mem) spec.memory_mb = static_cast<uint32_t>(*mem);
  SKIFF_ASSIGN_OR_RETURN(spec.network, f.OptBool("network", false));
  SKIFF_ASSIGN_OR_RETURN(spec.idle_timeout_secs, f.OptUint("idle_timeout_secs"));
  SKIFF_ASSIGN_OR_RETURN(spec.env, ParseEnv(f.Get("env"), f.Path("env")));
  SKIFF_ASSIGN_OR_RETURN(spec.isolation, ReadIsolation(f));
  return OkStatus();
}

Result<std::string> ReadStdin(const Fields& f) {
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> b64, f.OptString("stdin"));
  if (!b64 || b64->empty()) return std::string();
  return DecodeBase64Field(*b64, f.Path("stdin"));
}

}  // namespace

Status CheckSnapshotRef(std::string_view ref, std::string_view field) {
  if (ref.empty() || ref.size() > kMaxSnapshotRef) return BadField(field, "must be 1 to 64 characters");
  for (char c : ref)
    if (!IsSnapshotRefChar(c)) return BadField(field, "may hold only letters, digits, '-', '_' and '.'");
  return OkStatus();
}

Result<CreateSpec> DecodeCreate(const json& payload) {
  Fields f(payload);
  CreateSpec spec;
  SKIFF_ASSIGN_OR_RETURN(spec.snapshot, f.OptString("snapshot"));
  if (spec.snapshot) {
    // From a snapshot: the image is the snapshot's (a given one must agree).
    SKIFF_RETURN_IF_ERROR(CheckSnapshotRef(*spec.snapshot, f.Path("snapshot")));
    SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> image, f.OptString("image"));
    spec.image = image.value_or("");
  } else {
    SKIFF_ASSIGN_OR_RETURN(spec.image, f.RequiredString("image"));
  }
  SKIFF_ASSIGN_OR_RETURN(spec.name, f.OptString("name"));
  SKIFF_RETURN_IF_ERROR(ReadCreateCommon(f, spec));
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> on_idle, f.OptString("on_idle"));
  if (on_idle && *on_idle != "stop" && *on_idle != "pause" && *on_idle != "hibernate")
    return BadField(f.Path("on_idle"),
                    "must be \"stop\", \"pause\" or \"hibernate\", got " + json(*on_idle).dump());
  spec.pause_on_idle = on_idle && *on_idle != "stop";
  spec.hibernate_on_idle = on_idle && *on_idle == "hibernate";
  SKIFF_ASSIGN_OR_RETURN(spec.auto_resume, f.OptBool("auto_resume", false));
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> raw_id, f.OptString("sandbox_id"));
  if (raw_id) {
    SKIFF_ASSIGN_OR_RETURN(spec.sandbox_id, ParseSandboxId(*raw_id));
  }
  return spec;
}

Result<ExecSpec> DecodeExec(const json& payload) {
  Fields f(payload);
  ExecSpec spec;
  SKIFF_ASSIGN_OR_RETURN(std::string raw_id, f.RequiredString("sandbox_id"));
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> cmd, f.OptString("cmd"));
  SKIFF_ASSIGN_OR_RETURN(std::vector<std::string> args, f.OptStringArray("args"));
  SKIFF_ASSIGN_OR_RETURN(std::vector<std::string> argv, f.OptStringArray("argv"));
  const json* env = f.Get("env");
  if (env != nullptr && !env->is_array() && !env->is_object()) return WrongType("env", "env", *env);
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> stdin_b64, f.OptString("stdin"));
  SKIFF_ASSIGN_OR_RETURN(spec.timeout_ms, f.OptUint("timeout_ms"));
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> workdir, f.OptString("workdir"));
  (void)stdin_b64;
  // Step 2: request-only rules.
  SKIFF_ASSIGN_OR_RETURN(spec.sandbox_id, ParseSandboxId(raw_id));
  std::string cmd_s = cmd.value_or("");
  SKIFF_RETURN_IF_ERROR(NoNul(cmd_s, "cmd"));
  for (size_t i = 0; i < args.size(); ++i) {
    SKIFF_RETURN_IF_ERROR(NoNul(args[i], "args[" + std::to_string(i) + "]"));
  }
  for (size_t i = 0; i < argv.size(); ++i) {
    SKIFF_RETURN_IF_ERROR(NoNul(argv[i], "argv[" + std::to_string(i) + "]"));
  }
  SKIFF_ASSIGN_OR_RETURN(spec.argv, ResolveCommand(cmd_s, args, argv));
  SKIFF_ASSIGN_OR_RETURN(spec.env, ParseEnv(env, "env"));
  SKIFF_ASSIGN_OR_RETURN(spec.stdin_bytes, ReadStdin(f));
  SKIFF_ASSIGN_OR_RETURN(spec.workdir, f.OptPath("workdir"));
  (void)workdir;
  return spec;
}

Result<RunSpec> DecodeRun(const json& payload) {
  Fields f(payload);
  RunSpec spec;
  SKIFF_ASSIGN_OR_RETURN(spec.create.image, f.RequiredString("image"));
  // Code and the interpreter that runs it, or (an extension) a command.
  SKIFF_ASSIGN_OR_RETURN(spec.argv, f.OptStringArray("argv"));
  if (f.Get("argv") != nullptr) {
    if (spec.argv.empty()) return BadField(f.Path("argv"), "must name a program (at least one element)");
    if (f.Get("code") != nullptr || f.Get("lang") != nullptr)
      return InvalidRequest("argv cannot be combined with code/lang; pick one shape");
    for (size_t i = 0; i < spec.argv.size(); ++i)
      SKIFF_RETURN_IF_ERROR(NoNul(spec.argv[i], "argv[" + std::to_string(i) + "]"));
    if (spec.argv[0].empty()) return BadField(f.Path("argv[0]"), "must not be empty");
  } else {
    SKIFF_ASSIGN_OR_RETURN(spec.code, f.RequiredString("code"));
    SKIFF_ASSIGN_OR_RETURN(spec.lang, f.RequiredString("lang"));
    SKIFF_RETURN_IF_ERROR(ValidateLang(spec.lang));
  }
  if (const json* files = f.Get("files")) {
    if (!files->is_array()) return WrongType("files", "array of objects", *files);
    for (size_t i = 0; i < files->size(); ++i) {
      const json& e = (*files)[i];
      std::string p = "files[" + std::to_string(i) + "]";
      if (!e.is_object()) return WrongType(p, "object", e);
      Fields ff(e, p);
      RunFile rf;
      SKIFF_ASSIGN_OR_RETURN(rf.path, ff.RequiredPath("path"));
      SKIFF_ASSIGN_OR_RETURN(rf.content, ff.RequiredString("content"));
      spec.files.push_back(std::move(rf));
    }
  }
  SKIFF_RETURN_IF_ERROR(ReadCreateCommon(f, spec.create));
  SKIFF_ASSIGN_OR_RETURN(spec.stdin_bytes, ReadStdin(f));
  SKIFF_ASSIGN_OR_RETURN(spec.timeout_ms, f.OptUint("timeout_ms"));
  SKIFF_ASSIGN_OR_RETURN(spec.keep_sandbox, f.OptBool("keep_sandbox", false));
  SKIFF_ASSIGN_OR_RETURN(spec.workdir, f.OptPath("workdir"));
  return spec;
}

}  // namespace skiff::fn
