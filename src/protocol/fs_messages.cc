#include "protocol/fs_messages.h"

#include "protocol/message_fields.h"

namespace skiff::proto {

using nlohmann::json;

namespace {

// Runs `parse` (which reports S001 field errors) on an answer of the agent
// and turns its error into S300.
template <typename F>
auto Answer(std::string_view what, F&& parse) -> decltype(parse()) {
  auto r = parse();
  if (!r.ok()) return field::AnswerError(what, r.error());
  return r;
}

// The elements of obj[key], each parsed by `one`; errors name the index.
template <typename T, typename F>
Result<std::vector<T>> Each(const json& obj, const char* key, F&& one) {
  SKIFF_ASSIGN_OR_RETURN(const json* arr, field::Array(obj, key));
  std::vector<T> out;
  out.reserve(arr->size());
  for (size_t i = 0; i < arr->size(); ++i) {
    auto v = one((*arr)[i]);
    if (!v.ok())
      return Error(v.error().code(), v.error().message() + " (" + key + "[" + std::to_string(i) + "])");
    out.push_back(std::move(v).value());
  }
  return out;
}

// A request carrying only a path.
template <typename T>
Result<T> PathOnly(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, T::kOp));
  T r;
  SKIFF_ASSIGN_OR_RETURN(r.path, field::Path(j, "path"));
  return r;
}

// An owner or group name: 1..FsEntry::kMaxNameBytes bytes, so a hostile
// agent cannot hand the host unbounded names.
Result<std::string> OwnerName(const json& j, const char* key) {
  SKIFF_ASSIGN_OR_RETURN(std::string s, field::String(j, key));
  if (s.empty() || s.size() > FsEntry::kMaxNameBytes)
    return InvalidRequest(std::string(key) + ": expected 1 to " + std::to_string(FsEntry::kMaxNameBytes) +
                          " bytes");
  return s;
}

Result<FsEntry> EntryFields(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "entry"));
  FsEntry e;
  SKIFF_ASSIGN_OR_RETURN(e.name, field::String(j, "name"));
  SKIFF_ASSIGN_OR_RETURN(e.is_dir, field::RequiredBool(j, "is_dir"));
  SKIFF_ASSIGN_OR_RETURN(e.size, field::IntIn(j, "size", 0, INT64_MAX));
  SKIFF_ASSIGN_OR_RETURN(e.mode, field::ModeText(j, "mode"));
  SKIFF_ASSIGN_OR_RETURN(e.mtime, field::IntIn(j, "mtime", INT64_MIN, INT64_MAX));
  SKIFF_ASSIGN_OR_RETURN(e.is_symlink, field::RequiredBool(j, "is_symlink"));
  SKIFF_ASSIGN_OR_RETURN(int64_t uid, field::IntIn(j, "uid", 0, UINT32_MAX));
  SKIFF_ASSIGN_OR_RETURN(int64_t gid, field::IntIn(j, "gid", 0, UINT32_MAX));
  e.uid = static_cast<uint32_t>(uid);
  e.gid = static_cast<uint32_t>(gid);
  SKIFF_ASSIGN_OR_RETURN(e.owner, OwnerName(j, "owner"));
  SKIFF_ASSIGN_OR_RETURN(e.group, OwnerName(j, "group"));
  if (!field::Missing(j, "symlink_target")) {
    if (!e.is_symlink) return InvalidRequest("symlink_target: only for a symlink");
    SKIFF_ASSIGN_OR_RETURN(e.symlink_target, field::Path(j, "symlink_target"));
    if (e.symlink_target->front() != '/') return InvalidRequest("symlink_target: expected an absolute path");
  }
  SKIFF_ASSIGN_OR_RETURN(e.metadata, MetadataFromJson(j, "metadata"));
  return e;
}

