// The server's shared state (Server::Impl): the event loop, the blocking pool,
// the channel broker, metrics and the calls every transport makes. Internal
// to api/; the sessions hold a reference to it.
#pragma once

#include <malloc.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "api/call_lane.h"
#include "api/channels.h"
#include "api/engine_channels.h"
#include "api/http_util.h"
#include "api/metrics.h"
#include "api/metrics_text.h"
#include "api/sandbox_access.h"
#include "api/server.h"
#include "api/worker.h"
#include "base/lanes.h"
#include "base/log.h"
#include "base/thread.h"
#include "base/unique_fd.h"
#include "e2b/api.h"
#include "functions/decode.h"
#include "functions/errors.h"
#include "functions/registry.h"
#include "sandbox/tenant_scope.h"

namespace skiff::api {

namespace beast = boost::beast;
namespace net = boost::asio;
using json = nlohmann::json;

using tcp = net::ip::tcp;
using unix_sock = net::local::stream_protocol;

// A request's header, and the silence between two keep-alive requests.
inline constexpr auto kHeaderDeadline = std::chrono::seconds(10);
inline constexpr auto kPutStall = std::chrono::seconds(30);
// A response write that makes no progress for this long ends the connection
// and frees the response: a client that never reads holds nothing for longer.
inline constexpr auto kWriteStall = std::chrono::seconds(30);
// After an accept error (EMFILE, ENFILE, ENOBUFS, ...) the acceptor waits this
// long before accepting again, instead of spinning on a listening socket that
// stays readable.
inline constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);
// The pending connections one accept error sheds (accepted on the reserve
// descriptor and closed at once) before the back-off.
inline constexpr int kShedPerBackoff = 64;
// The encoded size of one function result (HTTP body or engine reply); a
// larger one is answered S400 instead (docs/api.md#limits-and-defaults).
using fn::kMaxResultBytes;
// An answer at least this large is followed by malloc_trim (ReturnFreedMemory).
inline constexpr size_t kTrimAfterBytes = 1u << 20;
inline constexpr size_t kPoolThreads = 128;
// Sandbox lanes (docs/architecture.md#concurrency): threads that may run one sandbox's calls
// at once, and all lanes' threads together.
inline constexpr size_t kLaneThreads = 8;
inline constexpr size_t kMaxLaneThreads = 512;
inline constexpr size_t kMaxWsOutBytes = 256u << 20;  // a client that never reads is cut off
// Invocations one engine connection may have running; beyond it the socket is
// not read until some finish, so a flood cannot queue unbounded work.
inline constexpr size_t kMaxWsInFlight = 1024;

// One open API connection, counted against config.max_connections; the count
// drops when the slot dies with its session (or moves on with the stream to a
// WebSocket session). Sessions may die on any thread.
class ConnectionSlot {
 public:
  ConnectionSlot() = default;
  explicit ConnectionSlot(std::atomic<size_t>* count) : count_(count) {}
  ConnectionSlot(ConnectionSlot&& o) noexcept : count_(std::exchange(o.count_, nullptr)) {}
  ConnectionSlot& operator=(ConnectionSlot&& o) noexcept {
    if (this != &o) {
      Release();
      count_ = std::exchange(o.count_, nullptr);
    }
    return *this;
  }
  ConnectionSlot(const ConnectionSlot&) = delete;
  ConnectionSlot& operator=(const ConnectionSlot&) = delete;
  ~ConnectionSlot() { Release(); }

 private:
  void Release() {
    if (count_) count_->fetch_sub(1);
    count_ = nullptr;
  }
  std::atomic<size_t>* count_ = nullptr;
};

inline std::string ResultLabel(const Invocation& inv) {
  if (inv.result) return "ok";
  if (inv.error) return std::string(CodeName(inv.error->code()));
  if (inv.engine_error) return std::string(inv.engine_error->code());
  return "error";
}

struct Server::Impl {
  Impl(SandboxService& m, Config c)
      : manager(m),
        sandboxes(m),
        config(std::move(c)),
        ioc(1),
        pool(kPoolThreads),
        lanes("sandbox calls", LaneLimits(config)),
        broker([this](std::function<void()> f) { Blocking(std::move(f)); }),
        sweep_timer(ioc),
        tcp_backoff(ioc),
        unix_backoff(ioc),
        keys(config.Keys()) {
    if (config.tenancy()) {
      for (const auto& k : keys) tenants.emplace(k.name, std::make_unique<TenantScope>(manager, k.name));
      tenants.emplace(std::string(kEngineTenant),
                      std::make_unique<TenantScope>(manager, std::string(kEngineTenant)));
    }
    e2b::Options eo;
    if (config.isolation != "auto") eo.isolation = config.isolation;
    e2b = std::make_unique<e2b::Api>(
        manager,
        [this](std::string_view key) -> SandboxService* {
          // E2B's X-API-Key: any key without configured keys, else one of
          // them (and its tenant's view with tenancy on).
          if (keys.empty()) return &manager;
          const ApiKey* k = MatchKey(key);
          return k ? &ServiceOf(k->name) : nullptr;
        },
        std::move(eo));
  }

