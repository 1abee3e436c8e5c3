// Worker mode (docs/architecture.md#transports-and-their-limits): skiffd connects out to an iii engine as the
// worker `iii-sandbox`, registers the 16 sandbox functions with their
// schemas and serves the engine's invocations. Reconnects every 2 s after a
// loss, and after 60 s of silence; pings every 20 s.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "api/engine_link_options.h"
#include "api/iii_codec.h"
#include "base/error.h"
#include "functions/registry.h"

namespace skiff::api {

struct WorkerHooks {
  // The engine namespace to register in (docs/multihost.md); "" = default.
  std::string iii_namespace;
  // Runs a function (called on a pool thread).
  std::function<Invocation(const std::string& id, const nlohmann::json& payload)> call;
  std::function<nlohmann::json(const Error&)> error_body;
  // Runs the blocking work of a call to `id` off the event loop (on the
  // lane of the sandbox it names); an error when it cannot be run (S003:
  // that sandbox's lane is full). The second function sends the answer the
  // first made, once the call's lane slot is free again.
  std::function<Status(const std::string& id, const nlohmann::json& payload, std::function<void()> work,
                       std::function<void()> answer)>
      dispatch;
  // Called on registrationrejected: the daemon exits with status 3.
  std::function<void()> rejected;
  // A fleet router's standby (docs/multihost.md#standby): a worker-name
  // conflict means another router is active; wait and register again every
  // 2 s instead of calling `rejected`.
  bool standby_on_conflict = false;
  // Which functions of the table to register; null = every public one.
  std::function<bool(const FunctionDef&)> exports;
};

using iii::CallOutcome;

class WorkerLink {
 public:
  WorkerLink(boost::asio::io_context& ioc, EngineLinkOptions options, WorkerHooks hooks);
  ~WorkerLink();
  // Starts connecting (on the event loop).
  void Start();
  void Stop();
  bool connected() const;

  // Calls `function_id` in engine namespace `ns` ("" = default) with `data`
  // through the engine. `done` runs once, on the event loop, with the
  // answer, or kLinkLost / kTimeout. Thread-safe.
  void Call(std::string function_id, std::string ns, nlohmann::json data, std::chrono::milliseconds deadline,
            std::function<void(CallOutcome)> done);
  // The same, blocking; not to be called on the event loop.
  CallOutcome CallAndWait(std::string function_id, std::string ns, nlohmann::json data,
                          std::chrono::milliseconds deadline);

  struct State;

 private:
  std::shared_ptr<State> s_;
};

}  // namespace skiff::api
