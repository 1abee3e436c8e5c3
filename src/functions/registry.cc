// The function table and the 16 sandbox::* handlers plus the three engine::*
// functions. Each handler follows the check order of docs/api.md#conventions: decode
// (S001), request-only rules (S001), request-only filesystem rules (S210 /
// S217), and only then the manager call, which does lookup (S002), the
// stopping check (S004), admission (S003) and the operation.
#include "functions/registry.h"

#include <re2/re2.h>

#include <algorithm>
#include <cstdint>
#include <set>

#include "base/text.h"
#include "functions/decode.h"
#include "functions/errors.h"
#include "functions/host_handlers.h"
#include "functions/process_handlers.h"
#include "functions/schemas.h"
#include "functions/snapshot_handlers.h"
#include "protocol/fs_call.h"
#include "protocol/ops.h"

namespace skiff {
namespace {

using fn::Fields;
using nlohmann::json;

constexpr std::string_view kSandboxWorker = "iii-sandbox";
constexpr std::string_view kEngineWorker = "iii-engine-functions";

// ---- response encoders ----

json ExecJson(const ExecResult& r) {
  json j = {{"stdout", r.stdout_text},
            {"stderr", r.stderr_text},
            {"exit_code", r.exit_code},
            {"timed_out", false},
            {"duration_ms", r.duration_ms},
            {"success", r.exit_code == 0},
            {"stdout_truncated", r.stdout_truncated},
            {"stderr_truncated", r.stderr_truncated}};
  if (r.sandbox_id) j["sandbox_id"] = *r.sandbox_id;
  return j;
}

json ListEntryJson(const ListEntry& e) {
  return {{"sandbox_id", e.sandbox_id},
          {"name", e.name ? json(*e.name) : json(nullptr)},
          {"image", e.image},
          {"age_secs", e.age_secs},
          {"exec_in_progress", e.exec_in_flight > 0},
          {"exec_in_flight", e.exec_in_flight},
          {"exec_slots_free", e.exec_slots_free},
          {"stopped", e.stopped},
          {"state", e.state},
          {"hibernated", e.hibernated},
          {"isolation", e.isolation},
          {"created_at", e.created_at},
          {"last_activity_at", e.last_activity_at},
          {"cpus", e.cpus},
          {"memory_mb", e.memory_mb},
          {"network", e.network}};
}

json CatalogEntryJson(const CatalogEntry& e) {
  return {{"name", e.name},
          {"oci_ref", e.oci_ref},
          {"kind", e.kind},
          {"allowed", e.allowed},
          {"installed", e.installed}};
}

// ---- lifecycle handlers ----

Result<json> HandleCreate(const json& payload, CallContext& ctx) {
  SKIFF_ASSIGN_OR_RETURN(CreateSpec spec, fn::DecodeCreate(payload));
  SKIFF_ASSIGN_OR_RETURN(CreateResult r, ctx.manager.Create(spec));
  return json{{"sandbox_id", r.sandbox_id}, {"image", r.image}, {"isolation", r.isolation}};
}

Result<json> HandleExec(const json& payload, CallContext& ctx) {
  SKIFF_ASSIGN_OR_RETURN(ExecSpec spec, fn::DecodeExec(payload));
  SKIFF_ASSIGN_OR_RETURN(ExecResult r, ctx.manager.Exec(spec));
  r.sandbox_id.reset();
  return ExecJson(r);
}

Result<json> HandleStop(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(std::string raw, f.RequiredString("sandbox_id"));
  SKIFF_ASSIGN_OR_RETURN(bool wait, f.OptBool("wait", false));
  SKIFF_ASSIGN_OR_RETURN(std::string id, fn::ParseSandboxId(raw));
  SKIFF_RETURN_IF_ERROR(ctx.manager.Stop(id, wait));
  return json{{"sandbox_id", id}, {"stopped", true}};
}

Result<json> HandlePause(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(std::string raw, f.RequiredString("sandbox_id"));
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> mode, f.OptString("mode"));
  if (mode && *mode != "memory" && *mode != "disk")
    return InvalidRequest("field 'mode': must be \"memory\" or \"disk\", got " + json(*mode).dump());
  SKIFF_ASSIGN_OR_RETURN(std::string id, fn::ParseSandboxId(raw));
  const bool disk = mode && *mode == "disk";
  SKIFF_RETURN_IF_ERROR(disk ? ctx.manager.Hibernate(id) : ctx.manager.Pause(id));
  return json{{"sandbox_id", id}, {"state", "paused"}, {"hibernated", disk}};
}

Result<json> HandleResume(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(std::string raw, f.RequiredString("sandbox_id"));
  SKIFF_ASSIGN_OR_RETURN(std::string id, fn::ParseSandboxId(raw));
  SKIFF_RETURN_IF_ERROR(ctx.manager.Resume(id));
  return json{{"sandbox_id", id}, {"state", "running"}};
}

Result<json> HandleList(const json&, CallContext& ctx) {
  json arr = json::array();
  for (const ListEntry& e : ctx.manager.List()) arr.push_back(ListEntryJson(e));
  return json{{"sandboxes", std::move(arr)}};
}

Result<json> HandleMetrics(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(std::string raw, f.RequiredString("sandbox_id"));
  SKIFF_ASSIGN_OR_RETURN(std::string id, fn::ParseSandboxId(raw));
  SKIFF_ASSIGN_OR_RETURN(SandboxMetrics m, ctx.manager.Metrics(id));
  return json{{"sandbox_id", id},
              {"cpu_count", m.usage.cpu_count},
              {"cpu_used_pct", m.usage.cpu_used_pct},
              {"mem_used_bytes", m.usage.mem_used_bytes},
              {"mem_total_bytes", m.usage.mem_total_bytes},
              {"disk_used_bytes", m.usage.disk_used_bytes},
              {"disk_total_bytes", m.usage.disk_total_bytes},
              {"timestamp_ms", m.timestamp_unix_ms}};
}

Result<json> HandleRun(const json& payload, CallContext& ctx) {
  SKIFF_ASSIGN_OR_RETURN(RunSpec spec, fn::DecodeRun(payload));
  SKIFF_ASSIGN_OR_RETURN(ExecResult r, ctx.manager.Run(spec));
  if (!spec.keep_sandbox) r.sandbox_id.reset();
  return ExecJson(r);
}

Result<json> HandleCatalogList(const json&, CallContext& ctx) {
  json arr = json::array();
  for (const CatalogEntry& e : ctx.manager.CatalogList()) arr.push_back(CatalogEntryJson(e));
  return json{{"images", std::move(arr)}};
}

// ---- fs handlers ----

// sandbox_id + path, the common head of most fs requests.
struct PathReq {
  std::string id;
  std::string path;
};
Result<PathReq> ReadIdAndPath(const Fields& f) {
  SKIFF_ASSIGN_OR_RETURN(std::string raw, f.RequiredString("sandbox_id"));
  SKIFF_ASSIGN_OR_RETURN(std::string path, f.RequiredPath("path"));
  SKIFF_ASSIGN_OR_RETURN(std::string id, fn::ParseSandboxId(raw));
  return PathReq{std::move(id), std::move(path)};
}

// A caller's count as the agent's int64 field: larger asks for no limit
// the agent could reach anyway.
int64_t Saturate(uint64_t v) { return static_cast<int64_t>(std::min<uint64_t>(v, INT64_MAX)); }

Result<json> HandleLs(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(PathReq r, ReadIdAndPath(f));
  return ctx.manager.Fs(r.id, proto::FsLsRequest{r.path});
}

Result<json> HandleStat(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(PathReq r, ReadIdAndPath(f));
  return ctx.manager.Fs(r.id, proto::FsStatRequest{r.path});
}

Result<json> HandleMkdir(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(PathReq r, ReadIdAndPath(f));
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> mode_s, f.OptString("mode"));
  SKIFF_ASSIGN_OR_RETURN(bool parents, f.OptBool("parents", false));
  SKIFF_ASSIGN_OR_RETURN(uint32_t mode, fn::ParseMode(mode_s.value_or(std::string(fn::kDefaultDirMode))));
  return ctx.manager.Fs(r.id, proto::FsMkdirRequest{r.path, mode, parents});
}