Result<FsGrepMatch> MatchFields(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "match"));
  FsGrepMatch m;
  SKIFF_ASSIGN_OR_RETURN(m.path, field::String(j, "path"));
  SKIFF_ASSIGN_OR_RETURN(m.line, field::IntIn(j, "line", 1, INT64_MAX));
  SKIFF_ASSIGN_OR_RETURN(m.content, field::String(j, "content"));
  SKIFF_ASSIGN_OR_RETURN(m.byte_offset, field::IntIn(j, "byte_offset", 0, INT64_MAX));
  return m;
}

Result<FsSedFileResult> SedFileFields(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "file result"));
  FsSedFileResult f;
  SKIFF_ASSIGN_OR_RETURN(f.path, field::String(j, "path"));
  SKIFF_ASSIGN_OR_RETURN(f.replacements, field::IntIn(j, "replacements", 0, INT64_MAX));
  SKIFF_ASSIGN_OR_RETURN(f.success, field::RequiredBool(j, "success"));
  SKIFF_ASSIGN_OR_RETURN(f.error, field::OptString(j, "error"));
  return f;
}

// An answer that is {key: <bool>}.
Result<bool> OneBool(const json& j, const char* key) {
  SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "RESULT"));
  return field::RequiredBool(j, key);
}

}  // namespace

// ------------------------------------------------------------ FsEntry

json FsEntry::ToJson() const {
  json j{{"name", name},  {"is_dir", is_dir}, {"size", size},
         {"mode", mode},  {"mtime", mtime},   {"is_symlink", is_symlink},
         {"uid", uid},    {"gid", gid},       {"owner", owner},
         {"group", group}};
  if (symlink_target) j["symlink_target"] = *symlink_target;
  if (!metadata.empty()) j["metadata"] = MetadataToJson(metadata);
  return j;
}

Result<FsEntry> FsEntry::FromJson(const json& j) {
  return Answer("fs entry", [&] { return EntryFields(j); });
}

// ------------------------------------------------------------ fs.ls / fs.stat

json FsLsRequest::ToJson() const { return json{{"op", kOp}, {"path", path}}; }
Result<FsLsRequest> FsLsRequest::FromJson(const json& j) { return PathOnly<FsLsRequest>(j); }

json FsLsResult::ToJson() const {
  json arr = json::array();
  for (const auto& e : entries) arr.push_back(e.ToJson());
  return json{{"entries", std::move(arr)}};
}

Result<FsLsResult> FsLsResult::FromJson(const json& j) {
  return Answer("fs.ls RESULT", [&]() -> Result<FsLsResult> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "RESULT"));
    FsLsResult r;
    SKIFF_ASSIGN_OR_RETURN(r.entries, Each<FsEntry>(j, "entries", EntryFields));
    return r;
  });
}

json FsStatRequest::ToJson() const { return json{{"op", kOp}, {"path", path}}; }
Result<FsStatRequest> FsStatRequest::FromJson(const json& j) { return PathOnly<FsStatRequest>(j); }

// ------------------------------------------------------------ fs.mkdir

json FsMkdirRequest::ToJson() const {
  return json{{"op", kOp}, {"path", path}, {"mode", mode}, {"parents", parents}};
}

Result<FsMkdirRequest> FsMkdirRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  FsMkdirRequest r;
  SKIFF_ASSIGN_OR_RETURN(r.path, field::Path(j, "path"));
  SKIFF_ASSIGN_OR_RETURN(r.mode, field::Mode(j, "mode", 0755));
  SKIFF_ASSIGN_OR_RETURN(r.parents, field::Bool(j, "parents", false));
  return r;
}

json FsMkdirResult::ToJson() const { return json{{"created", created}}; }

Result<FsMkdirResult> FsMkdirResult::FromJson(const json& j) {
  return Answer("fs.mkdir RESULT", [&]() -> Result<FsMkdirResult> {
    SKIFF_ASSIGN_OR_RETURN(bool created, OneBool(j, "created"));
    return FsMkdirResult{created};
  });
}

// ------------------------------------------------------------ fs.write

json FsWriteRequest::ToJson() const {
  json j{{"op", kOp}, {"path", path}, {"mode", mode}, {"parents", parents}};
  if (!metadata.empty()) j["metadata"] = MetadataToJson(metadata);
  return j;
}

