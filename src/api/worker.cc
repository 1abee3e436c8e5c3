#include "api/worker.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <deque>
#include <future>
#include <map>

#include "api/engine_socket.h"
#include "api/http_util.h"
#include "api/iii_codec.h"
#include "base/log.h"
#include "base/text.h"
#include "base/version.h"

namespace skiff::api {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;

struct WorkerLink::State : std::enable_shared_from_this<WorkerLink::State> {
  State(net::io_context& i, EngineLinkOptions o, WorkerHooks h)
      : ioc(i), options(std::move(o)), hooks(std::move(h)), resolver(i), retry(i), ping(i), settle(i) {}

  net::io_context& ioc;
  const EngineLinkOptions options;
  WorkerHooks hooks;
  tcp::resolver resolver;
  net::steady_timer retry, ping, settle;
  std::unique_ptr<EngineSocket> ws;
  beast::flat_buffer in;
  std::deque<std::string> out;
  bool writing = false;
  std::atomic<bool> up{false};
  bool stopped = false;
  bool standing_by = false;  // lost a worker-name conflict; retrying (standby_on_conflict)
  uint64_t generation = 0;   // bumps on every (re)connect; stale callbacks check it
  std::string worker_id, reattach_token;
  std::string refusal;  // the engine's last connection error, logged once
  std::chrono::steady_clock::time_point last_rx;
  // Calls this worker made (Call), by invocation id.
  struct Pending {
    std::function<void(CallOutcome)> done;
    std::unique_ptr<net::steady_timer> timer;
  };
  std::map<std::string, Pending> pending;

  void Finish(const std::string& invocation_id, CallOutcome outcome) {
    auto it = pending.find(invocation_id);
    if (it == pending.end()) return;
    auto done = std::move(it->second.done);
    if (it->second.timer) it->second.timer->cancel();
    pending.erase(it);
    if (done) done(std::move(outcome));
  }
  void FailAllPending() {
    auto calls = std::move(pending);
    pending.clear();
    for (auto& [id, p] : calls) {
      if (p.timer) p.timer->cancel();
      if (p.done) p.done(CallOutcome{CallOutcome::Kind::kLinkLost, json()});
    }
  }
  void StartCall(std::string function_id, std::string ns, json data, std::chrono::milliseconds deadline,
                 std::function<void(CallOutcome)> done) {
    if (!up || !ws) {
      done(CallOutcome{CallOutcome::Kind::kLinkLost, json()});
      return;
    }
    std::string id = NewUuid();
    Pending p;
    p.done = std::move(done);
    p.timer = std::make_unique<net::steady_timer>(ioc);
    p.timer->expires_after(deadline);
    auto self = shared_from_this();
    p.timer->async_wait([self, id](beast::error_code ec) {
      if (!ec) self->Finish(id, CallOutcome{CallOutcome::Kind::kTimeout, json()});
    });
    pending.emplace(id, std::move(p));
    Send(iii::Invoke(id, function_id, ns, std::move(data)));
  }

  void Connect() {
    if (stopped) return;
    auto self = shared_from_this();
    uint64_t gen = ++generation;
    const WsUrl& u = options.parsed;
    resolver.async_resolve(
        u.host, u.port, [self, gen](beast::error_code ec, const tcp::resolver::results_type& res) {
          if (gen != self->generation) return;
          if (ec) return self->Retry("resolve: " + ec.message());
          self->ws = std::make_unique<EngineSocket>(self->ioc, self->options, kMaxPayloadBytes);
          self->ws->AsyncOpen(res, [self, gen](const std::string& error) {
            if (gen != self->generation) return;
            if (!error.empty() && error.rfind("TLS", 0) == 0 && error != self->refusal) {
              // Not an engine that is not up yet: one this host will not trust
              // (docs/multihost.md#tls). Said loudly, once per reason.
              SKIFF_LOG(Error) << "worker: cannot trust the engine at " << self->options.url << ": " << error;
              self->refusal = error;
            }
            if (!error.empty()) return self->Retry(error);
            self->last_rx = std::chrono::steady_clock::now();
            self->Read(gen);
            self->SchedulePing(gen);
          });
        });
  }