Result<json> HandleRm(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(PathReq r, ReadIdAndPath(f));
  SKIFF_ASSIGN_OR_RETURN(bool recursive, f.OptBool("recursive", false));
  return ctx.manager.Fs(r.id, proto::FsRmRequest{r.path, recursive});
}

Result<json> HandleChmod(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(std::string raw, f.RequiredString("sandbox_id"));
  SKIFF_ASSIGN_OR_RETURN(std::string path, f.RequiredPath("path"));
  SKIFF_ASSIGN_OR_RETURN(std::string mode_s, f.RequiredString("mode"));
  SKIFF_ASSIGN_OR_RETURN(std::optional<uint64_t> uid, f.OptUint("uid", fn::kMax32));
  SKIFF_ASSIGN_OR_RETURN(std::optional<uint64_t> gid, f.OptUint("gid", fn::kMax32));
  SKIFF_ASSIGN_OR_RETURN(bool recursive, f.OptBool("recursive", false));
  SKIFF_ASSIGN_OR_RETURN(std::string id, fn::ParseSandboxId(raw));
  SKIFF_ASSIGN_OR_RETURN(uint32_t mode, fn::ParseMode(mode_s));
  proto::FsChmodRequest req;
  req.path = path;
  req.mode = mode;
  if (uid) req.uid = static_cast<uint32_t>(*uid);
  if (gid) req.gid = static_cast<uint32_t>(*gid);
  req.recursive = recursive;
  return ctx.manager.Fs(id, req);
}

