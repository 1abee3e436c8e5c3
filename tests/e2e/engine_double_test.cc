// The engine double (engine_double.h) against raw WebSocket clients: each
// behaviour a skiff fleet relies on, as the iii engine implements it —
// namespaces keeping the same ids apart, both registration conflicts, routing
// with a namespace and the result relayed back, function_not_found,
// invocation_stopped and removal when a worker goes, re-registration by a
// restarted host, engine::workers::list, state, the workers-available
// trigger, the 0.22 last-registrant-wins switch, wss:// against a throwaway
// CA (test_ca.h), the RBAC listener: authentication through an auth function
// and the session's gates on calls, registrations and triggers (with the RBAC
// rules checked on the engine's own test cases), and data channels
// (engine::channels::create and the /ws/channels endpoint). No daemon
// involved.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

// Boost.Asio's headers use std::exchange without including <utility>.
#include <utility>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/text.h"
#include "channel_client.h"
#include "engine_double.h"
#include "support/temp_dir.h"
#include "test_ca.h"

namespace skiff::e2e {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
namespace net = boost::asio;
namespace beast = boost::beast;

constexpr auto kWait = 20s;  // generous: a missing frame fails the test, not a slow one

// How a RawClient connects.
struct ClientOptions {
  std::string path = "/";                                    // request target, query included
  std::vector<std::pair<std::string, std::string>> headers;  // added to the upgrade request
  net::ssl::context* tls = nullptr;                          // wss://, verifying 127.0.0.1 with this context
};

// A worker or caller connection speaking the engine protocol by hand. The
// constructor returns once the engine greeted it (worker_id set), refused it
// (an `error` frame), or closed it; it throws when the TLS or WebSocket
// handshake fails.
class RawClient {
 public:
  explicit RawClient(uint16_t port, const std::string& path = "/")
      : RawClient(port, ClientOptions{path, {}, nullptr}) {}
  RawClient(uint16_t port, const ClientOptions& o) {
    net::ip::tcp::endpoint ep(net::ip::make_address("127.0.0.1"), port);
    auto decorate = [h = o.headers](beast::websocket::request_type& req) {
      for (auto& [k, v] : h) req.set(k, v);
    };
    if (o.tls) {
      tls_ws_ = std::make_unique<TlsWs>(ioc_, *o.tls);
      beast::get_lowest_layer(*tls_ws_).connect(ep);
      SSL* ssl = tls_ws_->next_layer().native_handle();
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), "127.0.0.1");
      tls_ws_->next_layer().set_verify_mode(net::ssl::verify_peer);
      tls_ws_->next_layer().handshake(net::ssl::stream_base::client);
      tls_ws_->set_option(beast::websocket::stream_base::decorator(decorate));
      tls_ws_->handshake("127.0.0.1", o.path);
    } else {
      ws_ = std::make_unique<Ws>(ioc_);
      beast::get_lowest_layer(*ws_).connect(ep);
      ws_->set_option(beast::websocket::stream_base::decorator(decorate));
      ws_->handshake("127.0.0.1", o.path);
    }
    Read();
    thread_ = std::thread([this] { ioc_.run(); });
    if (o.path.starts_with("/otel")) return;  // telemetry only: never greeted
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, kWait, [&] {
      if (closed_) return true;
      for (auto& m : got_) {
        const std::string type = m.value("type", "");
        if (type == "error") return true;
        if (type == "workerregistered") {
          worker_id_ = m["worker_id"];
          return true;
        }
      }
      return false;
    });
  }
  ~RawClient() {
    Drop();
    thread_.join();
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  const std::string& worker_id() const { return worker_id_; }

  // Answers every invokefunction it receives from now on with answer(invoke)
  // (an invocationresult), on the client's own thread.
  void Serve(std::function<json(const json&)> answer) {
    std::lock_guard<std::mutex> l(mu_);
    serve_ = std::move(answer);
  }

  void Send(const json& m) {
    net::post(ioc_, [this, s = m.dump()] {
      out_.push_back(s);
      if (!writing_) Write();
    });
  }
  // Disconnects abruptly, as a crashed host would.
  void Drop() {
    net::post(ioc_, [this] {
      Visit([](auto& ws) {
        beast::error_code ec;
        beast::get_lowest_layer(ws).socket().close(ec);
      });
    });
  }

  // The first frame received (at index >= from) matching `pred`.
  std::optional<json> WaitFor(const std::function<bool(const json&)>& pred, size_t from = 0) {
    std::unique_lock<std::mutex> l(mu_);
    std::optional<json> found;
    cv_.wait_for(l, kWait, [&] {
      for (size_t i = from; i < got_.size(); ++i) {
        if (pred(got_[i])) {
          found = got_[i];
          return true;
        }
      }
      return false;
    });
    return found;
  }
  std::optional<json> WaitType(const std::string& type, size_t from = 0) {
    return WaitFor([&](const json& m) { return m.value("type", "") == type; }, from);
  }
  std::optional<json> WaitResult(const std::string& invocation_id) {
    return WaitFor([&](const json& m) {
      return m.value("type", "") == "invocationresult" && m.value("invocation_id", json()) == invocation_id;
    });
  }
  std::optional<json> WaitInvoke(const std::string& function_id, size_t from = 0) {
    return WaitFor(
        [&](const json& m) {
          return m.value("type", "") == "invokefunction" && m.value("function_id", "") == function_id;
        },
        from);
  }
  bool WaitClosed() {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, kWait, [&] { return closed_; });
  }
  // How the engine closed the connection (valid once WaitClosed is true).
  beast::websocket::close_reason CloseReason() {
    std::lock_guard<std::mutex> l(mu_);
    return close_reason_;
  }
  std::vector<json> Got() {
    std::lock_guard<std::mutex> l(mu_);
    return got_;
  }
  size_t Count(const std::string& type) {
    size_t n = 0;
    for (auto& m : Got()) n += m.value("type", "") == type;
    return n;
  }

 private:
  using Ws = beast::websocket::stream<beast::tcp_stream>;
  using TlsWs = beast::websocket::stream<beast::ssl_stream<beast::tcp_stream>>;

  template <class F>
  void Visit(F&& f) {
    if (tls_ws_) {
      f(*tls_ws_);
    } else {
      f(*ws_);
    }
  }

  void Read() {
    Visit([this](auto& ws) {
      ws.async_read(buf_, [this, &ws](beast::error_code ec, size_t) {
        if (ec) {
          std::lock_guard<std::mutex> l(mu_);
          closed_ = true;
          close_reason_ = ws.reason();
          cv_.notify_all();
          return;
        }
        json m = json::parse(beast::buffers_to_string(buf_.data()), nullptr, false);
        buf_.consume(buf_.size());
        std::function<json(const json&)> serve;
        {
          std::lock_guard<std::mutex> l(mu_);
          got_.push_back(m);
          if (m.is_object() && m.value("type", "") == "invokefunction") serve = serve_;
        }
        cv_.notify_all();
        if (serve) Send(serve(m));
        Read();
      });
    });
  }
  void Write() {
    if (out_.empty()) {
      writing_ = false;
      return;
    }
    writing_ = true;
    Visit([this](auto& ws) {
      ws.text(true);
      ws.async_write(net::buffer(out_.front()), [this](beast::error_code ec, size_t) {
        out_.pop_front();
        if (ec) {
          out_.clear();
          writing_ = false;
          return;
        }
        Write();
      });
    });
  }

  net::io_context ioc_;
  std::unique_ptr<Ws> ws_;
  std::unique_ptr<TlsWs> tls_ws_;
  beast::flat_buffer buf_;
  std::deque<std::string> out_;
  bool writing_ = false;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<json> got_;
  bool closed_ = false;
  beast::websocket::close_reason close_reason_;
  std::string worker_id_;
  std::function<json(const json&)> serve_;
};

// What the SDKs send: engine::workers::register as a void call.
json Announce(const std::string& name, const std::string& ns, json pid = 4242) {
  json data{{"name", name}, {"runtime", "test"}, {"version", "1.0.0"}, {"os", "linux"}};
  if (!pid.is_null()) data["pid"] = pid;
  if (!ns.empty()) data["namespace"] = ns;
  return {{"type", "invokefunction"},
          {"function_id", "engine::workers::register"},
          {"data", data},
          {"action", {{"type", "void"}}}};
}
json Register(const std::string& id) {
  return {{"type", "registerfunction"},
          {"id", id},
          {"description", "test function"},
          {"request_format", nullptr},
          {"response_format", nullptr}};
}
json Call(const std::string& inv, const std::string& fn, json data, const std::string& ns = "") {
  json m{{"type", "invokefunction"}, {"invocation_id", inv}, {"function_id", fn}, {"data", std::move(data)}};
  if (!ns.empty()) m["namespace"] = ns;
  return m;
}
json Answer(const json& invoke, json result) {
  return {{"type", "invocationresult"},
          {"invocation_id", invoke["invocation_id"]},
          {"function_id", invoke["function_id"]},
          {"result", std::move(result)}};
}

