#include "functions/run_output_lines.h"

namespace skiff::fn {

using nlohmann::json;

namespace {

std::string Line(const json& j) {
  std::string line = j.dump();
  line += '\n';
  return line;
}

}  // namespace

bool RunOutputLines::OnSandbox(const std::string& sandbox_id) {
  started_ =
      write_(Line({{"type", "start"}, {"sandbox_id", sandbox_id}, {"stdout_from", 0}, {"stderr_from", 0}}));
  return started_;
}

bool RunOutputLines::Data(uint8_t channel, std::string_view bytes) {
  int64_t at = next_[channel];
  next_[channel] += static_cast<int64_t>(bytes.size());
  return data_.OnData(channel, at, bytes);
}

bool RunOutputLines::End(const ExecResult& result) {
  json r = {{"exit_code", result.exit_code},
            {"success", result.exit_code == 0},
            {"duration_ms", result.duration_ms}};
  if (result.sandbox_id) r["sandbox_id"] = *result.sandbox_id;
  return write_(Line({{"type", "end"}, {"result", std::move(r)}}));
}

bool RunOutputLines::Fail(json wire_error) {
  if (auto d = wire_error.find("details"); d != wire_error.end() && d->is_object()) {
    d->erase("stdout");
    d->erase("stderr");
  }
  wire_error["type"] = "error";
  return write_(Line(wire_error));
}

}  // namespace skiff::fn
