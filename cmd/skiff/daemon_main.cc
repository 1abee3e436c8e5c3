// skiffd's main, the daemon's composition: Config -> SandboxManager -> Server
// on its own event-loop thread; SIGTERM/SIGINT (or a rejected worker
// registration) stop every sandbox, then the process exits. The `skiff`
// binary hands it to the command line, whose `serve` calls it.
#include "daemon_main.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <thread>
#include <utility>

#include "api/server.h"
#include "base/log.h"
#include "base/thread.h"
#include "sandbox/backends.h"

namespace skiff {

namespace {

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  // Async-signal-safe: only write(2).
  unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &b, 1);
}

}  // namespace

int DaemonMain(Config config) {
  for (const auto& w : config.warnings) SKIFF_LOG(Warn) << "config: " << w;
  auto mgr = MakeSandboxManager(config);
  if (!mgr.ok()) {
    std::fprintf(stderr, "skiff serve: %s\n", mgr.error().message().c_str());
    return 1;
  }
  SandboxManager& manager = **mgr;
  auto created = api::Server::Create(manager, config);
  if (!created.ok()) {
    std::fprintf(stderr, "skiff serve: %s\n", created.error().message().c_str());
    return 1;
  }
  api::Server& server = **created;
  if (auto st = server.Listen(); !st.ok()) {
    std::fprintf(stderr, "skiff serve: %s\n", st.error().message().c_str());
    return 1;
  }
  SKIFF_LOG(Info) << "skiffd " << api::Version() << " listening on " << config.listen_address << ":"
                  << server.port()
                  << (config.unix_socket ? " and unix:" + *config.unix_socket : std::string())
                  << "; isolation " << manager.default_isolation();
  std::fprintf(stderr, "skiffd listening on %s:%u\n", config.listen_address.c_str(),
               static_cast<unsigned>(server.port()));

  if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) return 1;
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  // Worker mode: a rejected registration ends the daemon with status 3.
  server.OnRegistrationRejected([]() { OnSignal(0); });
  Result<std::thread> loop = StartThread("event loop", [&server]() { server.Run(); });
  if (!loop.ok()) {
    Error e = std::move(loop).error();
    std::fprintf(stderr, "skiff serve: %s\n", e.With("starting the event loop").message().c_str());
    return 1;
  }
  unsigned char sig = 0;
  while (::read(g_signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
  }
  int status = sig == 0 ? 3 : 0;
  if (sig == 0) {
    SKIFF_LOG(Error) << "worker registration rejected: stopping every sandbox, exit 3";
  } else {
    SKIFF_LOG(Info) << "signal " << static_cast<int>(sig) << ": stopping every sandbox";
  }
  server.StopAccepting();
  manager.Shutdown();
  server.Stop();
  loop->join();
  SKIFF_LOG(Info) << "stopped";
  std::fflush(nullptr);
  // Every sandbox is gone; skip destructors of pool work still unwinding.
  ::_exit(status);
}

}  // namespace skiff