// Waits until the double has `fn` registered in `ns` (by `owner` if given).
bool WaitRegistered(EngineDouble& eng, const std::string& ns, const std::string& fn,
                    const std::string& owner = "") {
  auto end = std::chrono::steady_clock::now() + kWait;
  while (std::chrono::steady_clock::now() < end) {
    auto owners = eng.FunctionOwners();
    auto it = owners.find({ns, fn});
    if (it != owners.end() && (owner.empty() || it->second == owner)) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}
bool WaitUnregistered(EngineDouble& eng, const std::string& ns, const std::string& fn) {
  auto end = std::chrono::steady_clock::now() + kWait;
  while (std::chrono::steady_clock::now() < end) {
    if (!eng.FunctionOwners().count({ns, fn})) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// A TLS client context that trusts only the CA in `ca_file`.
std::unique_ptr<net::ssl::context> Trusting(const std::string& ca_file) {
  auto ctx = std::make_unique<net::ssl::context>(net::ssl::context::tls_client);
  ctx->load_verify_file(ca_file);
  return ctx;
}

// A host of the fleet: announces itself in `ns`, then registers `fns`.
std::unique_ptr<RawClient> Host(EngineDouble& eng, const std::string& name, const std::string& ns,
                                const std::vector<std::string>& fns) {
  auto h = std::make_unique<RawClient>(eng.port());
  h->Send(Announce(name, ns));
  for (auto& f : fns) h->Send(Register(f));
  const std::string where = ns.empty() ? "default" : ns;
  for (auto& f : fns) EXPECT_TRUE(WaitRegistered(eng, where, f, h->worker_id())) << name << " " << f;
  return h;
}

// --- RBAC: a double with the RBAC listener, its auth function `auth::check`.

EngineDoubleOptions RbacOptions(std::vector<json> expose) {
  EngineDoubleOptions o;
  o.rbac_port = 0;
  o.auth_function_id = "auth::check";
  o.expose_functions = std::move(expose);
  return o;
}

// The auth function's worker, on the main listener in `default`: a bearer
// token it knows is answered with that token's AuthResult, anything else
// with the error {unauthorized, "bad credential"}.
std::unique_ptr<RawClient> AuthWorker(EngineDouble& eng, std::map<std::string, json> results) {
  auto w = Host(eng, "auth", "", {"auth::check"});
  w->Serve([results = std::move(results)](const json& invoke) {
    const json& headers = invoke["data"]["headers"];
    std::string h = headers.is_object() ? headers.value("authorization", "") : "";
    auto it = h.starts_with("Bearer ") ? results.find(h.substr(7)) : results.end();
    if (it != results.end()) return Answer(invoke, it->second);
    return json{{"type", "invocationresult"},
                {"invocation_id", invoke["invocation_id"]},
                {"function_id", invoke["function_id"]},
                {"error", {{"code", "unauthorized"}, {"message", "bad credential"}}}};
  });
  return w;
}

// Connects with `Authorization: Bearer <token>`.
ClientOptions Bearer(const std::string& token, const std::string& path = "/") {
  return ClientOptions{path, {{"Authorization", "Bearer " + token}}, nullptr};
}

json AuthError(const std::string& message) {
  return {{"type", "error"}, {"error", {{"code", "AUTH_ERROR"}, {"message", message}}}};
}

// The engine's FORBIDDEN answer to a call.
json Forbidden(const std::string& inv, const std::string& fn, const std::string& message) {
  return {{"type", "invocationresult"},
          {"invocation_id", inv},
          {"function_id", fn},
          {"error", {{"code", "FORBIDDEN"}, {"message", message}}}};
}

TEST(EngineDoubleTest, NamespacesKeepSameIdsApartAndRouteByNamespace) {
  EngineDouble eng;
  auto a = Host(eng, "skiff-a", "skiff.a", {"sandbox::run"});
  auto b = Host(eng, "skiff-b", "skiff.b", {"sandbox::run"});
  EXPECT_EQ(a->Count("registrationrejected"), 0u);
  EXPECT_EQ(b->Count("registrationrejected"), 0u);
  RawClient caller(eng.port());

  // To skiff.b: forwarded with the caller's id, the caller's worker id in
  // data, no namespace; the answer relayed with the caller's id.
  std::string inv = NewUuid();
  caller.Send(Call(inv, "sandbox::run", {{"code", "echo"}}, "skiff.b"));
  auto in_b = b->WaitInvoke("sandbox::run");
  ASSERT_TRUE(in_b);
  EXPECT_EQ((*in_b)["invocation_id"], inv);
  EXPECT_EQ((*in_b)["data"]["code"], "echo");
  EXPECT_EQ((*in_b)["data"]["_caller_worker_id"], caller.worker_id());
  EXPECT_FALSE(in_b->contains("namespace"));
  b->Send(Answer(*in_b, {{"host", "b"}}));
  auto r = caller.WaitResult(inv);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, json({{"type", "invocationresult"},
                      {"invocation_id", inv},
                      {"function_id", "sandbox::run"},
                      {"result", {{"host", "b"}}}}));
  EXPECT_EQ(a->Count("invokefunction"), 0u);

  // To skiff.a: only a sees it.
  std::string inv2 = NewUuid();
  caller.Send(Call(inv2, "sandbox::run", {{"code", "ls"}}, "skiff.a"));
  auto in_a = a->WaitInvoke("sandbox::run");
  ASSERT_TRUE(in_a);
  EXPECT_EQ((*in_a)["invocation_id"], inv2);
  a->Send(Answer(*in_a, {{"host", "a"}}));
  auto r2 = caller.WaitResult(inv2);
  ASSERT_TRUE(r2);
  EXPECT_EQ((*r2)["result"]["host"], "a");
  EXPECT_EQ(b->Count("invokefunction"), 1u);

  // No namespace means `default`, where the id is not registered.
  std::string inv3 = NewUuid();
  caller.Send(Call(inv3, "sandbox::run", json::object()));
  auto r3 = caller.WaitResult(inv3);
  ASSERT_TRUE(r3);
  EXPECT_EQ(*r3, json({{"type", "invocationresult"},
                       {"invocation_id", inv3},
                       {"function_id", "sandbox::run"},
                       {"error",
                        {{"code", "function_not_found"},
                         {"message",
                          "Function sandbox::run not found in namespace default. It is registered in "
                          "namespace(s): skiff.a, skiff.b."}}}}));
}

TEST(EngineDoubleTest, InvocationIdsAreUuids) {
  EngineDouble eng;
  RawClient caller(eng.port());
  // Not a UUID: the engine cannot decode the frame and drops it.
  caller.Send(Call("call-1", "state::get", {{"scope", "s"}, {"key", "k"}}));
  // A UUID in another form comes back in the Uuid's own: lowercase, hyphenated.
  caller.Send(Call("0123456789ABCDEF0123456789ABCDEF", "state::get", {{"scope", "s"}, {"key", "k"}}));
  auto r = caller.WaitType("invocationresult");
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["invocation_id"], "01234567-89ab-cdef-0123-456789abcdef");
  EXPECT_EQ(caller.Count("invocationresult"), 1u);
}

TEST(EngineDoubleTest, UnknownFunctionAnswersTheEnginesError) {
  EngineDouble eng;
  RawClient caller(eng.port());
  std::string inv = NewUuid();
  caller.Send(Call(inv, "nope::missing", json::object(), "skiff.z"));
  auto r = caller.WaitResult(inv);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, json({{"type", "invocationresult"},
                      {"invocation_id", inv},
                      {"function_id", "nope::missing"},
                      {"error",
                       {{"code", "function_not_found"},
                        {"message", "Function nope::missing not found in namespace skiff.z."}}}}));
}

TEST(EngineDoubleTest, FunctionConflictRefusesOnlyThatFunction) {
  EngineDouble eng;
  auto a = Host(eng, "skiff-a", "skiff.a", {"sandbox::run"});
  RawClient a2(eng.port());
  a2.Send(Announce("skiff-a2", "skiff.a"));
  a2.Send(Register("sandbox::run"));
  auto rej = a2.WaitType("registrationrejected");
  ASSERT_TRUE(rej);
  EXPECT_EQ(*rej, json({{"type", "registrationrejected"},
                        {"code", "FUNCTION_NAMESPACE_CONFLICT"},
                        {"namespace", "skiff.a"},
                        {"function_id", "sandbox::run"},
                        {"owner_worker_id", a->worker_id()}}));
  // The connection stays and its other functions register.
  a2.Send(Register("sandbox::other"));
  EXPECT_TRUE(WaitRegistered(eng, "skiff.a", "sandbox::other", a2.worker_id()));
  EXPECT_EQ(eng.FunctionOwners().at({"skiff.a", "sandbox::run"}), a->worker_id());
  EXPECT_TRUE(eng.Connected(1));
}

TEST(EngineDoubleTest, WorkerNameConflictRejectsAndClosesTheSecond) {
  EngineDouble eng;
  auto first = Host(eng, "skiff-h1", "skiff.h1", {"sandbox::run"});
  RawClient second(eng.port());
  second.Send(Register("sandbox::exec"));  // held until the namespace is known
  second.Send(Announce("skiff-h1", "skiff.h1"));
  auto rej = second.WaitType("registrationrejected");
  ASSERT_TRUE(rej);
  EXPECT_EQ(*rej, json({{"type", "registrationrejected"},
                        {"code", "WORKER_NAMESPACE_CONFLICT"},
                        {"namespace", "skiff.h1"},
                        {"worker_name", "skiff-h1"},
                        {"owner_worker_id", first->worker_id()}}));
  EXPECT_TRUE(second.WaitClosed());
  // Nothing of the loser was registered.
  for (auto& [k, owner] : eng.FunctionOwners()) EXPECT_NE(owner, second.worker_id()) << k.second;
  // The same name in another namespace is a different worker.
  auto other = Host(eng, "skiff-h1", "skiff.h2", {"sandbox::run"});
  EXPECT_EQ(other->Count("registrationrejected"), 0u);
}