  void Retry(const std::string& why) {
    if (stopped) return;
    if (standing_by) {
      // Said once, when it began.
    } else if (up) {
      SKIFF_LOG(Warn) << "worker: lost the engine: " << why << "; reconnecting every 2 s";
    } else {
      SKIFF_LOG(Info) << "worker: engine not reachable (" << why << "); retrying in 2 s";
    }
    up = false;
    ++generation;
    out.clear();
    writing = false;
    FailAllPending();
    if (ws) ws->Close();
    auto self = shared_from_this();
    retry.expires_after(std::chrono::seconds(2));
    retry.async_wait([self](beast::error_code ec) {
      if (!ec) self->Connect();
    });
  }

  void SchedulePing(uint64_t gen) {
    auto self = shared_from_this();
    ping.expires_after(std::chrono::seconds(20));
    ping.async_wait([self, gen](beast::error_code ec) {
      if (ec || gen != self->generation || self->stopped) return;
      if (std::chrono::steady_clock::now() - self->last_rx > std::chrono::seconds(60)) {
        return self->Retry("no traffic for 60 s");
      }
      self->ws->AsyncPing();
      self->SchedulePing(gen);
    });
  }

  void Send(std::string s) {
    if (!ws) return;
    out.push_back(std::move(s));
    if (!writing) WriteNext(generation);
  }
  void WriteNext(uint64_t gen) {
    if (out.empty() || gen != generation) {
      writing = false;
      return;
    }
    writing = true;
    auto self = shared_from_this();
    ws->AsyncWrite(out.front(), [self, gen](const std::string& error, size_t) {
      if (gen != self->generation) return;
      if (!self->out.empty()) self->out.pop_front();
      if (!error.empty()) return self->Retry("write: " + error);
      self->WriteNext(gen);
    });
  }

  void Read(uint64_t gen) {
    auto self = shared_from_this();
    ws->OnControlFrame([self]() { self->last_rx = std::chrono::steady_clock::now(); });
    ws->AsyncRead(in, [self, gen](const std::string& error, size_t) {
      if (gen != self->generation) return;
      if (!error.empty()) return self->Retry("read: " + error);
      self->last_rx = std::chrono::steady_clock::now();
      std::string msg = beast::buffers_to_string(self->in.data());
      self->in.consume(self->in.size());
      self->Handle(msg);
      self->Read(gen);
    });
  }

  void Register() {
    struct utsname u;
    std::string os = "linux";
    if (::uname(&u) == 0) os = std::string(u.sysname) + " " + u.machine;
    Send(iii::RegisterWorker(SkiffVersion(), os, ::getpid(), hooks.iii_namespace));
    for (const auto& f : Functions()) {
      if (f.internal || (hooks.exports && !hooks.exports(f))) continue;
      Send(iii::RegisterFunction(f));
    }
  }

  void Handle(const std::string& msg) {
    auto parsed = ParsePayload(msg);
    if (!parsed.ok() || !parsed->is_object()) {
      SKIFF_LOG(Warn) << "worker: ignoring a frame that is not a JSON object";
      return;
    }
    json& m = *parsed;
    std::string type = iii::MessageType(m);
    if (type == "workerregistered") {
      std::string old_id = worker_id, old_token = reattach_token;
      // Not m.value(key, std::string()): that throws on a non-string member.
      worker_id = iii::StringField(m, "worker_id");
      reattach_token = iii::StringField(m, "reattach_token");
      if (!old_id.empty()) Send(iii::Reattach(old_id, old_token));
      refusal.clear();
      up = false;
      Register();
      up = true;
      if (!standing_by) {
        SKIFF_LOG(Info) << "worker: registered with the engine as " << worker_id;
      } else {
        // A standby learns it took over when no rejection follows.
        auto self = shared_from_this();
        uint64_t gen = generation;
        settle.expires_after(std::chrono::seconds(1));
        settle.async_wait([self, gen](beast::error_code ec) {
          if (ec || gen != self->generation || !self->standing_by) return;
          self->standing_by = false;
          SKIFF_LOG(Info) << "worker: the active worker is gone; serving now as " << self->worker_id;
        });
      }
    } else if (type == "invokefunction") {
      Invoke(m);
    } else if (type == "registrationrejected" && hooks.standby_on_conflict &&
               iii::StringField(m, "code") == "WORKER_NAMESPACE_CONFLICT") {
      if (!standing_by)
        SKIFF_LOG(Info) << "worker: standing by: " << iii::DescribeRejection(m, hooks.iii_namespace)
                        << "; registering again every 2 s";
      standing_by = true;
      up = false;  // not serving: Retry below reconnects quietly
      Retry("standing by");
    } else if (type == "registrationrejected") {
      SKIFF_LOG(Error) << "worker: registration rejected (" << iii::StringField(m, "code")
                       << "): " << iii::DescribeRejection(m, hooks.iii_namespace) << "; exiting";
      if (hooks.rejected) hooks.rejected();
    } else if (type == "error") {
      // The engine refused the connection before any registration: its auth
      // function said no (AUTH_ERROR) or failed. It closes the socket next;
      // the link retries, saying so once per distinct answer.
      std::string why = iii::DescribeConnectionError(m);
      if (why != refusal) SKIFF_LOG(Error) << "worker: the engine refused this connection: " << why;
      refusal = why;
    } else if (type == "ping") {
      Send(iii::Pong());
    } else if (type == "invocationresult") {
      std::string id = iii::StringField(m, "invocation_id");
      if (m.contains("error") && !m["error"].is_null())
        Finish(id, CallOutcome{CallOutcome::Kind::kError, std::move(m["error"])});
      else
        Finish(id, CallOutcome{CallOutcome::Kind::kResult,
                               m.contains("result") ? std::move(m["result"]) : json()});
    }
    // pong and everything else: nothing to do.
  }

