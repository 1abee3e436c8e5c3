// `skiff route`: the router of a multi-host fleet (docs/multihost.md), in
// the foreground. It joins the iii engine as the public `iii-sandbox`
// worker of the default namespace, probes the hosts (each a `skiff serve
// --iii-namespace skiff.<host>`) and answers the sandbox::* functions by
// calling them (fleet/fleet_router.h). A second router on the same engine
// stands by and takes over when the active one disconnects.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "api/call_lane.h"
#include "api/worker.h"
#include "base/lanes.h"
#include "base/log.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "fleet/fleet_router.h"
#include "functions/errors.h"
#include "sandbox/config.h"

namespace skiff::cli {
namespace {

struct RouteFlags {
  std::string engine_url, engine_ca_file, engine_token_file;
  std::string host_prefix = "skiff.";
  uint32_t probe_ms = 1000;
  uint32_t probe_deadline_ms = 2000;
  std::string docs_base = "docs/errors.md";
};

// The router's calls through its worker link.
class LinkCalls final : public fleet::EngineCalls {
 public:
  explicit LinkCalls(api::WorkerLink*& link) : link_(link) {}
  void Call(const std::string& function_id, const std::string& ns, nlohmann::json data,
            std::chrono::milliseconds deadline, std::function<void(fleet::CallOutcome)> done) override {
    if (closed) return done(fleet::CallOutcome{fleet::CallOutcome::Kind::kLinkLost, nlohmann::json()});
    link_->Call(function_id, ns, std::move(data), deadline, std::move(done));
  }
  // Set once the router is shutting down: its event loop no longer runs,
  // so calls end at once instead of waiting out their deadlines.
  std::atomic<bool> closed{false};

 private:
  api::WorkerLink*& link_;
};

int Route(const RouteFlags& f) {
  if (auto why = EngineUrlProblem(f.engine_url); !why.empty()) {
    std::fprintf(stderr, "skiff route: --engine: %s\n", why.c_str());
    return kExitConfig;
  }
  auto link_options = api::LoadEngineLinkOptions(
      f.engine_url, f.engine_ca_file.empty() ? std::nullopt : std::optional<std::string>(f.engine_ca_file),
      f.engine_token_file.empty() ? std::nullopt : std::optional<std::string>(f.engine_token_file));
  if (!link_options.ok()) {
    std::fprintf(stderr, "skiff route: %s\n", link_options.error().message().c_str());
    return kExitConfig;
  }
  if (f.host_prefix.empty()) {
    std::fprintf(stderr, "skiff route: --host-prefix must not be empty\n");
    return kExitConfig;
  }
  if (f.probe_ms < 100 || f.probe_deadline_ms < 100) {
    std::fprintf(stderr, "skiff route: --probe-ms and --probe-deadline-ms are at least 100\n");
    return kExitConfig;
  }
  boost::asio::io_context ioc;
  api::WorkerLink* link_ptr = nullptr;
  LinkCalls calls(link_ptr);
  fleet::RouterOptions opt;
  opt.host_prefix = f.host_prefix;
  opt.probe_deadline = std::chrono::milliseconds(f.probe_deadline_ms);
  fleet::FleetRouter router(calls, opt);
  // Calls naming one sandbox share its lane, as in the daemon: a slow host
  // holds only its own sandboxes' callers.
  LaneExecutor lanes("route", LaneExecutor::Limits{});

  api::WorkerHooks hooks;
  hooks.standby_on_conflict = true;
  hooks.exports = [](const FunctionDef& d) { return d.id.rfind("skiff::host::", 0) != 0; };
  hooks.call = [&router](const std::string& id, const nlohmann::json& payload) {
    return router.Handle(id, payload);
  };
  hooks.error_body = [&f](const Error& e) { return ErrorToWire(e, f.docs_base); };
  hooks.dispatch = [&lanes](const std::string& id, const nlohmann::json& payload, std::function<void()> work,
                            std::function<void()> answer) {
    auto target = api::CallTargetOf(id, payload);
    return lanes.Post(target ? target->LaneKey() : "pool", std::move(work), std::move(answer));
  };
  std::atomic<int> exit_code{0};
  hooks.rejected = [&ioc, &exit_code]() {
    exit_code = 3;
    ioc.stop();
  };
  api::WorkerLink link(ioc, std::move(*link_options), std::move(hooks));
  link_ptr = &link;

  // The probe loop: which hosts exist and how full they are.
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::thread prober([&] {
    std::unique_lock<std::mutex> l(mu);
    while (!stopping) {
      l.unlock();
      if (link.connected()) {
        Status st = router.Probe();
        if (!st.ok() && router.engine_too_old()) {
          SKIFF_LOG(Error) << "route: " << st.error().message();
          exit_code = 3;
          ioc.stop();
        } else if (!st.ok()) {
          SKIFF_LOG(Warn) << "route: probe: " << st.error().message();
        }
      }
      l.lock();
      cv.wait_for(l, std::chrono::milliseconds(f.probe_ms), [&] { return stopping; });
    }
  });

  boost::asio::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&ioc](const boost::system::error_code&, int) { ioc.stop(); });
  SKIFF_LOG(Info) << "route: joining the engine at " << f.engine_url
                  << " as the fleet's router (hosts: " << f.host_prefix << "*)";
  link.Start();
  ioc.run();
  calls.closed = true;
  {
    std::lock_guard<std::mutex> l(mu);
    stopping = true;
  }
  cv.notify_all();
  prober.join();
  // Calls still waiting on a host get their end (the link fails them),
  // which lets the lanes finish before they are destroyed.
  link.Stop();
  ioc.restart();
  ioc.run_for(std::chrono::seconds(2));
  return exit_code;
}

}  // namespace

void AddRouteCommand(CLI::App& app, int& rc) {
  auto* route = app.add_subcommand("route", "run a fleet's router in the foreground (docs/multihost.md)");
  auto f = std::make_shared<RouteFlags>();
  route->add_option("--engine", f->engine_url, "the iii engine's URL (wss://, or ws:// on this machine)")
      ->required();
  AddEngineLinkFlags(route, f->engine_ca_file, f->engine_token_file);
  route->add_option("--host-prefix", f->host_prefix,
                    "namespace prefix of the fleet's hosts (default skiff.)");
  route->add_option("--probe-ms", f->probe_ms, "how often to probe the hosts (default 1000)");
  route->add_option(
      "--probe-deadline-ms", f->probe_deadline_ms,
      "a host that does not answer a probe within this is silent: no new sandboxes (default 2000)");
  route->callback([f, &rc] { rc = Route(*f); });
}

}  // namespace skiff::cli