TEST(EngineDoubleTest, RegistrationsWaitForTheNamespaceOrTheGrace) {
  EngineDoubleOptions o;
  o.namespace_grace = 300ms;
  EngineDouble eng(o);
  // Registered before the announce: held, then filed in the declared namespace.
  RawClient early(eng.port());
  early.Send(Register("sandbox::run"));
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(eng.FunctionOwners().count({"default", "sandbox::run"}));
  early.Send(Announce("skiff-early", "skiff.early"));
  EXPECT_TRUE(WaitRegistered(eng, "skiff.early", "sandbox::run", early.worker_id()));
  EXPECT_EQ(eng.ConnectionNamespace(0), "skiff.early");
  // Never announced: filed under `default` once the grace is over.
  RawClient silent(eng.port());
  silent.Send(Register("legacy::fn"));
  EXPECT_TRUE(WaitRegistered(eng, "default", "legacy::fn", silent.worker_id()));
  EXPECT_EQ(eng.ConnectionNamespace(1), "default");
}

TEST(EngineDoubleTest, DisconnectStopsCallsRemovesFunctionsAndFreesTheLeases) {
  EngineDouble eng;
  auto host = Host(eng, "skiff-h1", "skiff.h1", {"sandbox::run", "sandbox::exec"});
  RawClient caller(eng.port());
  std::string inv = NewUuid();
  caller.Send(Call(inv, "sandbox::run", json::object(), "skiff.h1"));
  ASSERT_TRUE(host->WaitInvoke("sandbox::run"));
  host->Drop();
  auto r = caller.WaitResult(inv);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, json({{"type", "invocationresult"},
                      {"invocation_id", inv},
                      {"function_id", "sandbox::run"},
                      {"error", {{"code", "invocation_stopped"}, {"message", "Invocation stopped"}}}}));
  EXPECT_TRUE(WaitUnregistered(eng, "skiff.h1", "sandbox::run"));
  EXPECT_TRUE(WaitUnregistered(eng, "skiff.h1", "sandbox::exec"));
  std::string inv2 = NewUuid();
  caller.Send(Call(inv2, "sandbox::exec", json::object(), "skiff.h1"));
  auto r2 = caller.WaitResult(inv2);
  ASSERT_TRUE(r2);
  EXPECT_EQ((*r2)["error"]["code"], "function_not_found");

  // The restarted host takes its name and ids back and serves again.
  auto again = Host(eng, "skiff-h1", "skiff.h1", {"sandbox::run"});
  EXPECT_EQ(again->Count("registrationrejected"), 0u);
  std::string inv3 = NewUuid();
  caller.Send(Call(inv3, "sandbox::run", json::object(), "skiff.h1"));
  auto in = again->WaitInvoke("sandbox::run");
  ASSERT_TRUE(in);
  again->Send(Answer(*in, "ok"));
  auto r3 = caller.WaitResult(inv3);
  ASSERT_TRUE(r3);
  EXPECT_EQ((*r3)["result"], "ok");
}

TEST(EngineDoubleTest, VoidCallsGetNoResult) {
  EngineDouble eng;
  auto host = Host(eng, "skiff-h1", "skiff.h1", {"sandbox::kill"});
  RawClient caller(eng.port());
  // action void with an id, then no id at all: forwarded with fresh ids.
  std::string void_id = NewUuid();
  json v = Call(void_id, "sandbox::kill", {{"n", 1}}, "skiff.h1");
  v["action"] = {{"type", "void"}};
  caller.Send(v);
  json no_id = Call("", "sandbox::kill", {{"n", 2}}, "skiff.h1");
  no_id.erase("invocation_id");
  caller.Send(no_id);
  std::string inv = NewUuid();
  caller.Send(Call(inv, "sandbox::kill", {{"n", 3}}, "skiff.h1"));
  for (int n = 1; n <= 3; ++n) {
    auto in = host->WaitFor([&](const json& m) {
      return m.value("type", "") == "invokefunction" && m["data"].value("n", 0) == n;
    });
    ASSERT_TRUE(in) << n;
    if (n < 3) {
      EXPECT_NE((*in)["invocation_id"], void_id);
    }
    EXPECT_TRUE((*in)["invocation_id"].is_string());
    host->Send(Answer(*in, n));
  }
  // Results are relayed in order: once the third is back, the first two would be too.
  auto r = caller.WaitResult(inv);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["result"], 3);
  EXPECT_EQ(caller.Count("invocationresult"), 1u);
}

TEST(EngineDoubleTest, WorkersListShowsConnectedWorkers) {
  EngineDouble eng;
  auto a = Host(eng, "skiff-a", "skiff.a", {"sandbox::run", "sandbox::exec"});
  auto b = Host(eng, "skiff-b", "", {"sandbox::run"});
  RawClient nopid(eng.port());
  nopid.Send(Announce("no-pid", "skiff.c", nullptr));
  RawClient caller(eng.port());
  // Wait for no-pid's announce to be applied before listing.
  // The double handles frames one at a time: once no-pid's announce is
  // recorded, it is applied before the caller's list call.
  ASSERT_TRUE(eng.WaitFor([](const EngineDouble::Received& r) { return r.conn == 2; }, kWait));
  std::string inv = NewUuid();
  caller.Send(Call(inv, "engine::workers::list", json::object()));
  auto r = caller.WaitResult(inv);
  ASSERT_TRUE(r);
  ASSERT_TRUE((*r)["result"]["workers"].is_array()) << r->dump();
  std::map<std::string, json> by_id;
  for (auto& w : (*r)["result"]["workers"]) by_id[w["id"]] = w;
  ASSERT_EQ(by_id.size(), 2u) << r->dump();  // workers without a pid are not listed
  const json& wa = by_id.at(a->worker_id());
  EXPECT_EQ(wa["name"], "skiff-a");
  EXPECT_EQ(wa["namespace"], "skiff.a");
  EXPECT_EQ(wa["function_count"], 2);
  EXPECT_EQ(wa["status"], "connected");
  EXPECT_EQ(wa["runtime"], "test");
  EXPECT_FALSE(wa.contains("pid"));  // not a WorkerSummary field
  EXPECT_GT(wa["connected_at_ms"].get<uint64_t>(), 0u);
  const json& wb = by_id.at(b->worker_id());
  EXPECT_EQ(wb["namespace"], "default");
  EXPECT_EQ(wb["function_count"], 1);
}

TEST(EngineDoubleTest, StateSetGetDelete) {
  EngineDouble eng;
  RawClient caller(eng.port());
  auto call = [&](const std::string& fn, json data) {
    std::string inv = NewUuid();
    caller.Send(Call(inv, fn, std::move(data)));
    auto r = caller.WaitResult(inv);
    EXPECT_TRUE(r) << fn;
    return r ? *r : json();
  };
  json key{{"scope", "fleet"}, {"key", "h1"}};
  json set1 = key;
  set1["value"] = {{"url", "ws://h1"}};
  EXPECT_EQ(call("state::set", set1)["result"],
            json({{"old_value", nullptr}, {"new_value", {{"url", "ws://h1"}}}}));
  json set2 = key;
  set2["value"] = 2;
  EXPECT_EQ(call("state::set", set2)["result"],
            json({{"old_value", {{"url", "ws://h1"}}}, {"new_value", 2}}));
  EXPECT_EQ(call("state::get", key)["result"], 2);
  EXPECT_EQ(call("state::delete", key)["result"], 2);
  json gone = call("state::get", key);
  EXPECT_FALSE(gone.contains("result")) << gone.dump();
  EXPECT_FALSE(gone.contains("error")) << gone.dump();
  json bad = call("state::get", {{"scope", "fleet"}});
  EXPECT_EQ(bad["error"]["code"], "deserialization_error");
}

TEST(EngineDoubleTest, WorkersAvailableTriggerFiresOnConnectAndDisconnect) {
  EngineDouble eng;
  auto router = Host(eng, "router", "", {"fleet::on_worker"});
  router->Send({{"type", "registertrigger"},
                {"id", "t1"},
                {"trigger_type", "engine::workers-available"},
                {"function_id", "fleet::on_worker"},
                {"config", json::object()}});
  // Frames are handled in order: once this ping is answered the trigger is bound.
  router->Send({{"type", "ping"}});
  ASSERT_TRUE(router->WaitType("pong"));
  size_t from = router->Got().size();
  auto host = std::make_unique<RawClient>(eng.port());
  std::string id = host->worker_id();
  auto up = router->WaitFor(
      [&](const json& m) {
        return m.value("type", "") == "invokefunction" && m["data"].value("worker_id", "") == id;
      },
      from);
  ASSERT_TRUE(up);
  EXPECT_EQ((*up)["function_id"], "fleet::on_worker");
  EXPECT_EQ((*up)["data"]["event"], "worker_connected");
  host->Drop();
  auto down = router->WaitFor(
      [&](const json& m) {
        return m.value("type", "") == "invokefunction" &&
               m["data"].value("event", "") == "worker_disconnected";
      },
      from);
  ASSERT_TRUE(down);
  EXPECT_EQ((*down)["data"]["worker_id"], id);
}