  SandboxService& manager;  // function calls (CallContext) and the server's own setup
  SandboxAccess sandboxes;  // /metrics, /healthz: every sandbox (files go through a caller's service)
  Config config;
  net::io_context ioc;
  net::thread_pool pool;  // calls that reach no existing sandbox
  LaneExecutor lanes;     // calls that wait on one sandbox's agent
  Broker broker;
  Metrics metrics;
  std::optional<tcp::acceptor> tcp_acceptor;
  std::optional<unix_sock::acceptor> unix_acceptor;
  net::steady_timer sweep_timer;
  net::steady_timer tcp_backoff, unix_backoff;  // accept back-off (kAcceptBackoff)
  UniqueFd reserve_fd;                          // spent on EMFILE to shed a pending connection
  std::string busy_response;                    // the 503 S400 a connection over the cap gets
  std::optional<std::string> accel;             // "kvm" | "tcg" | nullopt
  std::atomic<bool> stopping{false};
  std::optional<EngineLinkOptions> engine_link;  // worker mode (engine_url set), checked at Create
  std::unique_ptr<WorkerLink> worker;
  std::unique_ptr<EngineChannels> engine_channels;  // worker mode's data channels, on the engine
  std::function<void()> on_rejected;                // worker registration rejected
  // The bearer tokens callers may present (Config::Keys; empty: no auth)
  // and, with tenancy on, each key's view of the sandboxes, by key name,
  // plus worker mode's (kEngineTenant). docs/configuration.md#tenants.
  const std::vector<ApiKey> keys;
  std::map<std::string, std::unique_ptr<TenantScope>, std::less<>> tenants;
  // The E2B-compatible API under /e2b (docs/e2b.md); its timer stops
  // sandboxes at their E2B end of life.
  std::unique_ptr<e2b::Api> e2b;

  // The service the calls of `tenant` run against: its scope with tenancy
  // on, the whole manager without.
  SandboxService& ServiceOf(std::string_view tenant) {
    if (tenants.empty()) return manager;
    return *tenants.find(tenant)->second;
  }
  // Worker mode's calls: the engine has no key of ours.
  SandboxService& EngineService() { return ServiceOf(kEngineTenant); }

  // Runs `f` on the pool. An exception escaping it is logged and ends only
  // that task (a pool thread that let it through would terminate skiffd).
  template <class F>
  void Blocking(F&& f) {
    net::post(pool, [f = std::forward<F>(f)]() mutable { RunGuarded("api pool task", std::ref(f)); });
  }

  static LaneExecutor::Limits LaneLimits(const Config& c) {
    size_t cap = std::max<size_t>(1, c.max_calls_per_sandbox);
    size_t threads = std::min(kLaneThreads, cap);
    return {.threads_per_lane = threads,
            .queue_per_lane = cap - threads,
            .max_threads = kMaxLaneThreads,
            .idle = std::chrono::milliseconds(2000)};
  }

  // Runs `f` for a call to `target`: on that sandbox's lane when the sandbox
  // exists, else on the pool. S003 when the lane is full (the call is not
  // run; nothing else changes).
  // `caller`: the service of the call's key, so another tenant's sandbox is
  // an unknown one here too (its call runs on the pool, as an unknown id's).
  // `answer`, if set, runs after `f` (even one that threw) once the call's
  // lane slot is free (LaneExecutor::Post): it hands the answer `f` made to
  // the caller.
  Status Dispatch(const std::optional<CallTarget>& target, SandboxService& caller, std::function<void()> f,
                  std::function<void()> answer = {}) {
    if (target && SandboxAccess(caller).Exists(target->sandbox_id)) {
      Status st = lanes.Post(target->LaneKey(), std::move(f), std::move(answer));
      if (!st.ok() && st.error().code() == Code::kS003)
        return Error(Code::kS003, "sandbox " + target->sandbox_id + " has " +
                                      std::to_string(config.max_calls_per_sandbox) +
                                      " calls running or waiting (max_calls_per_sandbox)" +
                                      (target->stop ? " to stop it" : ""));
      return st;
    }
    Blocking([f = std::move(f), answer = std::move(answer)]() {
      RunGuarded("api pool task", f);
      if (answer) answer();
    });
    return OkStatus();
  }
  Status Dispatch(std::string_view function_id, const json& payload, SandboxService& caller,
                  std::function<void()> f, std::function<void()> answer = {}) {
    return Dispatch(CallTargetOf(function_id, payload), caller, std::move(f), std::move(answer));
  }