Result<FsWriteRequest> FsWriteRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  FsWriteRequest r;
  SKIFF_ASSIGN_OR_RETURN(r.path, field::Path(j, "path"));
  SKIFF_ASSIGN_OR_RETURN(r.mode, field::Mode(j, "mode", 0644));
  SKIFF_ASSIGN_OR_RETURN(r.parents, field::Bool(j, "parents", false));
  SKIFF_ASSIGN_OR_RETURN(r.metadata, MetadataFromJson(j, "metadata"));
  return r;
}

json FsWriteResult::ToJson() const {
  json j{{"bytes_written", bytes_written}};
  if (metadata_set) j["metadata_set"] = true;
  return j;
}

Result<FsWriteResult> FsWriteResult::FromJson(const json& j) {
  return Answer("fs.write RESULT", [&]() -> Result<FsWriteResult> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "RESULT"));
    SKIFF_ASSIGN_OR_RETURN(int64_t n, field::IntIn(j, "bytes_written", 0, INT64_MAX));
    SKIFF_ASSIGN_OR_RETURN(bool set, field::Bool(j, "metadata_set", false));
    return FsWriteResult{n, set};
  });
}

// ------------------------------------------------------------ fs.read

json FsReadRequest::ToJson() const { return json{{"op", kOp}, {"path", path}}; }
Result<FsReadRequest> FsReadRequest::FromJson(const json& j) { return PathOnly<FsReadRequest>(j); }

json FsReadMeta::ToJson() const { return json{{"size", size}, {"mode", mode}, {"mtime", mtime}}; }

Result<FsReadMeta> FsReadMeta::FromJson(const json& j) {
  return Answer("fs.read META", [&]() -> Result<FsReadMeta> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "META"));
    FsReadMeta m;
    SKIFF_ASSIGN_OR_RETURN(m.size, field::IntIn(j, "size", 0, INT64_MAX));
    SKIFF_ASSIGN_OR_RETURN(m.mode, field::ModeText(j, "mode"));
    SKIFF_ASSIGN_OR_RETURN(m.mtime, field::IntIn(j, "mtime", INT64_MIN, INT64_MAX));
    return m;
  });
}

// ------------------------------------------------------------ fs.rm / fs.mv

json FsRmRequest::ToJson() const { return json{{"op", kOp}, {"path", path}, {"recursive", recursive}}; }

Result<FsRmRequest> FsRmRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  FsRmRequest r;
  SKIFF_ASSIGN_OR_RETURN(r.path, field::Path(j, "path"));
  SKIFF_ASSIGN_OR_RETURN(r.recursive, field::Bool(j, "recursive", false));
  return r;
}

json FsRmResult::ToJson() const { return json{{"removed", removed}}; }

Result<FsRmResult> FsRmResult::FromJson(const json& j) {
  return Answer("fs.rm RESULT", [&]() -> Result<FsRmResult> {
    SKIFF_ASSIGN_OR_RETURN(bool removed, OneBool(j, "removed"));
    return FsRmResult{removed};
  });
}

json FsMvRequest::ToJson() const {
  return json{{"op", kOp}, {"src", src}, {"dst", dst}, {"overwrite", overwrite}};
}

Result<FsMvRequest> FsMvRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  FsMvRequest r;
  SKIFF_ASSIGN_OR_RETURN(r.src, field::Path(j, "src"));
  SKIFF_ASSIGN_OR_RETURN(r.dst, field::Path(j, "dst"));
  SKIFF_ASSIGN_OR_RETURN(r.overwrite, field::Bool(j, "overwrite", false));
  return r;
}

json FsMvResult::ToJson() const { return json{{"moved", moved}}; }

Result<FsMvResult> FsMvResult::FromJson(const json& j) {
  return Answer("fs.mv RESULT", [&]() -> Result<FsMvResult> {
    SKIFF_ASSIGN_OR_RETURN(bool moved, OneBool(j, "moved"));
    return FsMvResult{moved};
  });
}

