#include "functions/process_output_lines.h"

#include <algorithm>

#include "base/text.h"

namespace skiff::fn {

using nlohmann::json;

std::string_view ChannelName(uint8_t channel) { return channel == 2 ? "stderr" : "stdout"; }

bool ProcessOutputLines::Line(const json& j) {
  std::string line = j.dump();
  line += '\n';
  return write_(line);
}

bool ProcessOutputLines::OnStart(int64_t stdout_from, int64_t stderr_from) {
  return Line({{"type", "start"}, {"stdout_from", stdout_from}, {"stderr_from", stderr_from}});
}

bool ProcessOutputLines::OnData(uint8_t channel, int64_t offset, std::string_view bytes) {
  while (!bytes.empty()) {
    size_t n = std::min(bytes.size(), kOutputLineBytes);
    if (!Line({{"type", "data"},
               {"channel", ChannelName(channel)},
               {"offset", offset},
               {"data", Base64Encode(bytes.substr(0, n))}}))
      return false;
    offset += static_cast<int64_t>(n);
    bytes.remove_prefix(n);
  }
  return true;
}

bool ProcessOutputLines::OnGap(uint8_t channel, int64_t from, int64_t to) {
  return Line({{"type", "gap"}, {"channel", ChannelName(channel)}, {"from", from}, {"to", to}});
}

bool ProcessOutputLines::End(const proto::ProcInfo& info) {
  return Line({{"type", "end"}, {"process", info.ToJson()}});
}

bool ProcessOutputLines::Fail(const json& wire_error) {
  json j = wire_error;
  j["type"] = "error";
  return Line(j);
}

}  // namespace skiff::fn