Result<json> HandleMv(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(std::string raw, f.RequiredString("sandbox_id"));
  SKIFF_ASSIGN_OR_RETURN(std::string src, f.RequiredPath("src"));
  SKIFF_ASSIGN_OR_RETURN(std::string dst, f.RequiredPath("dst"));
  SKIFF_ASSIGN_OR_RETURN(bool overwrite, f.OptBool("overwrite", false));
  SKIFF_ASSIGN_OR_RETURN(std::string id, fn::ParseSandboxId(raw));
  return ctx.manager.Fs(id, proto::FsMvRequest{src, dst, overwrite});
}

// S217 "invalid regex pattern: <RE2 error>" when `pattern` does not compile.
Status CheckRegex(const std::string& pattern, bool ignore_case) {
  RE2::Options opts;
  opts.set_log_errors(false);
  opts.set_case_sensitive(!ignore_case);
  RE2 re(pattern, opts);
  if (!re.ok()) {
    return Error(Code::kS217, std::string(FsPrefix(Code::kS217)) + re.error());
  }
  return OkStatus();
}

Result<std::vector<std::string>> ReadGlobs(const Fields& f, std::string_view name) {
  SKIFF_ASSIGN_OR_RETURN(std::vector<std::string> globs, f.OptStringArray(name));
  for (size_t i = 0; i < globs.size(); ++i) {
    SKIFF_RETURN_IF_ERROR(fn::NoNul(globs[i], f.Path(name) + "[" + std::to_string(i) + "]"));
  }
  return globs;
}

Result<json> HandleGrep(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(std::string raw, f.RequiredString("sandbox_id"));
  SKIFF_ASSIGN_OR_RETURN(std::string path, f.RequiredPath("path"));
  SKIFF_ASSIGN_OR_RETURN(std::string pattern, f.RequiredString("pattern"));
  SKIFF_ASSIGN_OR_RETURN(bool recursive, f.OptBool("recursive", true));
  SKIFF_ASSIGN_OR_RETURN(bool ignore_case, f.OptBool("ignore_case", false));
  SKIFF_ASSIGN_OR_RETURN(std::vector<std::string> include, ReadGlobs(f, "include_glob"));
  SKIFF_ASSIGN_OR_RETURN(std::vector<std::string> exclude, ReadGlobs(f, "exclude_glob"));
  SKIFF_ASSIGN_OR_RETURN(std::optional<uint64_t> max_matches, f.OptUint("max_matches"));
  SKIFF_ASSIGN_OR_RETURN(std::optional<uint64_t> max_line, f.OptUint("max_line_bytes"));
  SKIFF_ASSIGN_OR_RETURN(std::string id, fn::ParseSandboxId(raw));
  SKIFF_RETURN_IF_ERROR(CheckRegex(pattern, ignore_case));
  proto::FsGrepRequest req;
  req.path = path;
  req.pattern = pattern;
  req.recursive = recursive;
  req.ignore_case = ignore_case;
  req.include_glob = include;
  req.exclude_glob = exclude;
  uint64_t matches = max_matches.value_or(fn::kGrepDefaultMaxMatches);
  if (matches == 0 || matches > fn::kGrepMaxMatches) matches = fn::kGrepMaxMatches;
  req.max_matches = Saturate(matches);
  req.max_line_bytes = Saturate(max_line.value_or(fn::kGrepDefaultMaxLineBytes));
  return ctx.manager.Fs(id, req);
}

