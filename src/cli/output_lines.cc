#include "cli/output_lines.h"

#include <cstdio>

#include "base/text.h"
#include "cli/report.h"

namespace skiff::cli {

using json = nlohmann::json;

bool OutputLines::Feed(std::string_view bytes) {
  partial_.append(bytes);
  size_t start = 0, nl;
  bool ok = true;
  while ((nl = partial_.find('\n', start)) != std::string::npos) {
    ok = Line(std::string_view(partial_).substr(start, nl - start)) && ok;
    start = nl + 1;
  }
  partial_.erase(0, start);
  return ok;
}

bool OutputLines::Line(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return false;
  std::string type = j.value("type", "");
  int ch = j.value("channel", "") == "stderr" ? 2 : 1;
  if (type == "start") {
    next_[1] = j.value("stdout_from", int64_t{0});
    next_[2] = j.value("stderr_from", int64_t{0});
  } else if (type == "data") {
    auto bytes = Base64Decode(j.value("data", ""));
    if (!bytes) return false;
    WriteAll(ch, *bytes);
    next_[ch] = j.value("offset", int64_t{0}) + static_cast<int64_t>(bytes->size());
  } else if (type == "gap") {
    int64_t from = j.value("from", int64_t{0}), to = j.value("to", int64_t{0});
    std::fprintf(stderr, "skiff: %lld bytes of %s were lost (the process's output buffer wrapped)\n",
                 static_cast<long long>(to - from), ch == 2 ? "stderr" : "stdout");
    next_[ch] = to;
  } else if (type == "end") {
    end_ = j.value("process", json::object());
  } else if (type == "error") {
    error_ = std::move(j);
  }
  return true;
}

}  // namespace skiff::cli