TEST(EngineDoubleTest, OtelConnectionIsNotAWorker) {
  EngineDouble eng;
  auto router = Host(eng, "router", "", {"fleet::on_worker"});
  router->Send({{"type", "registertrigger"},
                {"id", "t1"},
                {"trigger_type", "engine::workers-available"},
                {"function_id", "fleet::on_worker"},
                {"config", json::object()}});
  router->Send({{"type", "ping"}});
  ASSERT_TRUE(router->WaitType("pong"));
  size_t from = router->Got().size();
  RawClient otel(eng.port(), "/otel");
  otel.Send(Register("otel::fn"));  // ignored: not a worker connection
  RawClient worker(eng.port());     // connected after it, so its event comes after any otel one
  auto up = router->WaitFor(
      [&](const json& m) {
        return m.value("type", "") == "invokefunction" &&
               m["data"].value("worker_id", "") == worker.worker_id();
      },
      from);
  ASSERT_TRUE(up);
  size_t events = 0;
  for (size_t i = from; i < router->Got().size(); ++i)
    events += router->Got()[i].value("type", "") == "invokefunction";
  EXPECT_EQ(events, 1u);
  EXPECT_EQ(otel.Count("workerregistered"), 0u);
  EXPECT_FALSE(eng.FunctionOwners().count({"default", "otel::fn"}));
}

TEST(EngineDoubleTest, Legacy022LastRegistrantWins) {
  EngineDoubleOptions o;
  o.legacy_0_22 = true;
  EngineDouble eng(o);
  auto a = Host(eng, "skiff-h1", "", {"sandbox::run"});
  // The namespace is ignored, so is the worker name, and nothing is refused.
  auto b = std::make_unique<RawClient>(eng.port());
  b->Send(Announce("skiff-h1", "skiff.b"));
  b->Send(Register("sandbox::run"));
  ASSERT_TRUE(WaitRegistered(eng, "default", "sandbox::run", b->worker_id()));
  EXPECT_EQ(b->Count("registrationrejected"), 0u);
  RawClient caller(eng.port());
  std::string inv = NewUuid();
  caller.Send(Call(inv, "sandbox::run", json::object(), "skiff.a"));
  auto in = b->WaitInvoke("sandbox::run");
  ASSERT_TRUE(in);
  b->Send(Answer(*in, "from-b"));
  auto r = caller.WaitResult(inv);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["result"], "from-b");
  EXPECT_EQ(a->Count("invokefunction"), 0u);
  // The replaced registrant leaving removes nothing; the owner leaving removes it.
  a->Drop();
  ASSERT_TRUE(a->WaitClosed());
  auto end = std::chrono::steady_clock::now() + kWait;
  while (eng.Connected(0) && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(eng.Connected(0));
  EXPECT_EQ(eng.FunctionOwners().at({"default", "sandbox::run"}), b->worker_id());
  b->Drop();
  EXPECT_TRUE(WaitUnregistered(eng, "default", "sandbox::run"));
  std::string inv2 = NewUuid();
  caller.Send(Call(inv2, "sandbox::run", json::object()));
  auto r2 = caller.WaitResult(inv2);
  ASSERT_TRUE(r2);
  EXPECT_EQ((*r2)["error"],
            json({{"code", "function_not_found"}, {"message", "Function sandbox::run not found"}}));
}

TEST(EngineDoubleTest, TlsServesWssToAClientThatTrustsTheCa) {
  testing_support::TempDir dir("engine-double");
  TestCa ca = MakeTestCa(dir.path());
  EngineDoubleOptions o;
  o.tls_cert_file = ca.server_cert_file;
  o.tls_key_file = ca.server_key_file;
  EngineDouble eng(o);
  EXPECT_TRUE(eng.tls());
  EXPECT_EQ(eng.url(), "wss://127.0.0.1:" + std::to_string(eng.port()));
  auto trust = Trusting(ca.ca_cert_file);
  ClientOptions wss;
  wss.tls = trust.get();

  RawClient host(eng.port(), wss);
  ASSERT_FALSE(host.worker_id().empty());
  host.Send(Announce("skiff-h1", "skiff.h1"));
  host.Send(Register("sandbox::list"));
  ASSERT_TRUE(WaitRegistered(eng, "skiff.h1", "sandbox::list", host.worker_id()));
  RawClient caller(eng.port(), wss);
  std::string inv = NewUuid();
  caller.Send(Call(inv, "sandbox::list", json::object(), "skiff.h1"));
  auto in = host.WaitInvoke("sandbox::list");
  ASSERT_TRUE(in);
  host.Send(Answer(*in, {{"sandboxes", json::array()}}));
  auto r = caller.WaitResult(inv);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["result"], json({{"sandboxes", json::array()}}));
}

TEST(EngineDoubleTest, TlsRefusesAClientThatDoesNotTrustTheCa) {
  testing_support::TempDir dir("engine-double"), other_dir("engine-double");
  TestCa ca = MakeTestCa(dir.path());
  TestCa other = MakeTestCa(other_dir.path());
  EngineDoubleOptions o;
  o.tls_cert_file = ca.server_cert_file;
  o.tls_key_file = ca.server_key_file;
  EngineDouble eng(o);

  // Trusting another CA: the server's certificate does not verify.
  auto wrong = Trusting(other.ca_cert_file);
  try {
    RawClient c(eng.port(), ClientOptions{"/", {}, wrong.get()});
    ADD_FAILURE() << "TLS handshake succeeded with an untrusted certificate";
  } catch (const boost::system::system_error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("certificate verify failed"));
  }
  // A plain ws:// client gets no WebSocket either.
  EXPECT_THROW(RawClient plain(eng.port()), boost::system::system_error);
  // The listener outlives both: a client trusting the CA is served.
  auto trust = Trusting(ca.ca_cert_file);
  RawClient ok(eng.port(), ClientOptions{"/", {}, trust.get()});
  EXPECT_FALSE(ok.worker_id().empty());
  ok.Send({{"type", "ping"}});
  EXPECT_TRUE(ok.WaitType("pong"));
}

TEST(EngineDoubleTest, RbacCallerReachesOnlyExposedDefaultFunctions) {
  EngineDouble eng(RbacOptions({"match(\"sandbox::*\")"}));
  ASSERT_NE(eng.rbac_port(), 0);
  EXPECT_EQ(eng.rbac_url(), "ws://127.0.0.1:" + std::to_string(eng.rbac_port()));
  auto auth = AuthWorker(eng, {{"good", json::object()}});
  auto lister = Host(eng, "lister", "", {"sandbox::list"});
  auto h1 = Host(eng, "skiff-h1", "skiff.h1", {"sandbox::list", "skiff::host::status"});

  RawClient caller(eng.rbac_port(), Bearer("good", "/?tenant=a&tenant=b&flag"));
  ASSERT_FALSE(caller.worker_id().empty());
  // The auth function was called as the engine calls it: the upgrade's
  // headers (names lowercased), the raw query as lists, the peer's address.
  auto asked = auth->WaitInvoke("auth::check");
  ASSERT_TRUE(asked);
  const json& input = (*asked)["data"];
  EXPECT_EQ(input["headers"]["authorization"], "Bearer good");
  EXPECT_EQ(input["headers"]["upgrade"], "websocket");
  EXPECT_EQ(input["headers"]["host"], "127.0.0.1");
  EXPECT_EQ(input["query_params"], json({{"tenant", {"a", "b"}}, {"flag", {""}}}));
  EXPECT_EQ(input["ip_address"], "127.0.0.1");
  EXPECT_EQ(input.size(), 3u) << input.dump();  // no _caller_worker_id: the engine is the caller

  // Exposed, in `default`: routed and answered.
  std::string inv = NewUuid();
  caller.Send(Call(inv, "sandbox::list", json::object()));
  auto in = lister->WaitInvoke("sandbox::list");
  ASSERT_TRUE(in);
  lister->Send(Answer(*in, "listed"));
  auto r = caller.WaitResult(inv);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["result"], "listed");

  // A rule without a namespace exposes nothing outside `default`: the same id
  // in skiff.h1, the host's status there, and in `default` (where nobody
  // serves it: FORBIDDEN, not function_not_found), and the engine's
  // discovery functions are all refused, never forwarded.
  const std::vector<std::pair<std::string, std::string>> refused = {{"sandbox::list", "skiff.h1"},
                                                                    {"skiff::host::status", "skiff.h1"},
                                                                    {"skiff::host::status", ""},
                                                                    {"engine::workers::list", ""}};
  for (const auto& [fn, ns] : refused) {
    std::string id = NewUuid();
    caller.Send(Call(id, fn, json::object(), ns));
    auto no = caller.WaitResult(id);
    ASSERT_TRUE(no) << fn << " in " << ns;
    EXPECT_EQ(*no, Forbidden(id, fn, "function '" + fn + "' not allowed (add to rbac.expose_functions)"));
  }
  EXPECT_EQ(h1->Count("invokefunction"), 0u);
  // The refusal carries the call's trace context back; a call without an id
  // is refused under a fresh one.
  json traced = Call(NewUuid(), "skiff::host::status", json::object(), "skiff.h1");
  traced["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  traced["baggage"] = "k=v";
  caller.Send(traced);
  auto t = caller.WaitResult(traced["invocation_id"]);
  ASSERT_TRUE(t);
  EXPECT_EQ((*t)["traceparent"], traced["traceparent"]);
  EXPECT_EQ((*t)["baggage"], "k=v");
  json anonymous = Call("", "skiff::host::status", json::object(), "skiff.h1");
  anonymous.erase("invocation_id");
  size_t from = caller.Got().size();
  caller.Send(anonymous);
  auto a = caller.WaitType("invocationresult", from);
  ASSERT_TRUE(a);
  EXPECT_EQ((*a)["error"]["code"], "FORBIDDEN");
  EXPECT_EQ((*a)["invocation_id"].get<std::string>().size(), 36u);

  // The main listener has no rbac block: from there the host answers.
  RawClient inside(eng.port());
  std::string inv2 = NewUuid();
  inside.Send(Call(inv2, "skiff::host::status", json::object(), "skiff.h1"));
  auto st = h1->WaitInvoke("skiff::host::status");
  ASSERT_TRUE(st);
  h1->Send(Answer(*st, "up"));
  auto r2 = inside.WaitResult(inv2);
  ASSERT_TRUE(r2);
  EXPECT_EQ((*r2)["result"], "up");
}