Result<json> HandleSed(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(std::string raw, f.RequiredString("sandbox_id"));
  SKIFF_ASSIGN_OR_RETURN(std::string pattern, f.RequiredString("pattern"));
  SKIFF_ASSIGN_OR_RETURN(std::string replacement, f.RequiredString("replacement"));
  SKIFF_ASSIGN_OR_RETURN(std::vector<std::string> files, f.OptStringArray("files"));
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> path, f.OptPath("path"));
  SKIFF_ASSIGN_OR_RETURN(bool recursive, f.OptBool("recursive", true));
  SKIFF_ASSIGN_OR_RETURN(std::vector<std::string> include, ReadGlobs(f, "include_glob"));
  SKIFF_ASSIGN_OR_RETURN(std::vector<std::string> exclude, ReadGlobs(f, "exclude_glob"));
  SKIFF_ASSIGN_OR_RETURN(bool regex, f.OptBool("regex", true));
  SKIFF_ASSIGN_OR_RETURN(bool first_only, f.OptBool("first_only", false));
  SKIFF_ASSIGN_OR_RETURN(bool ignore_case, f.OptBool("ignore_case", false));
  for (size_t i = 0; i < files.size(); ++i) {
    std::string p = "files[" + std::to_string(i) + "]";
    if (files[i].empty()) return fn::BadField(p, "must not be empty");
    SKIFF_RETURN_IF_ERROR(fn::NoNul(files[i], p));
  }
  SKIFF_ASSIGN_OR_RETURN(std::string id, fn::ParseSandboxId(raw));
  // Step 3: request-only filesystem rules.
  if (!files.empty() && path) return Error(Code::kS210, "sed: give files or path, not both");
  if (files.empty() && !path) return Error(Code::kS210, "sed: one of files or path is required");
  if (pattern.empty()) return Error(Code::kS210, "sed: pattern must not be empty");
  if (regex) SKIFF_RETURN_IF_ERROR(CheckRegex(pattern, ignore_case));
  proto::FsSedRequest req;
  if (path) {
    req.path = *path;
    req.recursive = recursive;
    req.include_glob = include;
    req.exclude_glob = exclude;
  } else {
    req.files = files;
  }
  req.pattern = pattern;
  req.replacement = replacement;
  req.regex = regex;
  req.first_only = first_only;
  req.ignore_case = ignore_case;
  return ctx.manager.Fs(id, req);
}

// fs::write body: string, channel reference, or base64.
struct WriteBody {
  std::optional<std::string> bytes;  // string or decoded base64
  std::optional<json> channel;       // reader reference
};

Result<WriteBody> ReadWriteBody(const Fields& f) {
  const json* content = f.Get("content");
  const json* b64 = f.Get("content_b64");
  if (content != nullptr && b64 != nullptr) {
    return InvalidRequest("fs::write takes content or content_b64, not both");
  }
  if (content == nullptr && b64 == nullptr) {
    return InvalidRequest("fs::write needs a body: content (string or channel reference) or content_b64");
  }
  WriteBody body;
  if (b64 != nullptr) {
    if (!b64->is_string()) return fn::WrongType("content_b64", "string", *b64);
    SKIFF_ASSIGN_OR_RETURN(body.bytes, fn::DecodeBase64Field(b64->get<std::string>(), "content_b64"));
    return body;
  }
  if (content->is_string()) {
    body.bytes = content->get<std::string>();
    return body;
  }
  if (!content->is_object()) {
    return fn::WrongType("content", "channel reference or string", *content);
  }
  Fields ref(*content, "content");
  SKIFF_ASSIGN_OR_RETURN(std::string channel_id, ref.RequiredString("channel_id"));
  SKIFF_ASSIGN_OR_RETURN(std::string access_key, ref.RequiredString("access_key"));
  SKIFF_ASSIGN_OR_RETURN(std::string direction, ref.RequiredString("direction"));
  body.channel = json{{"channel_id", channel_id}, {"access_key", access_key}, {"direction", direction}};
  return body;
}

Result<json> HandleWrite(const json& payload, CallContext& ctx) {
  Fields f(payload);
  // The body is checked before sandbox_id (docs/api.md#sandboxfswrite).
  SKIFF_ASSIGN_OR_RETURN(WriteBody body, ReadWriteBody(f));
  SKIFF_ASSIGN_OR_RETURN(PathReq r, ReadIdAndPath(f));
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> mode_s, f.OptString("mode"));
  SKIFF_ASSIGN_OR_RETURN(bool parents, f.OptBool("parents", false));
  if (body.channel && ctx.channels == nullptr) {
    return InvalidRequest("content: channel references are not available on this transport");
  }
  SKIFF_ASSIGN_OR_RETURN(uint32_t mode, fn::ParseMode(mode_s.value_or(std::string(fn::kDefaultFileMode))));
  ByteSource source;
  if (body.bytes) {
    auto data = std::make_shared<std::string>(std::move(*body.bytes));
    auto given = std::make_shared<bool>(false);
    source = [data, given]() -> Result<std::string> {
      if (*given) return std::string();
      *given = true;
      return std::move(*data);
    };
  } else {
    // Attach lazily, on the first pull: the manager has done the lookup by
    // then, so no channel is consumed for a request that fails earlier.
    auto inner = std::make_shared<ByteSource>();
    ChannelBroker* broker = ctx.channels;
    json ref = *body.channel;
    source = [inner, broker, ref]() -> Result<std::string> {
      if (!*inner) {
        SKIFF_ASSIGN_OR_RETURN(*inner, broker->AttachReader(ref));
      }
      return (*inner)();
    };
  }
  SKIFF_ASSIGN_OR_RETURN(json result, ctx.manager.FsWrite(r.id, r.path, mode, parents, source, {}));
  json out = {{"path", r.path}};
  out["bytes_written"] = result.contains("bytes_written") ? result["bytes_written"] : json(0);
  return out;
}

