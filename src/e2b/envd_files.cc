// envd's plain HTTP file endpoints (docs/e2b.md#files): GET /files streams a
// file's bytes; POST /files writes the body (raw, or each part of a
// multipart form in order) and answers the written files. Paths resolve
// against the user's home; parents are created.
#include <memory>

#include "base/text.h"
#include "e2b/api.h"
#include "e2b/gzip_stream.h"
#include "e2b/metadata_headers.h"
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
    case Code::kS005:
      return Reply::Error(502, e.message());
    case Code::kS001:
    case Code::kS210:
    case Code::kS212:
    case Code::kS215:
      return Reply::Error(400, e.message());
    case Code::kS216:
      // The agent names the errno in the message; a full disk is E2B's 507
      // (the SDK's NotEnoughSpaceError).
      if (e.message().find("ENOSPC") != std::string::npos || e.message().find("EDQUOT") != std::string::npos)
        return Reply::Error(507, e.message());
      return Reply::Error(500, e.message());
    default:
      return Reply::Error(500, e.message());
  }
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// One element of the upload's answer; `metadata` only when there is some.
json Written(const std::string& path, const proto::FileMetadata& metadata) {
  json w = {{"name", BaseName(path)}, {"type", "file"}, {"path", path}};
  if (!metadata.empty()) w["metadata"] = proto::MetadataToJson(metadata);
  return w;
}

// Each "file" part of the form written in order, to its filename (a path,
// as given) or, for a part without one, to ?path=.
Reply MultipartUpload(SandboxService& svc, const Api::Envd& e, const Request& req, const ByteSource& body,
                      const proto::FileMetadata& metadata) {
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
    auto written = svc.FsWrite(
        e.record.sandbox_id, path, 0644, true, [&form]() { return form.Read(); }, metadata);
    if (!written.ok()) return FileError(written.error());
    out.push_back(Written(path, metadata));
  }
  return Reply::Json(200, out);
}

}  // namespace

void Api::FilesGet(const Envd& e, const Request& req, ResponseWriter& out) {
  std::string raw = req.Query("path");
  if (raw.empty()) return out.Send(Reply::Error(400, "path: required"));
  std::string path = e.Resolve(raw);
  // Compressed when the client asks for gzip alone (the SDK's `gzip: true`);
  // a generic "gzip, deflate" gets the bytes as they are, which is as valid
  // and much cheaper for large files.
  std::unique_ptr<GzipWriter> gzip;
  if (req.Header("accept-encoding") == "gzip") gzip = std::make_unique<GzipWriter>();
  bool started = false, failed = false;
  Status st = all_.FsRead(
      e.record.sandbox_id, path,
      [&](const FsReadMeta& meta) {
        Headers h;
        if (gzip) {
          h.emplace_back("content-encoding", "gzip");
        } else if (meta.size == 0) {
          h.emplace_back("content-length", "0");  // an empty file is told by its length
        }
        started = out.Start(200, "application/octet-stream", h);
      },
      [&](std::string_view bytes) {
        if (!started) return false;
        if (!gzip) return out.Write(bytes);
        auto z = gzip->Write(bytes);
        if (!z.ok()) {
          failed = true;
          return false;
        }
        return z->empty() || out.Write(*z);
      });
  if (!st.ok() && !started) return out.Send(FileError(st.error()));
  if (!st.ok() || failed) return out.Drop();  // mid-file: cut, never passed off as whole
  if (gzip) {
    auto tail = gzip->Finish();
    if (!tail.ok()) return out.Drop();
    out.Write(*tail);
  }
}

Reply Api::Upload(const Request& req, const ByteSource& body) {
  Access files = FilesAccess(req);
  if (!files.envd) return files.refusal;
  auto e = &*files.envd;
  // Every file of the request gets these (none: each file's old ones are gone).
  auto metadata = MetadataHeaders(req.raw_headers);
  if (!metadata.ok()) return Reply::Error(400, metadata.error().message());
  std::string type = req.Header("content-type");
  std::string encoding = req.Header("content-encoding");
  ByteSource source = body;
  if (encoding == "gzip") {
    source = Gunzip(body);
  } else if (!encoding.empty() && encoding != "identity") {
    return Reply::Error(400, "Content-Encoding " + encoding + ": only gzip is understood");
  }
  if (type.rfind("multipart/form-data", 0) == 0) return MultipartUpload(all_, *e, req, source, *metadata);
  std::string raw = req.Query("path");
  if (raw.empty()) return Reply::Error(400, "path: required");
  std::string path = e->Resolve(raw);
  auto written = all_.FsWrite(e->record.sandbox_id, path, 0644, true, source, *metadata);
  if (!written.ok()) return FileError(written.error());
  return Reply::Json(200, json::array({Written(path, *metadata)}));
}

}  // namespace skiff::e2b