TEST(EngineDoubleTest, RbacExposeRulesNameANamespaceOrMatchMetadata) {
  EngineDouble eng(RbacOptions(
      {json{{"match", "sandbox::*"}, {"namespace", "skiff.h1"}}, json{{"metadata", {{"public", true}}}}}));
  auto auth = AuthWorker(eng, {{"good", json::object()}});
  auto lister = Host(eng, "lister", "", {"sandbox::list"});
  auto h1 = Host(eng, "skiff-h1", "skiff.h1", {"sandbox::list"});
  RawClient pub(eng.port());
  pub.Send(Announce("pub", ""));
  json open = Register("docs::read"), closed = Register("docs::write");
  open["metadata"] = {{"public", true}};
  closed["metadata"] = {{"public", false}};
  pub.Send(open);
  pub.Send(closed);
  ASSERT_TRUE(WaitRegistered(eng, "default", "docs::write", pub.worker_id()));
  pub.Serve([](const json& invoke) { return Answer(invoke, "doc"); });
  h1->Serve([](const json& invoke) { return Answer(invoke, "h1"); });

  RawClient caller(eng.rbac_port(), Bearer("good"));
  auto call = [&](const std::string& fn, const std::string& ns) {
    std::string id = NewUuid();
    caller.Send(Call(id, fn, json::object(), ns));
    auto r = caller.WaitResult(id);
    return r ? *r : json();
  };
  EXPECT_EQ(call("sandbox::list", "skiff.h1")["result"], "h1");
  EXPECT_EQ(call("sandbox::list", "")["error"]["code"], "FORBIDDEN");  // the rule names skiff.h1 only
  EXPECT_EQ(call("docs::read", "")["result"], "doc");
  EXPECT_EQ(call("docs::write", "")["error"]["code"], "FORBIDDEN");
  EXPECT_EQ(lister->Count("invokefunction"), 0u);
}

TEST(EngineDoubleTest, RbacRefusedCredentialGetsTheEnginesAuthError) {
  EngineDouble eng(RbacOptions({"match(\"sandbox::*\")"}));
  // Before anybody registered the auth function.
  {
    RawClient early(eng.rbac_port(), Bearer("good"));
    EXPECT_TRUE(early.worker_id().empty());
    auto e = early.WaitType("error");
    ASSERT_TRUE(e);
    EXPECT_EQ(*e, AuthError("Function auth::check not found in namespace default"));
    EXPECT_TRUE(early.WaitClosed());
    EXPECT_EQ(early.CloseReason().code, beast::websocket::close_code::none);  // Close(None)
  }
  auto auth = AuthWorker(eng, {{"good", json::object()},
                               {"empty", nullptr},
                               {"odd", {{"allowed_functions", "sandbox::list"}}},
                               {"text", "yes"}});
  const std::vector<std::pair<ClientOptions, std::string>> refused = {
      {Bearer("wrong"), "bad credential"},  // the auth function's own error message
      {ClientOptions{}, "bad credential"},  // no credential at all
      {Bearer("empty"), "auth function returned no result"},
      {Bearer("odd"), "invalid type: string \"sandbox::list\", expected a sequence"},
      {Bearer("text"), "invalid type: string \"yes\", expected struct AuthResult"},
      {Bearer("wrong", "/otel"), "bad credential"},  // telemetry connections are authenticated too
  };
  for (const auto& [how, message] : refused) {
    RawClient c(eng.rbac_port(), how);
    auto e = c.WaitType("error");
    ASSERT_TRUE(e) << message;
    EXPECT_EQ(*e, AuthError(message));
    EXPECT_TRUE(c.WaitClosed()) << message;
    EXPECT_EQ(c.Count("workerregistered"), 0u) << message;
  }
  // Refused connections never became workers: only the accepted one is listed.
  RawClient good(eng.rbac_port(), Bearer("good"));
  ASSERT_FALSE(good.worker_id().empty());
  good.Send(Announce("good", ""));
  RawClient inside(eng.port());
  ASSERT_TRUE(
      eng.WaitFor([&](const EngineDouble::Received& r) { return r.msg == Announce("good", ""); }, kWait));
  std::string inv = NewUuid();
  inside.Send(Call(inv, "engine::workers::list", json::object()));
  auto r = inside.WaitResult(inv);
  ASSERT_TRUE(r);
  std::set<std::string> names;
  for (auto& w : (*r)["result"]["workers"]) names.insert(w["name"]);
  EXPECT_EQ(names, (std::set<std::string>{"auth", "good"}));

  // An auth function whose worker goes away before answering: the call is
  // stopped, and so is the connection.
  EngineDouble eng2(RbacOptions({}));
  auto silent = Host(eng2, "auth", "", {"auth::check"});
  auto connecting = std::async(std::launch::async,
                               [&] { return std::make_unique<RawClient>(eng2.rbac_port(), Bearer("good")); });
  ASSERT_TRUE(silent->WaitInvoke("auth::check"));
  silent->Drop();
  auto c = connecting.get();
  auto e = c->WaitType("error");
  ASSERT_TRUE(e);
  EXPECT_EQ(*e, AuthError("Invocation stopped"));
}

TEST(EngineDoubleTest, RbacSessionGrantsAndDenials) {
  EngineDouble eng(RbacOptions({"match(\"sandbox::*\")"}));
  auto auth =
      AuthWorker(eng, {{"ops",
                        {{"namespaces", {{"skiff.h1", {"match(\"sandbox::*\")", "skiff::host::status"}}}},
                         {"forbidden_functions", {"sandbox::kill"}},
                         {"allowed_functions", {"state::get"}}}}});
  auto lister = Host(eng, "lister", "", {"sandbox::kill"});
  auto h1 = Host(eng, "skiff-h1", "skiff.h1", {"sandbox::list", "skiff::host::status", "sandbox::kill"});
  h1->Serve([](const json& invoke) { return Answer(invoke, invoke["function_id"]); });
  RawClient caller(eng.rbac_port(), Bearer("ops"));
  auto call = [&](const std::string& fn, const std::string& ns) {
    std::string id = NewUuid();
    caller.Send(Call(id, fn, {{"scope", "s"}, {"key", "k"}}, ns));
    auto r = caller.WaitResult(id);
    EXPECT_TRUE(r) << fn;
    return r ? *r : json();
  };
  // Grants of the namespace, by pattern and by id.
  EXPECT_EQ(call("sandbox::list", "skiff.h1")["result"], "sandbox::list");
  EXPECT_EQ(call("skiff::host::status", "skiff.h1")["result"], "skiff::host::status");
  // A denial holds in every namespace and wins over the grants and the rules.
  for (const std::string ns : {"skiff.h1", ""}) {
    json r = call("sandbox::kill", ns);
    EXPECT_EQ(r["error"], json({{"code", "FORBIDDEN"},
                                {"message",
                                 "function 'sandbox::kill' not allowed (remove from "
                                 "rbac.forbidden_functions)"}}))
        << ns;
  }
  // An unscoped grant answers in `default` only.
  json got = call("state::get", "");
  EXPECT_FALSE(got.contains("error")) << got.dump();
  EXPECT_EQ(call("state::get", "skiff.h1")["error"]["code"], "FORBIDDEN");
  EXPECT_EQ(lister->Count("invokefunction"), 0u);
}