Result<json> HandleRead(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(PathReq r, ReadIdAndPath(f));
  std::optional<FsReadMeta> meta;
  std::string data;
  bool large = false;  // stopped collecting: size ≥ 1 MiB
  Status st = ctx.manager.FsRead(
      r.id, r.path,
      [&](const FsReadMeta& m) {
        meta = m;
        if (m.size >= fn::kReadInlineLimit) large = true;
      },
      [&](std::string_view chunk) {
        if (large) return false;
        if (data.size() + chunk.size() >= fn::kReadInlineLimit) {
          large = true;  // the file grew past the inline limit while being read
          data.clear();
          return false;
        }
        data.append(chunk);
        return true;
      });
  // An abort we asked for (a large file) is not an error.
  if (!st.ok() && !(large && meta)) return std::move(st).error();
  if (!meta) return Error(Code::kS216, std::string(FsPrefix(Code::kS216)) + "no metadata from sandbox");

  json out = {{"size", meta->size}, {"mode", meta->mode}, {"mtime", meta->mtime}};
  if (!large && IsValidUtf8(data)) out["body"] = data;
  if (ctx.channels != nullptr) {
    ChannelBroker::Producer producer;
    if (!large) {
      auto bytes = std::make_shared<std::string>(std::move(data));
      producer = [bytes](const ByteSink& sink) -> Status {
        for (size_t off = 0; off < bytes->size(); off += fn::kChannelChunk) {
          std::string_view chunk(bytes->data() + off, std::min(fn::kChannelChunk, bytes->size() - off));
          if (!sink(chunk)) {
            return Error(Code::kS216, std::string(FsPrefix(Code::kS216)) + "channel reader went away");
          }
        }
        return OkStatus();
      };
    } else {
      // Large file: re-read lazily when a reader attaches; holds no sandbox
      // resources until then.
      SandboxService* manager = &ctx.manager;
      std::string id = r.id, path = r.path;
      producer = [manager, id, path](const ByteSink& sink) -> Status {
        return manager->FsRead(
            id, path, [](const FsReadMeta&) {}, sink);
      };
    }
    SKIFF_ASSIGN_OR_RETURN(json ref, ctx.channels->CreateReadChannel(std::move(producer)));
    out["content"] = std::move(ref);
  }
  return out;
}

// ---- engine::* ----

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

json Summary(const FunctionDef& d) {
  return {{"function_id", d.id},
          {"namespace", "default"},
          {"worker_name", d.worker_name},
          {"description", d.description}};
}

json Details(const FunctionDef& d) {
  json j = Summary(d);
  j["request_schema"] = d.request_schema;
  j["response_schema"] = d.response_schema;
  j["registered_triggers"] = json::array();
  return j;
}

Result<json> HandleFunctionsList(const json& payload, CallContext&) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> prefix, f.OptString("prefix"));
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> search, f.OptString("search"));
  SKIFF_ASSIGN_OR_RETURN(std::optional<std::string> worker, f.OptString("worker"));
  SKIFF_ASSIGN_OR_RETURN(std::vector<std::string> workers, f.OptStringArray("workers"));
  SKIFF_ASSIGN_OR_RETURN(bool include_internal, f.OptBool("include_internal", false));
  std::vector<const FunctionDef*> id_hits, desc_hits;
  std::string needle = search ? Lower(*search) : "";
  for (const FunctionDef& d : Functions()) {
    if (d.internal && !include_internal) continue;
    if (prefix && d.id.rfind(*prefix, 0) != 0) continue;
    if (worker && d.worker_name != *worker) continue;
    if (!workers.empty() && std::find(workers.begin(), workers.end(), d.worker_name) == workers.end()) {
      continue;
    }
    if (search) {
      if (Lower(d.id).find(needle) != std::string::npos) {
        id_hits.push_back(&d);
      } else if (Lower(d.description).find(needle) != std::string::npos) {
        desc_hits.push_back(&d);
      }
    } else {
      id_hits.push_back(&d);
    }
  }
  auto by_id = [](const FunctionDef* a, const FunctionDef* b) { return a->id < b->id; };
  std::sort(id_hits.begin(), id_hits.end(), by_id);
  std::sort(desc_hits.begin(), desc_hits.end(), by_id);
  json arr = json::array();
  for (const auto* d : id_hits) arr.push_back(Summary(*d));
  for (const auto* d : desc_hits) arr.push_back(Summary(*d));
  return json{{"functions", std::move(arr)}};
}

