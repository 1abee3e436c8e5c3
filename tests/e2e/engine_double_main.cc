// engine-double: the iii engine double (engine_double.h) as a process, so
// several skiff daemons and an unmodified iii-sdk caller can share it as one
// engine.
//
//   engine-double [--port N] [--address A] [--legacy-0.22] [--namespace-grace-ms MS]
//                 [--tls-cert FILE --tls-key FILE]
//                 [--rbac-port N [--auth-function ID] [--expose RULE]...]
//                 [--channel-ttl-ms MS] [--channel-sweep-ms MS]
//
// --port 0 (the default) takes any free port. Once it accepts connections it
// prints `listening <port>` on stdout, then `rbac-listening <port>` when it
// has an RBAC listener. SIGTERM or SIGINT stop it; it exits 0.
// --tls-cert / --tls-key (PEM, given together): the listeners serve wss://.
// --rbac-port opens a second listener with an `rbac` block, as a second
// iii-worker-manager entry of the engine's config does: every connection on
// it is authenticated by calling --auth-function (registered in `default` by
// some worker on the main listener, which has no rbac block) and its calls
// are gated by the session and the --expose rules. An --expose RULE is spelled
// as in the engine's config: `match("sandbox::*")`, or a JSON object such as
// `{"match": "sandbox::*", "namespace": "skiff.h1"}` or
// `{"metadata": {"public": true}}`. --auth-function and --expose need
// --rbac-port.
// --channel-ttl-ms / --channel-sweep-ms: how old a data channel with a side
// nobody took gets before it is swept (default 5 min, the engine's
// CHANNEL_TTL), and how often the sweep runs (default 60 s).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "engine_double.h"

namespace {

int Usage() {
  std::cerr << "usage: engine-double [--port N] [--address A] [--legacy-0.22] [--namespace-grace-ms MS]\n"
               "                     [--tls-cert FILE --tls-key FILE]\n"
               "                     [--rbac-port N [--auth-function ID] [--expose RULE]...]\n"
               "                     [--channel-ttl-ms MS] [--channel-sweep-ms MS]\n";
  return 2;
}

bool ParseNumber(const char* s, long max, long& out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < 0 || v > max) return false;
  out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  skiff::e2e::EngineDoubleOptions opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    long n = 0;
    if (a == "--port" && i + 1 < argc && ParseNumber(argv[i + 1], 65535, n)) {
      opt.port = static_cast<uint16_t>(n);
      ++i;
    } else if (a == "--address" && i + 1 < argc) {
      opt.address = argv[++i];
    } else if (a == "--legacy-0.22") {
      opt.legacy_0_22 = true;
    } else if (a == "--namespace-grace-ms" && i + 1 < argc && ParseNumber(argv[i + 1], 3600000, n)) {
      opt.namespace_grace = std::chrono::milliseconds(n);
      ++i;
    } else if (a == "--channel-ttl-ms" && i + 1 < argc && ParseNumber(argv[i + 1], 86400000, n)) {
      opt.channel_ttl = std::chrono::milliseconds(n);
      ++i;
    } else if (a == "--channel-sweep-ms" && i + 1 < argc && ParseNumber(argv[i + 1], 86400000, n) && n > 0) {
      opt.channel_sweep_interval = std::chrono::milliseconds(n);
      ++i;
    } else if (a == "--tls-cert" && i + 1 < argc) {
      opt.tls_cert_file = argv[++i];
    } else if (a == "--tls-key" && i + 1 < argc) {
      opt.tls_key_file = argv[++i];
    } else if (a == "--rbac-port" && i + 1 < argc && ParseNumber(argv[i + 1], 65535, n)) {
      opt.rbac_port = static_cast<uint16_t>(n);
      ++i;
    } else if (a == "--auth-function" && i + 1 < argc) {
      opt.auth_function_id = argv[++i];
    } else if (a == "--expose" && i + 1 < argc) {
      // A JSON object is the map form of a rule; anything else the string form.
      std::string rule = argv[++i];
      nlohmann::json j =
          rule.starts_with("{") ? nlohmann::json::parse(rule, nullptr, false) : nlohmann::json(rule);
      if (j.is_discarded()) return Usage();
      opt.expose_functions.push_back(std::move(j));
    } else {
      return Usage();
    }
  }
  if (opt.tls_cert_file.empty() != opt.tls_key_file.empty()) return Usage();
  if (!opt.rbac_port && (!opt.auth_function_id.empty() || !opt.expose_functions.empty())) return Usage();
  // Blocked before the double's thread starts, so only sigwait sees them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  try {
    skiff::e2e::EngineDouble engine(opt);
    std::printf("listening %u\n", static_cast<unsigned>(engine.port()));
    if (opt.rbac_port) std::printf("rbac-listening %u\n", static_cast<unsigned>(engine.rbac_port()));
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
  } catch (const std::exception& e) {
    std::cerr << "engine-double: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