TEST(EngineDoubleTest, RbacRegistrationDeniedWhereTheEngineDeniesIt) {
  EngineDouble eng(RbacOptions({"match(\"sandbox::*\")"}));
  auto auth = AuthWorker(eng, {{"scoped", {{"namespaces", {{"skiff.h1", json::array()}}}}},
                               {"readonly", {{"allow_function_registration", false}}},
                               {"tenant", {{"function_registration_prefix", "tenant-a"}}},
                               {"cron-only", {{"allowed_trigger_types", {"cron"}}}}});

  // A scoped session declares only its own namespaces: the SDK's void
  // announce is refused under a fresh id, and its registration waits.
  RawClient scoped(eng.rbac_port(), Bearer("scoped"));
  scoped.Send(Register("sandbox::run"));
  scoped.Send(Announce("skiff-h2", "skiff.h2"));
  auto no = scoped.WaitType("invocationresult");
  ASSERT_TRUE(no);
  EXPECT_EQ((*no)["function_id"], "engine::workers::register");
  EXPECT_EQ((*no)["error"], json({{"code", "FORBIDDEN"},
                                  {"message",
                                   "namespace 'skiff.h2' not allowed for this session (permitted: "
                                   "skiff.h1)"}}));
  EXPECT_TRUE((*no)["invocation_id"].is_string());
  scoped.Send(Announce("skiff-h1", "skiff.h1"));
  EXPECT_TRUE(WaitRegistered(eng, "skiff.h1", "sandbox::run", scoped.worker_id()));
  EXPECT_FALSE(eng.FunctionOwners().count({"skiff.h2", "sandbox::run"}));
  // A trigger whose target the session may not call is refused.
  scoped.Send({{"type", "registertrigger"},
               {"id", "t1"},
               {"trigger_type", "engine::workers-available"},
               {"function_id", "fleet::on_worker"},
               {"config", json::object()}});
  auto tr = scoped.WaitType("triggerregistrationresult");
  ASSERT_TRUE(tr);
  EXPECT_EQ(*tr, json({{"type", "triggerregistrationresult"},
                       {"id", "t1"},
                       {"trigger_type", "engine::workers-available"},
                       {"function_id", "fleet::on_worker"},
                       {"error",
                        {{"code", "FORBIDDEN"},
                         {"message", "function 'fleet::on_worker' not allowed in namespace 'default'"}}}}));

  // allow_function_registration false: registrations are dropped unanswered.
  RawClient ro(eng.rbac_port(), Bearer("readonly"));
  ro.Send(Announce("ro", ""));
  ro.Send(Register("sandbox::ro"));
  ro.Send({{"type", "ping"}});
  ASSERT_TRUE(ro.WaitType("pong"));  // frames are handled in order: the registration was seen
  EXPECT_FALSE(eng.FunctionOwners().count({"default", "sandbox::ro"}));
  EXPECT_EQ(ro.Count("registrationrejected"), 0u);

  // function_registration_prefix: registered as tenant-a::echo, invoked as
  // `echo`, unregistered by its own id.
  RawClient tenant(eng.rbac_port(), Bearer("tenant"));
  tenant.Send(Announce("tenant", ""));
  tenant.Send(Register("echo"));
  ASSERT_TRUE(WaitRegistered(eng, "default", "tenant-a::echo", tenant.worker_id()));
  RawClient inside(eng.port());
  std::string inv = NewUuid();
  inside.Send(Call(inv, "tenant-a::echo", json::object()));
  auto in = tenant.WaitFor([](const json& m) { return m.value("type", "") == "invokefunction"; });
  ASSERT_TRUE(in);
  EXPECT_EQ((*in)["function_id"], "echo");
  tenant.Send(Answer(*in, "hi"));
  auto r = inside.WaitResult(inv);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["function_id"], "tenant-a::echo");
  EXPECT_EQ((*r)["result"], "hi");
  tenant.Send({{"type", "unregisterfunction"}, {"id", "echo"}});
  EXPECT_TRUE(WaitUnregistered(eng, "default", "tenant-a::echo"));

  // allowed_trigger_types: another type is dropped unanswered.
  RawClient cron(eng.rbac_port(), Bearer("cron-only"));
  cron.Send(Announce("cron", ""));
  cron.Send(Register("sandbox::on_worker"));
  cron.Send({{"type", "registertrigger"},
             {"id", "t2"},
             {"trigger_type", "engine::workers-available"},
             {"function_id", "sandbox::on_worker"},
             {"config", json::object()}});
  cron.Send({{"type", "ping"}});
  ASSERT_TRUE(cron.WaitType("pong"));
  size_t from = cron.Got().size();
  RawClient newcomer(eng.port());  // would fire the trigger, had it been bound
  newcomer.Send({{"type", "ping"}});
  ASSERT_TRUE(newcomer.WaitType("pong"));
  cron.Send({{"type", "ping"}});
  ASSERT_TRUE(cron.WaitType("pong", from));
  EXPECT_EQ(cron.Count("invokefunction"), 0u);
  EXPECT_EQ(cron.Count("triggerregistrationresult"), 0u);
}

// --- Data channels: engine::channels::create and /ws/channels/{id}.

// Calls engine::channels::create from `caller` with `data`; the whole answer.
json CreateChannelAnswer(RawClient& caller, json data) {
  std::string inv = NewUuid();
  caller.Send(Call(inv, "engine::channels::create", std::move(data)));
  auto r = caller.WaitResult(inv);
  return r ? *r : json();
}
ChannelRefs CreateChannel(RawClient& caller, json data = json::object()) {
  json r = CreateChannelAnswer(caller, std::move(data));
  EXPECT_TRUE(r.contains("result")) << r.dump();
  if (!r.contains("result")) return {};
  return {r["result"]["writer"], r["result"]["reader"]};
}

TEST(EngineDoubleTest, ChannelsCreateAnswersAWriterAndAReaderRef) {
  EngineDouble eng;
  RawClient caller(eng.port());
  json r = CreateChannelAnswer(caller, json::object());
  ASSERT_TRUE(r.contains("result")) << r.dump();
  const json& w = r["result"]["writer"];
  const json& rd = r["result"]["reader"];
  // protocol.rs StreamChannelRef: one id and one key, the direction each.
  EXPECT_EQ(r["result"].size(), 2u);
  EXPECT_EQ(w.size(), 3u);
  EXPECT_EQ(w["direction"], "write");
  EXPECT_EQ(rd["direction"], "read");
  EXPECT_EQ(w["channel_id"], rd["channel_id"]);
  EXPECT_EQ(w["access_key"], rd["access_key"]);
  EXPECT_TRUE(CanonicalUuid(w["channel_id"].get<std::string>()));
  EXPECT_TRUE(CanonicalUuid(w["access_key"].get<std::string>()));
  EXPECT_NE(w["channel_id"], w["access_key"]);
  // Any size is taken (clamped to 1..1024); a size that is not a usize is not.
  for (json size : {json(0), json(4), json(100000), json(nullptr)}) {
    EXPECT_TRUE(CreateChannelAnswer(caller, {{"buffer_size", size}}).contains("result")) << size;
  }
  EXPECT_EQ(CreateChannelAnswer(caller, {{"buffer_size", -1}})["error"],
            json({{"code", "deserialization_error"},
                  {"message",
                   "Failed to deserialize input for engine::channels::create: invalid value: integer `-1`, "
                   "expected usize"}}));
  EXPECT_EQ(CreateChannelAnswer(caller, {{"buffer_size", "8"}})["error"]["message"],
            "Failed to deserialize input for engine::channels::create: invalid type: string \"8\", expected "
            "usize");
  EXPECT_EQ(CreateChannelAnswer(caller, nullptr)["error"]["message"],
            "Failed to deserialize input for engine::channels::create: invalid type: null, expected struct "
            "CreateChannelInput");
  EXPECT_EQ(eng.ChannelCount(), 5u);
}

TEST(EngineDoubleTest, ChannelWriterFirstThenReaderGetsEverythingThenClose) {
  EngineDouble eng;
  RawClient caller(eng.port());
  ChannelRefs ch = CreateChannel(caller);
  ChannelClient writer(eng.port(), ch.writer_target());
  ASSERT_EQ(writer.status(), 101);
  ASSERT_TRUE(writer.Text("hello"));
  ASSERT_TRUE(writer.Binary(std::string("\x00\x01\xff\x80", 4)));
  ASSERT_TRUE(writer.Text("bye"));
  ASSERT_TRUE(writer.Close());
  // The writer's Close is answered; what it sent waits for the reader.
  auto echo = writer.Next();
  ASSERT_TRUE(echo);
  EXPECT_EQ(echo->opcode, 8);
  EXPECT_FALSE(writer.Next());

  ChannelClient reader(eng.port(), ch.reader_target());
  ASSERT_EQ(reader.status(), 101);
  auto f1 = reader.Next(), f2 = reader.Next(), f3 = reader.Next();
  ASSERT_TRUE(f1 && f2 && f3);
  EXPECT_EQ(f1->opcode, 1);
  EXPECT_EQ(f1->data, "hello");
  EXPECT_EQ(f2->opcode, 2);
  EXPECT_EQ(f2->data, std::string("\x00\x01\xff\x80", 4));
  EXPECT_EQ(f3->opcode, 1);
  EXPECT_EQ(f3->data, "bye");
  EXPECT_TRUE(f1->fin && f2->fin && f3->fin);
  EXPECT_TRUE(reader.ClosedWithoutCode());

  // Both sides were taken: the channel stays, and asking for it again is
  // upgraded, then closed.
  EXPECT_EQ(eng.ChannelCount(), 1u);
  ChannelClient again(eng.port(), ch.reader_target());
  ASSERT_EQ(again.status(), 101);
  EXPECT_TRUE(again.ClosedWithoutCode());
}

TEST(EngineDoubleTest, ChannelReaderFirstThenWriterStreamsInOrder) {
  EngineDouble eng;
  RawClient caller(eng.port());
  ChannelRefs ch = CreateChannel(caller);
  ChannelClient reader(eng.port(), ch.reader_target());
  ASSERT_EQ(reader.status(), 101);
  ChannelClient writer(eng.port(), ch.writer_target());
  ASSERT_EQ(writer.status(), 101);
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(i % 2 ? writer.Binary("b" + std::to_string(i)) : writer.Text("t" + std::to_string(i)));
  }
  for (int i = 0; i < 100; ++i) {
    auto f = reader.Next();
    ASSERT_TRUE(f) << i;
    EXPECT_EQ(f->opcode, i % 2 ? 2 : 1) << i;
    EXPECT_EQ(f->data, (i % 2 ? "b" : "t") + std::to_string(i));
  }
  ASSERT_TRUE(writer.Close());
  EXPECT_TRUE(reader.ClosedWithoutCode());
}