// ------------------------------------------------------------ fs.chmod

json FsChmodRequest::ToJson() const {
  json j{{"op", kOp}, {"path", path}, {"mode", mode}, {"recursive", recursive}};
  if (uid) j["uid"] = *uid;
  if (gid) j["gid"] = *gid;
  return j;
}

Result<FsChmodRequest> FsChmodRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  FsChmodRequest r;
  SKIFF_ASSIGN_OR_RETURN(r.path, field::Path(j, "path"));
  SKIFF_ASSIGN_OR_RETURN(r.mode, field::Mode(j, "mode", std::nullopt));
  SKIFF_ASSIGN_OR_RETURN(std::optional<int64_t> uid, field::OptInt(j, "uid"));
  SKIFF_ASSIGN_OR_RETURN(std::optional<int64_t> gid, field::OptInt(j, "gid"));
  SKIFF_ASSIGN_OR_RETURN(r.recursive, field::Bool(j, "recursive", false));
  // -1 would mean "unchanged" to chown: ids stop below it.
  constexpr int64_t kMaxId = 0xFFFFFFFE;
  if (uid && (*uid < 0 || *uid > kMaxId)) return InvalidRequest("uid: expected an integer >= 0");
  if (gid && (*gid < 0 || *gid > kMaxId)) return InvalidRequest("gid: expected an integer >= 0");
  if (uid) r.uid = static_cast<uint32_t>(*uid);
  if (gid) r.gid = static_cast<uint32_t>(*gid);
  return r;
}

json FsChmodResult::ToJson() const { return json{{"updated", updated}}; }

Result<FsChmodResult> FsChmodResult::FromJson(const json& j) {
  return Answer("fs.chmod RESULT", [&]() -> Result<FsChmodResult> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "RESULT"));
    SKIFF_ASSIGN_OR_RETURN(int64_t n, field::IntIn(j, "updated", 0, INT64_MAX));
    return FsChmodResult{n};
  });
}

// ------------------------------------------------------------ fs.grep

json FsGrepRequest::ToJson() const {
  return json{{"op", kOp},
              {"path", path},
              {"pattern", pattern},
              {"recursive", recursive},
              {"ignore_case", ignore_case},
              {"include_glob", include_glob},
              {"exclude_glob", exclude_glob},
              {"max_matches", max_matches},
              {"max_line_bytes", max_line_bytes}};
}

Result<FsGrepRequest> FsGrepRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  FsGrepRequest r;
  SKIFF_ASSIGN_OR_RETURN(r.path, field::Path(j, "path"));
  SKIFF_ASSIGN_OR_RETURN(r.pattern, field::String(j, "pattern"));
  SKIFF_ASSIGN_OR_RETURN(r.recursive, field::Bool(j, "recursive", true));
  SKIFF_ASSIGN_OR_RETURN(r.ignore_case, field::Bool(j, "ignore_case", false));
  SKIFF_ASSIGN_OR_RETURN(r.include_glob, field::Strings(j, "include_glob"));
  SKIFF_ASSIGN_OR_RETURN(r.exclude_glob, field::Strings(j, "exclude_glob"));
  SKIFF_ASSIGN_OR_RETURN(r.max_matches, field::Int(j, "max_matches", r.max_matches));
  SKIFF_ASSIGN_OR_RETURN(r.max_line_bytes, field::Int(j, "max_line_bytes", r.max_line_bytes));
  if (r.max_matches < 0) return InvalidRequest("max_matches: expected an integer >= 0");
  if (r.max_line_bytes < 0) return InvalidRequest("max_line_bytes: expected an integer >= 0");
  return r;
}

json FsGrepMatch::ToJson() const {
  return json{{"path", path}, {"line", line}, {"content", content}, {"byte_offset", byte_offset}};
}

Result<FsGrepMatch> FsGrepMatch::FromJson(const json& j) {
  return Answer("fs.grep match", [&] { return MatchFields(j); });
}