Result<json> HandleFunctionsInfo(const json& payload, CallContext& ctx) {
  auto invalid = [&ctx](std::string m) { return ctx.Fail(EngineFault::InvalidArguments(std::move(m))); };
  const json* ns = nullptr;
  if (auto it = payload.find("namespace"); it != payload.end() && !it->is_null()) ns = &*it;
  if (ns != nullptr && (!ns->is_string() || ns->get<std::string>() != "default")) {
    return invalid("namespace must be absent or \"default\"");
  }
  const json* one = nullptr;
  const json* many = nullptr;
  if (auto it = payload.find("function_id"); it != payload.end() && !it->is_null()) one = &*it;
  if (auto it = payload.find("function_ids"); it != payload.end() && !it->is_null()) many = &*it;
  if (one != nullptr && many != nullptr) return invalid("give function_id or function_ids, not both");
  if (one == nullptr && many == nullptr) return invalid("one of function_id or function_ids is required");
  if (one != nullptr) {
    if (!one->is_string()) return invalid("function_id must be a string");
    const FunctionDef* d = FindFunction(one->get<std::string>());
    if (d == nullptr) {
      return ctx.Fail(EngineFault::NotFound("function '" + one->get<std::string>() + "' not found"));
    }
    return Details(*d);
  }
  if (!many->is_array()) return invalid("function_ids must be an array of strings");
  std::vector<std::string> ids;
  std::set<std::string> seen;
  for (const json& e : *many) {
    if (!e.is_string()) return invalid("function_ids must be an array of strings");
    if (seen.insert(e.get<std::string>()).second) ids.push_back(e.get<std::string>());
  }
  if (ids.empty()) return invalid("function_ids must not be empty");
  if (ids.size() > fn::kInfoBatchMax) return invalid("function_ids takes at most 32 ids");
  json arr = json::array();
  for (const std::string& id : ids) {
    const FunctionDef* d = FindFunction(id);
    if (d == nullptr) {
      arr.push_back({{"function_id", id}, {"error", "not_found"}});
    } else {
      arr.push_back(Details(*d));
    }
  }
  return json{{"functions", std::move(arr)}};
}

Result<json> HandleChannelsCreate(const json& payload, CallContext& ctx) {
  Fields f(payload);
  SKIFF_ASSIGN_OR_RETURN(std::optional<int64_t> size, f.OptInt("buffer_size"));
  if (ctx.channels == nullptr) {
    return InvalidRequest("data channels are not available on this transport");
  }
  int64_t n = size.value_or(fn::kChannelBufferDefault);
  n = std::clamp<int64_t>(n, fn::kChannelBufferMin, fn::kChannelBufferMax);
  return ctx.channels->CreateChannelPair(static_cast<uint32_t>(n));
}

// ---- the table ----

using Handler = Result<json> (*)(const json&, CallContext&);

FunctionDef Def(std::string id, std::string description, Handler h, std::vector<Code> errors) {
  FunctionDef d;
  d.id = std::move(id);
  d.description = std::move(description);
  fn::FunctionSchemas s = fn::SchemasFor(d.id);
  d.request_schema = std::move(s.request);
  d.response_schema = std::move(s.response);
  d.internal = d.id.rfind("engine::", 0) == 0;
  d.worker_name = std::string(d.internal ? kEngineWorker : kSandboxWorker);
  // Every handler reads a null payload as {} and rejects non-objects (docs/api.md#conventions).
  d.handler = [h](const json& payload, CallContext& ctx) -> Result<json> {
    SKIFF_ASSIGN_OR_RETURN(json p, fn::NormalizePayload(payload));
    return h(p, ctx);
  };
  d.errors = std::move(errors);
  return d;
}