TEST(EngineDoubleTest, ChannelBinaryRoundTripsExactlyUnderBackpressure) {
  EngineDouble eng;
  RawClient caller(eng.port());
  ChannelRefs ch = CreateChannel(caller, {{"buffer_size", 4}});
  // 3 MiB in 64 KiB frames through a queue of 4 frames, to a reader with a
  // small receive buffer attaching after the writer started.
  constexpr size_t kFrame = 64 * 1024, kFrames = 48;
  std::string data(kFrame * kFrames, '\0');
  uint32_t x = 12345;
  for (auto& c : data) {
    x = x * 1103515245 + 12345;
    c = static_cast<char>(x >> 16);
  }
  ChannelClient writer(eng.port(), ch.writer_target());
  ASSERT_EQ(writer.status(), 101);
  std::atomic<size_t> sent{0};
  std::optional<ChannelClient::Frame> echo;
  std::thread w([&] {
    for (size_t i = 0; i < kFrames; ++i) {
      if (!writer.Binary(std::string_view(data).substr(i * kFrame, kFrame))) return;
      ++sent;
    }
    if (writer.Close()) echo = writer.Next();
  });
  auto end = std::chrono::steady_clock::now() + kWait;
  while (sent < 8 && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(1ms);
  ChannelClient reader(eng.port(), ch.reader_target(), 16 * 1024);
  ASSERT_EQ(reader.status(), 101);
  std::string got;
  size_t frames = 0;
  for (;;) {
    auto f = reader.Next();
    if (!f || f->opcode == 8) {
      EXPECT_TRUE(f && f->data.empty());
      break;
    }
    EXPECT_EQ(f->opcode, 2);
    EXPECT_TRUE(f->fin);
    EXPECT_EQ(f->data.size(), kFrame);
    got += f->data;
    ++frames;
  }
  w.join();
  EXPECT_EQ(sent, kFrames);
  EXPECT_EQ(frames, kFrames);
  EXPECT_TRUE(got == data) << "bytes lost or reordered";
  ASSERT_TRUE(echo);
  EXPECT_EQ(echo->opcode, 8);
}

TEST(EngineDoubleTest, ChannelRefusalsAreTheEnginesHttpAnswers) {
  EngineDouble eng;
  RawClient caller(eng.port());
  ChannelRefs ch = CreateChannel(caller);
  const std::string id = ch.writer["channel_id"];
  const std::string key = ch.writer["access_key"];
  auto refused = [&](const std::string& raw) { return ChannelClient(eng.port()).Request(raw); };

  // Unknown id or wrong key: 404 before any upgrade.
  for (const std::string& target : {"/ws/channels/" + id + "?key=wrong&dir=write",
                                    "/ws/channels/" + NewUuid() + "?key=" + key + "&dir=read"}) {
    auto r = refused(ChannelClient::Upgrade(target));
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_EQ(r.body, "Channel not found");
    EXPECT_EQ(r.headers["content-type"], "text/plain; charset=utf-8");
  }
  // axum's Query extractor: 400 with serde's error.
  const std::string base = "/ws/channels/" + id;
  EXPECT_EQ(refused(ChannelClient::Upgrade(base)).body,
            "Failed to deserialize query string: missing field `key`");
  EXPECT_EQ(refused(ChannelClient::Upgrade(base + "?key=" + key)).body,
            "Failed to deserialize query string: missing field `dir`");
  auto bad_dir = refused(ChannelClient::Upgrade(base + "?key=" + key + "&dir=sideways"));
  EXPECT_EQ(bad_dir.status, 400);
  EXPECT_EQ(
      bad_dir.body,
      "Failed to deserialize query string: dir: unknown variant `sideways`, expected `read` or `write`");
  EXPECT_EQ(refused(ChannelClient::Upgrade(base + "?key=a&key=b&dir=read")).body,
            "Failed to deserialize query string: duplicate field `key`");
  // The query is checked before the channel: a bad one is a 400 even for an unknown id.
  EXPECT_EQ(refused(ChannelClient::Upgrade("/ws/channels/nope?dir=read")).status, 400);
  // axum's WebSocketUpgrade extractor, then the router.
  auto plain = refused("GET " + base + "?key=" + key + "&dir=read HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(plain.status, 400);
  EXPECT_EQ(plain.body, "Connection header did not include 'upgrade'");
  auto post =
      refused("POST " + base + "?key=" + key + "&dir=read HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.headers["allow"], "GET,HEAD");
  EXPECT_EQ(refused(ChannelClient::Upgrade("/ws/channels/")).status, 404);

  // hyper keeps the connection after a refusal: the next request on it is served.
  ChannelClient c(eng.port());
  EXPECT_EQ(c.Request(ChannelClient::Upgrade(base + "?key=wrong&dir=read")).status, 404);
  EXPECT_EQ(c.Request(ChannelClient::Upgrade(ch.reader_target())).status, 101);
  // The key is the channel's, not a side's: the writer's ref asks for the
  // read side just as well (taken now: upgraded, then closed).
  ChannelClient other(eng.port(), ChannelRefs::Target(ch.writer, "read"));
  EXPECT_EQ(other.status(), 101);
  EXPECT_TRUE(other.ClosedWithoutCode());
}

TEST(EngineDoubleTest, ChannelSecondWriterOrReaderIsClosedAtOnce) {
  EngineDouble eng;
  RawClient caller(eng.port());
  ChannelRefs ch = CreateChannel(caller);
  ChannelClient writer(eng.port(), ch.writer_target());
  ChannelClient reader(eng.port(), ch.reader_target());
  ASSERT_EQ(writer.status(), 101);
  ASSERT_EQ(reader.status(), 101);
  ChannelClient writer2(eng.port(), ch.writer_target());
  EXPECT_EQ(writer2.status(), 101);
  EXPECT_TRUE(writer2.ClosedWithoutCode());
  ChannelClient reader2(eng.port(), ch.reader_target());
  EXPECT_EQ(reader2.status(), 101);
  EXPECT_TRUE(reader2.ClosedWithoutCode());
  // The first pair is untouched.
  ASSERT_TRUE(writer.Text("still here"));
  auto f = reader.Next();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->data, "still here");
}

// ws_handler.rs ends the writer the same way whether it sent Close or just
// went: the reader gets what was queued, then the same Close.
TEST(EngineDoubleTest, ChannelReaderCannotTellAWriterThatVanishedFromOneThatClosed) {
  EngineDouble eng;
  RawClient caller(eng.port());
  ChannelRefs ch = CreateChannel(caller);
  ChannelClient reader(eng.port(), ch.reader_target());
  ChannelClient writer(eng.port(), ch.writer_target());
  ASSERT_EQ(reader.status(), 101);
  ASSERT_EQ(writer.status(), 101);
  for (const char* s : {"one", "two", "three"}) ASSERT_TRUE(writer.Text(s));
  writer.Drop();  // no Close frame
  for (const char* s : {"one", "two", "three"}) {
    auto f = reader.Next();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->data, s);
  }
  EXPECT_TRUE(reader.ClosedWithoutCode());
}

// The reader's socket is never read: a reader that leaves is noticed when a
// send to it fails; then the writer's next send fails and the writer is
// dropped, without a Close.
TEST(EngineDoubleTest, ChannelReaderGoneDropsTheWriterOnItsNextSend) {
  EngineDouble eng;
  RawClient caller(eng.port());
  ChannelRefs ch = CreateChannel(caller);
  ChannelClient reader(eng.port(), ch.reader_target());
  ChannelClient writer(eng.port(), ch.writer_target());
  ASSERT_EQ(reader.status(), 101);
  ASSERT_EQ(writer.status(), 101);
  ASSERT_TRUE(writer.Text("first"));
  auto f = reader.Next();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->data, "first");
  reader.Drop();
  bool ended = false;
  for (int i = 0; i < 400 && !ended; ++i) {
    if (!writer.Text("frame " + std::to_string(i)) || writer.Readable(50ms)) ended = true;
  }
  ASSERT_TRUE(ended) << "the writer was never dropped";
  EXPECT_FALSE(writer.Next()) << "the writer got a frame, not just the end of the connection";
}

TEST(EngineDoubleTest, ChannelsOutliveTheWorkerThatCreatedThem) {
  EngineDouble eng;
  auto creator = std::make_unique<RawClient>(eng.port());
  ChannelRefs ch = CreateChannel(*creator);
  const int index = std::stoi(creator->worker_id().substr(std::string("worker-").size()));
  creator->Drop();
  auto end = std::chrono::steady_clock::now() + kWait;
  while (eng.Connected(index) && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(10ms);
  ASSERT_FALSE(eng.Connected(index));
  creator.reset();
  EXPECT_EQ(eng.ChannelCount(), 1u);
  ChannelClient writer(eng.port(), ch.writer_target());
  ChannelClient reader(eng.port(), ch.reader_target());
  ASSERT_EQ(writer.status(), 101);
  ASSERT_EQ(reader.status(), 101);
  ASSERT_TRUE(writer.Text("orphan"));
  auto f = reader.Next();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->data, "orphan");
}

TEST(EngineDoubleTest, ChannelsWithASideNobodyTookAreSweptAfterTheTtl) {
  EngineDoubleOptions o;
  o.channel_ttl = 200ms;
  o.channel_sweep_interval = 20ms;
  EngineDouble eng(o);
  RawClient caller(eng.port());
  // Oldest first: a writer alone, nobody, both sides, a reader alone.
  ChannelRefs writer_only = CreateChannel(caller);
  ChannelRefs nobody = CreateChannel(caller);
  ChannelRefs both = CreateChannel(caller);
  ChannelRefs reader_only = CreateChannel(caller);
  ChannelClient lone_writer(eng.port(), writer_only.writer_target());
  ChannelClient both_writer(eng.port(), both.writer_target());
  ChannelClient both_reader(eng.port(), both.reader_target());
  ChannelClient lone_reader(eng.port(), reader_only.reader_target());
  for (auto* c : {&lone_writer, &both_writer, &both_reader, &lone_reader}) ASSERT_EQ(c->status(), 101);

  // The newest is swept: its writer end goes, so its reader gets Close.
  EXPECT_TRUE(lone_reader.ClosedWithoutCode());
  // The older ones went in the same sweep or before: nobody's is gone (404)…
  EXPECT_EQ(ChannelClient(eng.port(), nobody.reader_target()).status(), 404);
  // …the lone writer's next send fails and it is dropped, without a Close…
  lone_writer.Text("anyone?");
  EXPECT_FALSE(lone_writer.Next());
  // …and the channel whose both sides were taken stays and still works.
  EXPECT_EQ(eng.ChannelCount(), 1u);
  ASSERT_TRUE(both_writer.Text("kept"));
  auto f = both_reader.Next();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->data, "kept");
}

