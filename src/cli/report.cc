#include "cli/report.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "api/http_util.h"
#include "cli/cli.h"
#include "functions/errors.h"

namespace skiff::cli {

using json = nlohmann::json;

void WriteAll(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    s.remove_prefix(static_cast<size_t>(n));
  }
}

int ReportErrorObject(const json& err) {
  std::string code = err.value("code", std::string("error"));
  std::string msg = err.value("message", std::string());
  std::fprintf(stderr, "skiff: %s: %s\n", code.c_str(), msg.c_str());
  if (err.contains("fix_note") && err["fix_note"].is_string()) {
    std::fprintf(stderr, "  hint: %s\n", err["fix_note"].get<std::string>().c_str());
  }
  if (err.contains("fix") && err["fix"].is_object() && !err["fix"].contains("context")) {
    std::fprintf(stderr, "  fix: %s\n", api::Dump(err["fix"]).c_str());
  }
  if (err.contains("details") && err["details"].is_object()) {
    const json& d = err["details"];
    if (d.contains("stdout") && d["stdout"].is_string()) WriteAll(1, d["stdout"].get<std::string>());
    if (d.contains("stderr") && d["stderr"].is_string()) WriteAll(2, d["stderr"].get<std::string>());
  }
  return code == "S200" ? kExitTimeout : kExitSkiffError;
}

int ReportError(const Error& e) { return ReportErrorObject(ErrorToWire(e, "docs/errors.md")); }

}  // namespace skiff::cli