  void Invoke(json& m) {
    auto req = iii::DecodeInvoke(m);
    if (!req) return;
    bool reply = req->wants_reply();
    if (req->action == iii::Action::kEnqueue) {
      // Same answer as the engine session on "/" (docs/architecture.md#transports-and-their-limits).
      if (reply) Send(iii::EncodeError(req->invocation_id, req->function_id, iii::EnqueueRefused()));
      return;
    }
    auto self = shared_from_this();
    uint64_t gen = generation;
    json invocation_id = req->invocation_id;  // null for a void call
    std::string function_id = req->function_id;
    json payload = req->data;
    // The result is sent once the call's lane slot is free again.
    auto out = std::make_shared<std::string>();
    Status queued = hooks.dispatch(
        function_id, payload,
        [self, reply, out, req = std::move(*req)]() mutable {
          Invocation inv = self->hooks.call(req.function_id, req.data);
          if (reply)
            *out = iii::EncodeInvocation(req.invocation_id, req.function_id, std::move(inv),
                                         self->hooks.error_body);
        },
        [self, gen, out]() {
          if (out->empty()) return;
          net::post(self->ioc, [self, gen, s = std::move(*out)]() mutable {
            if (gen == self->generation) self->Send(std::move(s));  // results of a lost link drop
          });
        });
    if (!queued.ok() && reply) {  // the sandbox's lane is full: answered at once
      Invocation inv;
      inv.error = std::move(queued).error();
      Send(iii::EncodeInvocation(invocation_id, function_id, std::move(inv), hooks.error_body));
    }
  }
};

WorkerLink::WorkerLink(net::io_context& ioc, EngineLinkOptions options, WorkerHooks hooks)
    : s_(std::make_shared<State>(ioc, std::move(options), std::move(hooks))) {}

WorkerLink::~WorkerLink() { Stop(); }

void WorkerLink::Start() {
  auto s = s_;
  net::post(s->ioc, [s]() { s->Connect(); });
}

void WorkerLink::Stop() {
  auto s = s_;
  net::post(s->ioc, [s]() {
    s->stopped = true;
    ++s->generation;
    s->FailAllPending();
    s->retry.cancel();
    s->ping.cancel();
    s->settle.cancel();
    if (s->ws) s->ws->Close();
  });
}

bool WorkerLink::connected() const { return s_->up; }

void WorkerLink::Call(std::string function_id, std::string ns, json data, std::chrono::milliseconds deadline,
                      std::function<void(CallOutcome)> done) {
  auto s = s_;
  net::post(s->ioc, [s, function_id = std::move(function_id), ns = std::move(ns), data = std::move(data),
                     deadline, done = std::move(done)]() mutable {
    if (s->stopped) return done(CallOutcome{CallOutcome::Kind::kLinkLost, json()});
    s->StartCall(std::move(function_id), std::move(ns), std::move(data), deadline, std::move(done));
  });
}

CallOutcome WorkerLink::CallAndWait(std::string function_id, std::string ns, json data,
                                    std::chrono::milliseconds deadline) {
  auto promise = std::make_shared<std::promise<CallOutcome>>();
  auto future = promise->get_future();
  Call(std::move(function_id), std::move(ns), std::move(data), deadline,
       [promise](CallOutcome o) { promise->set_value(std::move(o)); });
  return future.get();
}

}  // namespace skiff::api
