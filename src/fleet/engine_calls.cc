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
    size_t left = 0;
  };
  auto g = std::make_shared<Gather>();
  g->out.resize(namespaces.size());
  g->left = namespaces.size();
  for (size_t i = 0; i < namespaces.size(); ++i) {
    calls.Call(function_id, namespaces[i], data, deadline, [g, i](CallOutcome o) {
      std::lock_guard<std::mutex> l(g->mu);
      g->out[i] = std::move(o);
      if (--g->left == 0) g->cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> l(g->mu);
  g->cv.wait(l, [&] { return g->left == 0; });
  return std::move(g->out);
}

CallOutcome CallAndWait(EngineCalls& calls, const std::string& function_id, const std::string& ns,
                        nlohmann::json data, std::chrono::milliseconds deadline) {
  return std::move(CallEach(calls, function_id, {ns}, data, deadline).front());
}

}  // namespace skiff::fleet
