#include "fleet/engine_calls.h"

#include <condition_variable>
#include <memory>
#include <mutex>

namespace skiff::fleet {

std::vector<CallOutcome> CallEach(EngineCalls& calls, const std::string& function_id,
                                  const std::vector<std::string>& namespaces, const nlohmann::json& data,
                                  std::chrono::milliseconds deadline) {
  struct Gather {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<CallOutcome> out;
    std::vector<bool> answered;
    size_t left = 0;
  };
  auto g = std::make_shared<Gather>();
  g->out.resize(namespaces.size());
  g->answered.assign(namespaces.size(), false);
  g->left = namespaces.size();
  for (size_t i = 0; i < namespaces.size(); ++i) {
    calls.Call(function_id, namespaces[i], data, deadline, [g, i](CallOutcome o) {
      std::lock_guard<std::mutex> l(g->mu);
      if (g->answered[i]) return;
      g->out[i] = std::move(o);
      g->answered[i] = true;
      if (--g->left == 0) g->cv.notify_all();
    });
  }
  // The link answers every call by its deadline; a link that has stopped
  // running its event loop (a router shutting down) never does, so the
  // wait has its own bound, and a call still unanswered then timed out.
  std::unique_lock<std::mutex> l(g->mu);
  g->cv.wait_for(l, deadline + std::chrono::seconds(1), [&] { return g->left == 0; });
  std::vector<CallOutcome> out = g->out;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!g->answered[i]) out[i] = CallOutcome{CallOutcome::Kind::kTimeout, nlohmann::json()};
  }
  return out;
}

CallOutcome CallAndWait(EngineCalls& calls, const std::string& function_id, const std::string& ns,
                        const nlohmann::json& data, std::chrono::milliseconds deadline) {
  return std::move(CallEach(calls, function_id, {ns}, data, deadline).front());
}

}  // namespace skiff::fleet
