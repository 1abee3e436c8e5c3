// Daemon benchmarks, printed as JSON (bench/run formats them):
//   - sandbox::run of `sh -c true`, cold (no pool): the library call against
//     the same call over HTTP to a skiffd server on loopback, interleaved;
//   - sandbox::exec round trip on a live sandbox, library against HTTP;
//   - 32 concurrent HTTP clients, each with its own sandbox, exec calls:
//     throughput, latency and error count;
//   - sandbox::run with a warm pool (library and HTTP), and sustained
//     back-to-back runs with the pool's hit rate.
// The server is the one `skiff serve` runs (api::Server), in this process on
// the same SandboxManager, so the HTTP rows differ from the library rows by
// the transport alone. Clients are keep-alive HTTP/1.1 (Boost.Beast).
// Usage: skiff-daemon-bench [--runs N] [--execs N] [--clients N] [--per-client N] [--pool N]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "api/server.h"
#include "sandbox/backends.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double Pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}
json Summary(const std::vector<double>& ms) {
  return {{"n", ms.size()}, {"p50_ms", Pct(ms, 0.5)}, {"p99_ms", Pct(ms, 0.99)}};
}
double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// One keep-alive HTTP/1.1 connection to the daemon.
class Client {
 public:
  explicit Client(uint16_t port) : sock_(ioc_) {
    sock_.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
    sock_.set_option(tcp::no_delay(true));
  }
  // POST /v1/functions/<fn>; returns the HTTP status and fills `body`.
  int Call(const std::string& fn, const std::string& payload, json* body) {
    http::request<http::string_body> req{http::verb::post, "/v1/functions/" + fn, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.body() = payload;
    req.prepare_payload();
    beast::error_code ec;
    http::write(sock_, req, ec);
    if (ec) return -1;
    http::response<http::string_body> res;
    buf_.clear();
    http::read(sock_, buf_, res, ec);
    if (ec) return -1;
    if (body) *body = json::parse(res.body(), nullptr, false);
    return static_cast<int>(res.result_int());
  }

 private:
  net::io_context ioc_;
  tcp::socket sock_;
  beast::flat_buffer buf_;
};

struct Daemon {
  std::unique_ptr<skiff::SandboxManager> mgr;
  std::unique_ptr<skiff::api::Server> server;
  std::thread loop;
  ~Daemon() {
    if (server) server->Stop();
    if (loop.joinable()) loop.join();
    server.reset();
    if (mgr) mgr->Shutdown();
  }
};

std::unique_ptr<Daemon> StartDaemon(uint32_t pool, uint32_t max_sandboxes) {
  skiff::Config cfg;
  cfg.allow_all_images = true;
  cfg.image_allowlist = std::vector<std::string>{"host"};
  cfg.isolation = "jail";
  cfg.max_concurrent_sandboxes = max_sandboxes;
  cfg.listen_port = 0;
  if (pool) cfg.pool["host"] = pool;
  auto d = std::make_unique<Daemon>();
  auto m = skiff::MakeSandboxManager(cfg);
  if (!m.ok()) {
    fprintf(stderr, "%s\n", m.error().ToString().c_str());
    return nullptr;
  }
  d->mgr = std::move(m).value();
  auto server = skiff::api::Server::Create(*d->mgr, cfg);
  if (!server.ok()) {
    fprintf(stderr, "%s\n", server.error().ToString().c_str());
    return nullptr;
  }
  d->server = std::move(server).value();
  if (auto st = d->server->Listen(); !st.ok()) {
    fprintf(stderr, "%s\n", st.error().ToString().c_str());
    return nullptr;
  }
  d->loop = std::thread([s = d->server.get()] { s->Run(); });
  return d;
}

bool WaitPool(skiff::SandboxManager& m, uint32_t n) {
  auto end = Clock::now() + std::chrono::seconds(120);
  while (Clock::now() < end) {
    auto st = m.PoolStats();
    if (!st.empty() && st[0].ready >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

skiff::RunSpec TrueRun() {
  skiff::RunSpec rs;
  rs.create.image = "host";
  rs.lang = "sh";
  rs.code = "true";
  return rs;
}
const std::string kRunPayload = R"({"image":"host","lang":"sh","code":"true"})";

// Interleaved library / HTTP `run` of `sh -c true`; `before` runs before
// each call, untimed (e.g. waiting for a full pool). Returns {lib, http} or
// null on an error.
json RunRows(Daemon& d, Client& c, int runs, const std::function<bool()>& before) {
  std::vector<double> lib, over;
  auto via_lib = [&]() {
    if (!before()) return false;
    auto t0 = Clock::now();
    auto r = d.mgr->Run(TrueRun());
    lib.push_back(MsSince(t0));
    if (!r.ok() || r->exit_code != 0) {
      fprintf(stderr, "run: %s\n", r.ok() ? "non-zero exit" : r.error().ToString().c_str());
      return false;
    }
    return true;
  };
  auto via_http = [&]() {
    if (!before()) return false;
    json body;
    auto t0 = Clock::now();
    int st = c.Call("sandbox::run", kRunPayload, &body);
    over.push_back(MsSince(t0));
    if (st != 200) {
      fprintf(stderr, "HTTP run: %d %s\n", st, body.dump().c_str());
      return false;
    }
    return true;
  };
  // A B B A: each path follows the other equally often (a run's sandbox is
  // torn down in the background while the next call starts).
  for (int i = 0; i < runs; ++i) {
    bool ok = i % 2 == 0 ? via_lib() && via_http() : via_http() && via_lib();
    if (!ok) return nullptr;
  }
  return {{"lib", Summary(lib)}, {"http", Summary(over)}};
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 100, execs = 500, clients = 32, per_client = 50;
  uint32_t pool = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    int v = std::stoi(argv[i + 1]);
    if (k == "--runs")
      runs = v;
    else if (k == "--execs")
      execs = v;
    else if (k == "--clients")
      clients = v;
    else if (k == "--per-client")
      per_client = v;
    else if (k == "--pool")
      pool = static_cast<uint32_t>(v);
  }
  json out;

  // ---- cold: no pool
  {
    auto d = StartDaemon(0, 1024);
    if (!d) return 1;
    uint16_t port = d->server->port();
    Client c(port);
    // Warm-up (image resolution, first jail setup) on both paths.
    (void)d->mgr->Run(TrueRun());
    (void)c.Call("sandbox::run", kRunPayload, nullptr);
    json cold = RunRows(*d, c, runs, [] { return true; });
    if (cold.is_null()) return 1;
    out["run_cold"] = cold;

    // exec round trip on one live sandbox.
    json created;
    if (c.Call("sandbox::create", R"({"image":"host"})", &created) != 200) return 1;
    std::string id = created["sandbox_id"];
    skiff::ExecSpec es;
    es.sandbox_id = id;
    es.argv = {"/bin/true"};
    std::string payload = json{{"sandbox_id", id}, {"argv", {"/bin/true"}}}.dump();
    std::vector<double> lib, over;
    auto exec_lib = [&]() {
      auto t0 = Clock::now();
      auto r = d->mgr->Exec(es);
      lib.push_back(MsSince(t0));
      if (!r.ok()) fprintf(stderr, "exec: %s\n", r.error().ToString().c_str());
      return r.ok();
    };
    auto exec_http = [&]() {
      json body;
      auto t0 = Clock::now();
      int st = c.Call("sandbox::exec", payload, &body);
      over.push_back(MsSince(t0));
      if (st != 200) fprintf(stderr, "HTTP exec: %d %s\n", st, body.dump().c_str());
      return st == 200;
    };
    for (int i = 0; i < execs; ++i) {
      bool ok = i % 2 == 0 ? exec_lib() && exec_http() : exec_http() && exec_lib();
      if (!ok) return 1;
    }
    out["exec"] = {{"lib", Summary(lib)}, {"http", Summary(over)}};
    (void)d->mgr->Stop(id, true);

    // N concurrent clients, each on its own connection and sandbox.
    std::vector<std::string> ids(clients);
    for (int i = 0; i < clients; ++i) {
      json b;
      if (c.Call("sandbox::create", R"({"image":"host"})", &b) != 200) return 1;
      ids[i] = b["sandbox_id"];
    }
    std::atomic<int> errors{0};
    std::vector<std::vector<double>> lat(clients);
    std::vector<std::thread> ts;
    auto t0 = Clock::now();
    for (int i = 0; i < clients; ++i) {
      ts.emplace_back([&, i] {
        try {
          Client cc(port);
          std::string p = json{{"sandbox_id", ids[i]}, {"argv", {"/bin/true"}}}.dump();
          for (int k = 0; k < per_client; ++k) {
            auto s = Clock::now();
            json body;
            int st = cc.Call("sandbox::exec", p, &body);
            lat[i].push_back(MsSince(s));
            if (st != 200 || body.value("exit_code", -1) != 0) ++errors;
          }
        } catch (const std::exception& e) {
          fprintf(stderr, "client %d: %s\n", i, e.what());
          errors += per_client;
        }
      });
    }
    for (auto& t : ts) t.join();
    double secs = MsSince(t0) / 1000;
    std::vector<double> all;
    for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
    out["concurrent"] = {{"clients", clients},
                         {"calls", clients * per_client},
                         {"errors", errors.load()},
                         {"calls_per_sec", clients * per_client / secs},
                         {"latency", Summary(all)}};
    for (auto& i : ids) (void)d->mgr->Stop(i, true);
  }

  // ---- warm pool
  if (pool > 0) {
    auto d = StartDaemon(pool, 1024);
    if (!d) return 1;
    Client c(d->server->port());
    if (!WaitPool(*d->mgr, pool)) return fprintf(stderr, "the pool did not fill\n"), 1;
    // Latency when a pooled sandbox is ready (bursty traffic): wait for a
    // full pool before each call (not timed).
    json warm = RunRows(*d, c, runs, [&] { return WaitPool(*d->mgr, pool); });
    if (warm.is_null()) return 1;
    out["run_pooled"] = warm;
    // Sustained back-to-back runs: the pool drains when runs outpace boots.
    auto before = d->mgr->PoolStats()[0];
    std::vector<double> ms;
    auto t0 = Clock::now();
    for (int i = 0; i < runs; ++i) {
      auto s = Clock::now();
      json body;
      if (c.Call("sandbox::run", kRunPayload, &body) != 200) return 1;
      ms.push_back(MsSince(s));
    }
    double secs = MsSince(t0) / 1000;
    auto after = d->mgr->PoolStats()[0];
    out["run_pooled_sustained"] = {{"pool", pool},
                                   {"runs_per_sec", runs / secs},
                                   {"hits", after.hits - before.hits},
                                   {"misses", after.misses - before.misses},
                                   {"latency", Summary(ms)}};
  }
  printf("%s\n", out.dump().c_str());
  return 0;
}