json FsGrepResult::ToJson() const {
  json arr = json::array();
  for (const auto& m : matches) arr.push_back(m.ToJson());
  return json{{"matches", std::move(arr)}, {"truncated", truncated}};
}

Result<FsGrepResult> FsGrepResult::FromJson(const json& j) {
  return Answer("fs.grep RESULT", [&]() -> Result<FsGrepResult> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "RESULT"));
    FsGrepResult r;
    SKIFF_ASSIGN_OR_RETURN(r.matches, Each<FsGrepMatch>(j, "matches", MatchFields));
    SKIFF_ASSIGN_OR_RETURN(r.truncated, field::RequiredBool(j, "truncated"));
    return r;
  });
}

// ------------------------------------------------------------ fs.sed

json FsSedRequest::ToJson() const {
  json j{{"op", kOp},      {"pattern", pattern},       {"replacement", replacement},
         {"regex", regex}, {"first_only", first_only}, {"ignore_case", ignore_case}};
  if (path) {
    j["path"] = *path;
    j["recursive"] = recursive;
    j["include_glob"] = include_glob;
    j["exclude_glob"] = exclude_glob;
  } else {
    j["files"] = files;
  }
  return j;
}

Result<FsSedRequest> FsSedRequest::FromJson(const json& j) {
  SKIFF_RETURN_IF_ERROR(field::RequireOp(j, kOp));
  FsSedRequest r;
  SKIFF_ASSIGN_OR_RETURN(r.files, field::Strings(j, "files"));
  bool has_path = !field::Missing(j, "path");
  if (!r.files.empty() && has_path) return Error(Code::kS210, "sed: give files or path, not both");
  if (r.files.empty() && !has_path) return Error(Code::kS210, "sed: one of files or path is required");
  SKIFF_ASSIGN_OR_RETURN(r.pattern, field::String(j, "pattern"));
  SKIFF_ASSIGN_OR_RETURN(r.replacement, field::String(j, "replacement"));
  if (r.pattern.empty()) return Error(Code::kS210, "sed: pattern must not be empty");
  SKIFF_ASSIGN_OR_RETURN(r.regex, field::Bool(j, "regex", true));
  SKIFF_ASSIGN_OR_RETURN(r.first_only, field::Bool(j, "first_only", false));
  SKIFF_ASSIGN_OR_RETURN(r.ignore_case, field::Bool(j, "ignore_case", false));
  SKIFF_ASSIGN_OR_RETURN(r.recursive, field::Bool(j, "recursive", true));
  SKIFF_ASSIGN_OR_RETURN(r.include_glob, field::Strings(j, "include_glob"));
  SKIFF_ASSIGN_OR_RETURN(r.exclude_glob, field::Strings(j, "exclude_glob"));
  if (has_path) {
    SKIFF_ASSIGN_OR_RETURN(std::string path, field::Path(j, "path"));
    r.path = std::move(path);
  }
  return r;
}

json FsSedFileResult::ToJson() const {
  json j{{"path", path}, {"replacements", replacements}, {"success", success}};
  if (error) j["error"] = *error;
  return j;
}

Result<FsSedFileResult> FsSedFileResult::FromJson(const json& j) {
  return Answer("fs.sed file result", [&] { return SedFileFields(j); });
}

json FsSedResult::ToJson() const {
  json arr = json::array();
  for (const auto& f : results) arr.push_back(f.ToJson());
  return json{{"results", std::move(arr)}, {"total_replacements", total_replacements}};
}

Result<FsSedResult> FsSedResult::FromJson(const json& j) {
  return Answer("fs.sed RESULT", [&]() -> Result<FsSedResult> {
    SKIFF_RETURN_IF_ERROR(field::RequireObject(j, "RESULT"));
    FsSedResult r;
    SKIFF_ASSIGN_OR_RETURN(r.results, Each<FsSedFileResult>(j, "results", SedFileFields));
    SKIFF_ASSIGN_OR_RETURN(r.total_replacements, field::IntIn(j, "total_replacements", 0, INT64_MAX));
    return r;
  });
}

}  // namespace skiff::proto
