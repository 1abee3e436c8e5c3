#include "api/call_lane.h"

namespace skiff::api {

std::string CallTarget::LaneKey() const {
  return (stop ? "stop:" : stream ? "stream:" : "sandbox:") + sandbox_id;
}

std::optional<CallTarget> CallTargetOf(std::string_view function_id, const nlohmann::json& payload) {
  constexpr size_t kMaxId = 64;
  if (function_id.rfind("sandbox::", 0) != 0) return std::nullopt;
  if (function_id == "sandbox::create" || function_id == "sandbox::run" || function_id == "sandbox::list" ||
      function_id.rfind("sandbox::catalog::", 0) == 0)
    return std::nullopt;
  if (!payload.is_object()) return std::nullopt;
  auto it = payload.find("sandbox_id");
  if (it == payload.end() || !it->is_string()) return std::nullopt;
  const auto& id = it->get_ref<const std::string&>();
  if (id.empty() || id.size() > kMaxId) return std::nullopt;
  return CallTarget{id, function_id == "sandbox::stop", false};
}

}  // namespace skiff::api
