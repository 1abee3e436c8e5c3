#include "sandbox/types.h"

namespace skiff {

nlohmann::json ExecResult::ToJson() const {
  nlohmann::json j = {
      {"stdout", stdout_text},
      {"stderr", stderr_text},
      {"exit_code", exit_code},
      {"timed_out", false},
      {"duration_ms", duration_ms},
      {"success", exit_code == 0},
      {"stdout_truncated", stdout_truncated},
      {"stderr_truncated", stderr_truncated},
  };
  if (sandbox_id) j["sandbox_id"] = *sandbox_id;
  return j;
}

Error SandboxNotFound(const std::string& sandbox_id) {
  return Error(Code::kS002, "sandbox not found: " + sandbox_id);
}

Error SandboxPaused(const std::string& sandbox_id) {
  return Error(Code::kS005, "sandbox " + sandbox_id + " is paused");
}

}  // namespace skiff
