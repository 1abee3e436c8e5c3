// The engine double (engine_double.h) against raw WebSocket clients: each
// behaviour a skiff fleet relies on, as the iii engine implements it —
// namespaces keeping the same ids apart, both registration conflicts, routing
// with a namespace and the result relayed back, function_not_found,
// invocation_stopped and removal when a worker goes, re-registration by a
// restarted host, engine::workers::list, state, the workers-available
// trigger, and the 0.22 last-registrant-wins switch. No daemon involved.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

// Boost.Asio's headers use std::exchange without including <utility>.
#include <utility>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/text.h"
#include "engine_double.h"
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

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/engine-double-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

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
  TempDir dir;
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
  TempDir dir, other_dir;
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

}  // namespace
}  // namespace skiff::e2e