  // The key `token` matches, compared in constant time with every key (no
  // early exit, so the time does not tell which key came close); null when
  // none does.
  const ApiKey* MatchKey(std::string_view token) const {
    const ApiKey* found = nullptr;
    for (const auto& k : keys) {
      bool eq = ConstantTimeEquals(token, k.token);
      if (eq && !found) found = &k;
    }
    return found;
  }

  // The service a request's key reaches (ServiceOf its tenant), from its
  // bearer token or, for a WebSocket upgrade (`q`), its ?token=; null for a
  // missing or wrong key. Without keys every request reaches the manager.
  SandboxService* Authorized(std::string_view authorization, const std::map<std::string, std::string>* q) {
    if (keys.empty()) return &manager;
    const ApiKey* key = nullptr;
    if (auto tok = BearerToken(authorization)) key = MatchKey(*tok);
    if (!key && q) {
      if (auto it = q->find("token"); it != q->end()) key = MatchKey(it->second);
    }
    if (!key) return nullptr;
    return &ServiceOf(key->name);
  }

  // Runs one function call (on a pool thread) against `caller` (the
  // service of the call's key), recording metrics.
  Invocation Call(const std::string& id, const json& payload, ChannelBroker* channels,
                  SandboxService& caller) {
    auto t0 = std::chrono::steady_clock::now();
    CallContext ctx{caller, channels};
    Invocation inv;
    try {
      inv = Invoke(id, payload, ctx);
    } catch (const std::exception& e) {
      // A handler bug must not take the daemon down; report S300.
      SKIFF_LOG_LIMITED(Error) << "function " << id << " threw: " << e.what();
      inv.error = Platform("sandbox", std::string("internal error: ") + e.what());
    }
    if (inv.result) {
      // A result's cost is bounded here, whatever the transport and whether or
      // not the client reads: one larger than a response may be is not sent.
      if (size_t n = DumpedSize(*inv.result); n > kMaxResultBytes) {
        inv.result.reset();
        inv.error = ResultTooLarge(id, n);
      }
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string label = ResultLabel(inv);
    metrics.FunctionCall(FindFunction(id) ? id : "unknown", label);
    if (id == "sandbox::create") {
      std::string image = payload.is_object() && payload.contains("image") && payload["image"].is_string()
                              ? payload["image"].get<std::string>()
                              : "";
      if (image.size() > 64) image = image.substr(0, 64);
      if (!FindFunction(id) || image.empty()) image = "invalid";
      metrics.SandboxCreate(image, label);
    } else if (id == "sandbox::exec") {
      metrics.Exec(secs);
    }
    return inv;
  }

  static Error ResultTooLarge(const std::string& id, size_t bytes) {
    return Error(Code::kS400, "resource limit exceeded: the result of " + id + " would be " +
                                  std::to_string(bytes) + " bytes, over the " +
                                  std::to_string(kMaxResultBytes >> 20) +
                                  " MiB a response may carry; ask for less (a narrower path or pattern, "
                                  "max_matches, max_line_bytes)");
  }

  // After a large answer was built and freed on a pool thread: hand the pages
  // its allocations left behind in that thread's arena back to the kernel, so
  // the daemon's RSS falls back instead of keeping its high-water mark.
  static void ReturnFreedMemory(size_t answer_bytes) {
    if (answer_bytes >= kTrimAfterBytes) ::malloc_trim(0);
  }

  json ErrorBody(const Error& e) { return ErrorToWire(e, config.docs_base); }

  json Health() {
    size_t n = sandboxes.SandboxCount();
    auto busy = lanes.stats();
    std::string status = stopping ? "stopping" : "ok";
    if (!stopping && worker && !worker->connected()) status = "engine_disconnected";
    // Every lane thread taken: no further sandbox's call can start.
    if (status == "ok" && busy.threads >= kMaxLaneThreads) status = "overloaded";
    json h = {{"status", status},
              {"version", Version()},
              {"mode", config.engine_url ? "worker" : "server"},
              {"isolation", sandboxes.DefaultIsolation()},
              {"accel", accel ? json(*accel) : json(nullptr)},
              {"isolation_available", sandboxes.AvailableIsolations()},
              {"sandboxes", n},
              {"calls",
               {{"lanes", busy.lanes},
                {"threads", busy.threads},
                {"running", busy.running},
                {"queued", busy.queued},
                {"max_threads", kMaxLaneThreads}}}};
    return h;
  }

  std::string MetricsText() { return metrics.Render(SandboxGaugesText(sandboxes.Gauges(), Version())); }

  void ScheduleSweep() {
    sweep_timer.expires_after(std::chrono::seconds(15));
    sweep_timer.async_wait([this](beast::error_code ec) {
      if (ec || stopping) return;
      broker.Sweep();
      ScheduleSweep();
    });
  }
};

}  // namespace skiff::api