TEST(EngineDoubleTest, ChannelsOnTheRbacListenerNeedNoAuthAndNoExposeRule) {
  EngineDouble eng(RbacOptions({}));  // nothing exposed
  auto auth = AuthWorker(eng, {{"good", json::object()}});
  RawClient caller(eng.rbac_port(), Bearer("good"));
  ASSERT_FALSE(caller.worker_id().empty());
  // The gate is on: a function outside the carve-out is forbidden…
  std::string inv = NewUuid();
  caller.Send(Call(inv, "state::get", {{"scope", "s"}, {"key", "k"}}));
  auto r = caller.WaitResult(inv);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["error"]["code"], "FORBIDDEN");
  // …engine::channels::create is not.
  ChannelRefs ch = CreateChannel(caller);
  ASSERT_TRUE(ch.writer.is_object());
  const size_t auth_calls = auth->Count("invokefunction");

  // The channel endpoint on the RBAC listener, with no credential at all.
  ChannelClient writer(eng.rbac_port(), ch.writer_target());
  ChannelClient reader(eng.rbac_port(), ch.reader_target());
  ASSERT_EQ(writer.status(), 101);
  ASSERT_EQ(reader.status(), 101);
  ASSERT_TRUE(writer.Binary("through rbac"));
  ASSERT_TRUE(writer.Close());
  auto f = reader.Next();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->opcode, 2);
  EXPECT_EQ(f->data, "through rbac");
  EXPECT_TRUE(reader.ClosedWithoutCode());
  EXPECT_EQ(auth->Count("invokefunction"), auth_calls)
      << "the auth function was asked about a channel socket";
  // A wrong key there is the same 404.
  const std::string wrong = "/ws/channels/" + ch.reader["channel_id"].get<std::string>() +
                            "?key=" + ch.reader["access_key"].get<std::string>() + "x&dir=read";
  EXPECT_EQ(ChannelClient(eng.rbac_port(), wrong).status(), 404);
}

TEST(EngineDoubleTest, ChannelsOverWss) {
  testing_support::TempDir dir("engine-double");
  TestCa ca = MakeTestCa(dir.path());
  EngineDoubleOptions o;
  o.tls_cert_file = ca.server_cert_file;
  o.tls_key_file = ca.server_key_file;
  EngineDouble eng(o);
  auto trust = Trusting(ca.ca_cert_file);
  RawClient caller(eng.port(), ClientOptions{"/", {}, trust.get()});
  ChannelRefs ch = CreateChannel(caller);

  using TlsWs = beast::websocket::stream<beast::ssl_stream<beast::tcp_stream>>;
  net::io_context ioc;
  auto open = [&](const std::string& target) {
    auto ws = std::make_unique<TlsWs>(ioc, *trust);
    beast::get_lowest_layer(*ws).connect({net::ip::make_address("127.0.0.1"), eng.port()});
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ws->next_layer().native_handle()), "127.0.0.1");
    ws->next_layer().set_verify_mode(net::ssl::verify_peer);
    ws->next_layer().handshake(net::ssl::stream_base::client);
    ws->handshake("127.0.0.1", target);
    return ws;
  };
  auto writer = open(ch.writer_target());
  auto reader = open(ch.reader_target());
  writer->binary(true);
  writer->write(net::buffer(std::string("over tls")));
  writer->close(beast::websocket::close_code::normal);
  beast::flat_buffer buf;
  reader->read(buf);
  EXPECT_TRUE(reader->got_binary());
  EXPECT_EQ(beast::buffers_to_string(buf.data()), "over tls");
  buf.consume(buf.size());
  beast::error_code ec;
  reader->read(buf, ec);
  EXPECT_TRUE(ec) << "the reader's socket stayed open after the writer closed";
}

// The RBAC rules themselves (engine_double/rbac.h), on the cases the
// engine's own tests pin (rbac_config.rs `mod tests`).
TEST(EngineDoubleRbacRules, WildcardsAndMatchPatterns) {
  using engine_double::ParseMatchPattern;
  using engine_double::WildcardMatch;
  EXPECT_TRUE(WildcardMatch("hello::world", "hello::world"));
  EXPECT_FALSE(WildcardMatch("hello::world", "hello::worl"));
  EXPECT_FALSE(WildcardMatch("hello::world", "hello::worldx"));
  EXPECT_TRUE(WildcardMatch("engine::*", "engine::bar::baz"));
  EXPECT_FALSE(WildcardMatch("engine::*", "other::foo"));
  EXPECT_TRUE(WildcardMatch("*::public", "x::y::public"));
  EXPECT_FALSE(WildcardMatch("*::public", "api::private"));
  EXPECT_TRUE(WildcardMatch("*public*", "mypublicfn"));
  EXPECT_FALSE(WildcardMatch("*public*", "private"));
  EXPECT_TRUE(WildcardMatch("*", ""));
  EXPECT_TRUE(WildcardMatch("api::*::read", "api::orders::read"));
  EXPECT_FALSE(WildcardMatch("api::*::read", "api::users::write"));
  EXPECT_EQ(ParseMatchPattern("match(\"engine::*\")"), "engine::*");
  EXPECT_EQ(ParseMatchPattern("  match('engine::*') "), "engine::*");
  EXPECT_EQ(ParseMatchPattern("engine::*"), std::nullopt);
  EXPECT_EQ(ParseMatchPattern("match(engine::*)"), std::nullopt);
}

TEST(EngineDoubleRbacRules, ExposeFiltersParseAsTheEngineParsesThem) {
  using engine_double::FunctionFilter;
  auto meta = FunctionFilter::Parse(json{{"metadata", {{"public", true}, {"scope", "match(\"team-*\")"}}}});
  json ok{{"public", true}, {"scope", "team-alpha"}};
  EXPECT_TRUE(meta.Matches("svc::get", "default", &ok));
  json wrong{{"public", false}, {"scope", "team-alpha"}};
  EXPECT_FALSE(meta.Matches("svc::get", "default", &wrong));
  EXPECT_FALSE(meta.Matches("svc::get", "default", nullptr));
  EXPECT_FALSE(meta.Matches("svc::get", "team", &ok));  // no namespace: `default` only
  auto scoped = FunctionFilter::Parse(json{{"match", "svc::*"}, {"namespace", "orders"}});
  EXPECT_TRUE(scoped.Matches("svc::get", "orders", nullptr));
  EXPECT_FALSE(scoped.Matches("svc::get", "default", nullptr));
  auto message = [](const json& rule) {
    try {
      FunctionFilter::Parse(rule);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("parsed");
  };
  EXPECT_EQ(message("svc::*"), "expected match(\"pattern\"), got: svc::*");
  EXPECT_EQ(
      message(json{{"match", "a"}, {"namesapce", "x"}}),
      "unknown key 'namesapce' in expose_functions filter; expected 'match', 'metadata', or 'namespace'");
  EXPECT_EQ(message(json{{"match", "a"}, {"metadata", {{"k", 1}}}}),
            "a filter has either a 'match' or a 'metadata' key, not both");
  EXPECT_EQ(message(json{{"namespace", "x"}}), "expected a 'match' or 'metadata' key with filter conditions");
}

TEST(EngineDoubleRbacRules, IsFunctionAllowedInTheEnginesOrder) {
  using engine_double::IsFunctionAllowed;
  engine_double::Session s;
  auto rbac = std::make_shared<engine_double::RbacConfig>();
  rbac->expose_functions.push_back(engine_double::FunctionFilter::Parse("match(\"nothing::matches\")"));
  s.rbac = rbac;
  EXPECT_FALSE(IsFunctionAllowed("engine::workers::list", "default", s, nullptr));   // discovery is gated
  EXPECT_TRUE(IsFunctionAllowed("engine::channels::create", "orders", s, nullptr));  // infrastructure
  s.namespaces["orders"] = {"svc::*"};
  EXPECT_TRUE(IsFunctionAllowed("svc::get", "orders", s, nullptr));
  EXPECT_FALSE(IsFunctionAllowed("svc::get", "analytics", s, nullptr));
  EXPECT_FALSE(IsFunctionAllowed("other::get", "orders", s, nullptr));
  s.allowed_functions = {"api::get"};
  EXPECT_TRUE(IsFunctionAllowed("api::get", "default", s, nullptr));
  EXPECT_FALSE(IsFunctionAllowed("api::get", "orders", s, nullptr));
  s.forbidden_functions = {"svc::get", "engine::workers::register"};
  EXPECT_FALSE(IsFunctionAllowed("svc::get", "orders", s, nullptr));
  EXPECT_FALSE(IsFunctionAllowed("engine::workers::register", "default", s, nullptr));
  engine_double::Session open;  // a listener without an rbac block
  EXPECT_TRUE(IsFunctionAllowed("internal::private", "default", open, nullptr));
}

}  // namespace
}  // namespace skiff::e2e