std::vector<FunctionDef> BuildTable() {
  using C = Code;
  const std::vector<C> fs_base = {C::kS001, C::kS002, C::kS004, C::kS211, C::kS215, C::kS216};
  auto with = [&](std::vector<C> extra) {
    std::vector<C> v = fs_base;
    v.insert(v.end(), extra.begin(), extra.end());
    std::sort(v.begin(), v.end());
    return v;
  };
  std::vector<FunctionDef> t;
  t.push_back(Def("sandbox::create",
                  "Boot a sandbox from an allowlisted catalog image (or a snapshot); returns sandbox_id.",
                  HandleCreate, {C::kS001, C::kS007, C::kS100, C::kS101, C::kS102, C::kS300, C::kS400}));
  t.push_back(
      Def("sandbox::exec",
          "Run one command (shell-line, cmd+args, or argv shape) in a sandbox; returns "
          "stdout, stderr and exit code.",
          HandleExec,
          {C::kS001, C::kS002, C::kS003, C::kS004, C::kS200, C::kS211, C::kS212, C::kS219, C::kS300}));
  t.push_back(Def("sandbox::stop",
                  "Kill a sandbox's processes and discard its private writable layer (wait: true "
                  "blocks until fully released).",
                  HandleStop, {C::kS001, C::kS002}));
  t.push_back(Def("sandbox::pause",
                  "Stop every process of a sandbox where it stands (memory and files kept) until "
                  "sandbox::resume.",
                  HandlePause, {C::kS001, C::kS002, C::kS004, C::kS006, C::kS300, C::kS400}));
  t.push_back(Def("sandbox::resume", "Let a paused sandbox's processes run again, where they stood.",
                  HandleResume, {C::kS001, C::kS002, C::kS004, C::kS006, C::kS300}));
  t.push_back(Def("sandbox::list", "List live sandboxes with age, exec-slot usage and state.", HandleList,
                  {C::kS001}));
  t.push_back(Def("sandbox::metrics",
                  "CPU, memory and disk use of a running or paused sandbox (the jail's cgroups; the "
                  "microVM guest's own counters, a paused VM's as sampled before its pause).",
                  HandleMetrics, {C::kS001, C::kS002, C::kS004, C::kS005, C::kS300}));
  // Snapshots (functions/snapshot_handlers.h, docs/snapshots.md).
  t.push_back(Def("sandbox::snapshot",
                  "Save a running or paused sandbox as a named, listable snapshot (files; on the microVM "
                  "its processes too).",
                  fn::HandleSnapshot, {C::kS001, C::kS002, C::kS004, C::kS300, C::kS400}));
  t.push_back(Def("sandbox::snapshot::list", "List the snapshots.", fn::HandleSnapshotList, {C::kS001}));
  t.push_back(Def("sandbox::snapshot::delete", "Delete a snapshot and its files.", fn::HandleSnapshotDelete,
                  {C::kS001, C::kS007, C::kS008}));
  t.push_back(Def("sandbox::fork", "Create count new sandboxes from one sandbox's current state.",
                  fn::HandleFork, {C::kS001, C::kS002, C::kS004, C::kS007, C::kS100, C::kS300, C::kS400}));
  t.push_back(Def("sandbox::run",
                  "One-shot: create, write code to /tmp/run.<ext>, run it with the interpreter "
                  "for lang, stop.",
                  HandleRun,
                  {C::kS001, C::kS100, C::kS101, C::kS102, C::kS200, C::kS211, C::kS212, C::kS215, C::kS216,
                   C::kS300, C::kS400}));
  // A fleet router's questions to one host (functions/host_handlers.h, docs/multihost.md).
  t.push_back(Def("skiff::host::status", "This host's identity, backends and room, for placing creates.",
                  fn::HandleHostStatus, {C::kS001}));
  t.push_back(
      Def("skiff::host::has", "Whether a sandbox lives on this host.", fn::HandleHostHas, {C::kS001}));
  t.push_back(Def("sandbox::catalog::list",
                  "List the image catalog (presets python, node, plus operator-defined images).",
                  HandleCatalogList, {C::kS001}));
  t.push_back(Def("sandbox::fs::ls", "List a directory's entries.", HandleLs, with({C::kS212})));
  t.push_back(
      Def("sandbox::fs::stat", "Metadata of one path (without following a symlink).", HandleStat, with({})));
  t.push_back(Def("sandbox::fs::mkdir", "Create a directory, optionally with parents.", HandleMkdir,
                  with({C::kS210, C::kS212, C::kS213})));
  t.push_back(Def("sandbox::fs::write",
                  "Write a whole file atomically from a string, base64, or a streamed channel.", HandleWrite,
                  with({C::kS210, C::kS212, C::kS218})));
  t.push_back(Def("sandbox::fs::read",
                  "Read a file: inline body if < 1 MiB and UTF-8, always a content stream "
                  "reference.",
                  HandleRead, with({C::kS212})));
  t.push_back(Def("sandbox::fs::rm", "Remove a file, symlink or directory (recursive on request).", HandleRm,
                  with({C::kS214})));
  t.push_back(Def("sandbox::fs::chmod", "Change mode (and optionally owner/group), optionally recursively.",
                  HandleChmod, with({C::kS210})));
  t.push_back(Def("sandbox::fs::mv", "Rename or move a path, optionally overwriting.", HandleMv,
                  with({C::kS212, C::kS213, C::kS214})));
  t.push_back(Def("sandbox::fs::grep",
                  "Search files for an RE2 pattern; returns {path, line, content} matches.", HandleGrep,
                  with({C::kS210, C::kS217})));
  t.push_back(Def("sandbox::fs::sed",
                  "Find and replace (regex or literal) across a file list or a directory tree.", HandleSed,
                  with({C::kS210, C::kS217})));
  // Live processes (functions/process_handlers.h).
  const std::vector<C> proc_base = {C::kS001, C::kS002, C::kS004, C::kS200, C::kS219, C::kS220, C::kS300};
  auto proc = [&](std::vector<C> extra) {
    std::vector<C> v = proc_base;
    v.insert(v.end(), extra.begin(), extra.end());
    std::sort(v.begin(), v.end());
    return v;
  };
  t.push_back(
      Def("sandbox::process::start",
          "Start a process in the background (optionally on a pseudo-terminal); returns its pid at "
          "once.",
          fn::HandleProcessStart,
          {C::kS001, C::kS002, C::kS004, C::kS200, C::kS211, C::kS212, C::kS219, C::kS300, C::kS400}));
  t.push_back(Def("sandbox::process::list", "List a sandbox's live processes and recently exited ones.",
                  fn::HandleProcessList, {C::kS001, C::kS002, C::kS004, C::kS200, C::kS219, C::kS300}));
  t.push_back(Def("sandbox::process::output",
                  "Read a process's output from absolute offsets, or follow it through a data channel.",
                  fn::HandleProcessOutput, proc({C::kS216, C::kS400})));
  t.push_back(Def("sandbox::process::input", "Write to a process's stdin or terminal; optionally close it.",
                  fn::HandleProcessInput, proc({C::kS218, C::kS221})));
  t.push_back(Def("sandbox::process::signal",
                  "Send INT, TERM, KILL, HUP, QUIT, USR1, USR2, STOP, CONT or WINCH to a process's group.",
                  fn::HandleProcessSignal, proc({C::kS221})));
  t.push_back(Def("sandbox::process::wait", "Wait for a process to exit, up to a timeout.",
                  fn::HandleProcessWait, proc({})));
  t.push_back(Def("sandbox::process::resize", "Resize a PTY process's terminal.", fn::HandleProcessResize,
                  proc({C::kS221})));
  t.push_back(Def("sandbox::process::forget", "Remove an exited process from the list.",
                  fn::HandleProcessForget, proc({C::kS221})));
  t.push_back(Def("engine::functions::list", "List the functions this server provides.", HandleFunctionsList,
                  {C::kS001}));
  t.push_back(Def("engine::functions::info", "Details and schemas of one function, or of up to 32 functions.",
                  HandleFunctionsInfo, {}));
  t.push_back(Def("engine::channels::create",
                  "Create a data channel; returns its writer and reader references.", HandleChannelsCreate,
                  {C::kS001}));
  std::sort(t.begin(), t.end(), [](const FunctionDef& a, const FunctionDef& b) { return a.id < b.id; });
  return t;
}

}  // namespace

const std::vector<FunctionDef>& Functions() {
  static const std::vector<FunctionDef>* table = new std::vector<FunctionDef>(BuildTable());
  return *table;
}

const FunctionDef* FindFunction(std::string_view id) {
  for (const FunctionDef& d : Functions())
    if (d.id == id) return &d;
  return nullptr;
}

Invocation Invoke(std::string_view id, const json& payload, CallContext& ctx) {
  Invocation inv;
  const FunctionDef* d = FindFunction(id);
  if (d == nullptr) {
    inv.engine_error = EngineFault::FunctionNotFound(id);
    return inv;
  }
  Result<json> normalized = fn::NormalizePayload(payload);
  if (!normalized.ok()) {
    inv.error = std::move(normalized).error();
    return inv;
  }
  ctx.engine_fault.reset();
  Result<json> r = d->handler(*normalized, ctx);
  if (ctx.engine_fault) {
    inv.engine_error = std::move(ctx.engine_fault);
    ctx.engine_fault.reset();
  } else if (r.ok()) {
    inv.result = std::move(r).value();
  } else {
    inv.error = std::move(r).error();
  }
  return inv;
}

}  // namespace skiff
