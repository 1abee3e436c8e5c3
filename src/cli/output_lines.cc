#include "cli/output_lines.h"

#include "base/text.h"

namespace skiff::cli {

using json = nlohmann::json;

bool OutputLines::Feed(std::string_view bytes) {
  partial_.append(bytes);
  size_t start = 0, nl;
  bool ok = true;
  while (ok && (nl = partial_.find('\n', start)) != std::string::npos) {
    ok = Line(std::string_view(partial_).substr(start, nl - start));
    start = nl + 1;
  }
  partial_.erase(0, start);
  return ok;
}

bool OutputLines::Line(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return false;
  std::string type = j.value("type", "");
  uint8_t ch = j.value("channel", "") == "stderr" ? 2 : 1;
  if (type == "start") {
    next_[1] = j.value("stdout_from", int64_t{0});
    next_[2] = j.value("stderr_from", int64_t{0});
    return sink_.OnStart(next_[1], next_[2]);
  }
  if (type == "data") {
    auto bytes = Base64Decode(j.value("data", ""));
    if (!bytes) return false;
    int64_t off = j.value("offset", int64_t{0});
    next_[ch] = off + static_cast<int64_t>(bytes->size());
    return sink_.OnData(ch, off, *bytes);
  }
  if (type == "gap") {
    int64_t from = j.value("from", int64_t{0}), to = j.value("to", int64_t{0});
    next_[ch] = to;
    return sink_.OnGap(ch, from, to);
  }
  if (type == "end") {
    end_ = j.contains("result") ? j["result"] : j.value("process", json::object());
  } else if (type == "error") {
    error_ = std::move(j);
  }
  return true;
}

}  // namespace skiff::cli
