#include "cli/file_transfer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "api/http_util.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/daemon_discovery.h"
#include "cli/report.h"

namespace skiff::cli {
namespace {

using json = nlohmann::json;

std::string FilesPath(const std::string& id, const std::string& path, const std::string& extra = "") {
  return "/v1/sandboxes/" + PercentEncode(id) + "/files?path=" + PercentEncode(path) + extra;
}

int ReportHttpBody(const ClientFlags& flags, const HttpResponse& r) {
  json body = json::parse(r.body, nullptr, false);
  if (flags.json_out) std::printf("%s\n", r.body.c_str());
  if (body.is_object()) return flags.json_out ? kExitSkiffError : ReportErrorObject(body);
  std::fprintf(stderr, "skiff: HTTP %ld\n", r.status);
  return kExitSkiffError;
}

}  // namespace

int Download(const ClientFlags& flags, const std::string& id, const std::string& path,
             const std::string& local) {
  auto ep = FindDaemon(flags.url, true);
  if (!ep.ok()) return ReportError(ep.error());
  std::FILE* out = local == "-" ? stdout : std::fopen((local + ".skiff-part").c_str(), "wb");
  if (!out) {
    std::fprintf(stderr, "skiff: cannot write %s: %s\n", local.c_str(), std::strerror(errno));
    return kExitSkiffError;
  }
  Client c(*ep);
  auto r = c.Download(FilesPath(id, path), out);
  if (out != stdout) std::fclose(out);
  bool ok = r.ok() && r->status == 200;
  if (local != "-") {
    std::string part = local + ".skiff-part";
    if (ok) {
      if (std::rename(part.c_str(), local.c_str()) != 0) {
        std::fprintf(stderr, "skiff: rename to %s: %s\n", local.c_str(), std::strerror(errno));
        return kExitSkiffError;
      }
    } else {
      std::remove(part.c_str());
    }
  }
  if (!r.ok()) return ReportError(r.error());
  if (r->status != 200) return ReportHttpBody(flags, *r);
  return 0;
}

int Upload(const ClientFlags& flags, const std::string& local, const std::string& id, const std::string& path,
           bool parents, const std::string& mode) {
  auto ep = FindDaemon(flags.url, true);
  if (!ep.ok()) return ReportError(ep.error());
  std::FILE* in = local == "-" ? stdin : std::fopen(local.c_str(), "rb");
  if (!in) {
    std::fprintf(stderr, "skiff: cannot read %s: %s\n", local.c_str(), std::strerror(errno));
    return kExitSkiffError;
  }
  std::string extra = parents ? "&parents=true" : "";
  if (!mode.empty()) extra += "&mode=" + PercentEncode(mode);
  Client c(*ep);
  auto r = c.Upload(FilesPath(id, path, extra), in);
  if (in != stdin) std::fclose(in);
  if (!r.ok()) return ReportError(r.error());
  if (r->status != 200) return ReportHttpBody(flags, *r);
  if (flags.json_out) std::printf("%s\n", r->body.c_str());
  return 0;
}

}  // namespace skiff::cli
