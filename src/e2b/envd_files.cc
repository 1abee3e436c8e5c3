// envd's plain HTTP file endpoints (docs/e2b.md#files): GET /files streams a
// file's bytes; POST /files writes the body (raw, or each part of a
// multipart form in order) and answers the written files. Paths resolve
// against the user's home; parents are created.
#include "base/text.h"
#include "e2b/api.h"
#include "e2b/multipart_reader.h"

namespace skiff::e2b {

namespace {

using nlohmann::json;

Reply FileError(const Error& e) {
  switch (e.code()) {
    case Code::kS211:
    case Code::kS220:
      return Reply::Error(404, e.message());
    case Code::kS002:
    case Code::kS004:
      return Reply::Error(502, e.message());
    case Code::kS001:
    case Code::kS210:
    case Code::kS212:
    case Code::kS215:
      return Reply::Error(400, e.message());
    default:
      return Reply::Error(500, e.message());
  }
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Each "file" part of the form written in order, to its filename (a path,
// as given) or, for a part without one, to ?path=.
Reply MultipartUpload(SandboxService& svc, const Api::Envd& e, const Request& req, const ByteSource& body) {
  auto boundary = MultipartBoundary(req.Header("content-type"));
  if (!boundary.ok()) return Reply::Error(400, boundary.error().message());
  MultipartReader form(*boundary, body);
  json out = json::array();
  while (true) {
    auto part = form.NextPart();
    if (!part.ok()) return FileError(part.error());
    if (!*part) break;
    if ((*part)->name != "file") continue;  // other fields: skipped
    std::string raw =
        (*part)->filename && !(*part)->filename->empty() ? *(*part)->filename : req.Query("path");
    if (raw.empty()) return Reply::Error(400, "a part has no filename and the request no ?path=");
    if (raw.find('\0') != std::string::npos) return Reply::Error(400, "a part's filename holds a NUL byte");
    std::string path = e.Resolve(raw);
    auto written = svc.FsWrite(e.record.sandbox_id, path, 0644, true, [&form]() { return form.Read(); });
    if (!written.ok()) return FileError(written.error());
    out.push_back({{"name", BaseName(path)}, {"type", "file"}, {"path", path}});
  }
  return Reply::Json(200, out);
}

}  // namespace

void Api::FilesGet(const Envd& e, const Request& req, ResponseWriter& out) {
  std::string raw = req.Query("path");
  if (raw.empty()) return out.Send(Reply::Error(400, "path: required"));
  std::string path = e.Resolve(raw);
  bool started = false;
  Status st = all_.FsRead(
      e.record.sandbox_id, path,
      [&](const FsReadMeta& meta) {
        Headers h;
        // An empty file is told by its length (the SDK reads it so).
        if (meta.size == 0) h.emplace_back("content-length", "0");
        started = out.Start(200, "application/octet-stream", h);
      },
      [&](std::string_view bytes) { return started && out.Write(bytes); });
  if (!st.ok() && !started) return out.Send(FileError(st.error()));
  if (!st.ok()) out.Drop();  // mid-file: the transfer is cut, never passed off as whole
}

Reply Api::Upload(const Request& req, const ByteSource& body) {
  Access files = FilesAccess(req);
  if (!files.envd) return files.refusal;
  auto e = &*files.envd;
  std::string type = req.Header("content-type");
  if (!req.Header("content-encoding").empty() && req.Header("content-encoding") != "identity")
    return Reply::Error(400,
                        "Content-Encoding " + req.Header("content-encoding") +
                            ": compressed uploads are not supported by skiff yet (docs/e2b.md#differences)");
  if (type.rfind("multipart/form-data", 0) == 0) return MultipartUpload(all_, *e, req, body);
  std::string raw = req.Query("path");
  if (raw.empty()) return Reply::Error(400, "path: required");
  std::string path = e->Resolve(raw);
  auto written = all_.FsWrite(e->record.sandbox_id, path, 0644, true, body);
  if (!written.ok()) return FileError(written.error());
  return Reply::Json(200, json::array({{{"name", BaseName(path)}, {"type", "file"}, {"path", path}}}));
}

}  // namespace skiff::e2b
