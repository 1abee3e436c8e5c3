#include "cli/daemon_discovery.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/paths.h"
#include "cli/client.h"

namespace skiff::cli {

namespace {

// The socket a background daemon of this user listens on.
std::string DefaultSocket() { return paths::RuntimeDir() + "/skiffd.sock"; }

// Whether a daemon answers at `ep`. `error`, when given, receives why an
// endpoint cannot be one at all (a URL that is not plain HTTP: S001).
bool Healthy(const Endpoint& ep, std::optional<Error>* error = nullptr) {
  Client c(ep);
  auto r = c.Get("/healthz", 3);
  if (!r.ok() && error != nullptr && r.error().code() == Code::kS001) *error = r.error();
  return r.ok() && (r->status == 200 || r->status == 503);
}

// Whether something accepts connections on the unix socket at `path`.
bool Listening(const std::string& path) {
  sockaddr_un a{};
  if (path.size() >= sizeof a.sun_path) return false;
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.data(), path.size());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

std::string Token() {
  const char* t = std::getenv("SKIFF_TOKEN");
  return t != nullptr ? t : "";
}

bool UrlGiven(const std::string& url_flag) {
  const char* u = std::getenv("SKIFF_URL");
  return !url_flag.empty() || (u != nullptr && *u != '\0');
}

}  // namespace

Result<std::optional<Endpoint>> FindRunningDaemon(const std::string& url_flag) {
  if (UrlGiven(url_flag)) {
    SKIFF_ASSIGN_OR_RETURN(Endpoint ep, FindDaemon(url_flag, /*autostart=*/false));
    return std::optional<Endpoint>(std::move(ep));
  }
  std::string sock = DefaultSocket();
  if (!Listening(sock)) return std::optional<Endpoint>();
  return std::optional<Endpoint>(Endpoint{sock, "http://localhost", Token()});
}

Result<Endpoint> FindDaemon(const std::string& url_flag, bool autostart) {
  Endpoint ep;
  if (const char* t = std::getenv("SKIFF_TOKEN"); t && *t) ep.token = t;
  std::string url = url_flag;
  if (url.empty()) {
    if (const char* u = std::getenv("SKIFF_URL"); u && *u) url = u;
  }
  if (!url.empty()) {
    if (url.rfind("unix:", 0) == 0) {
      ep.unix_socket = url.substr(5);
      ep.base_url = "http://localhost";
    } else {
      while (!url.empty() && url.back() == '/') url.pop_back();
      ep.base_url = url;
    }
    std::optional<Error> bad_url;
    if (!Healthy(ep, &bad_url)) {
      if (bad_url) return *bad_url;
      return Error(Code::kS300, "platform failure: sandbox: no skiff daemon answers at " + url);
    }
    return ep;
  }
  Endpoint sock{DefaultSocket(), "http://localhost", ep.token};
  if (Healthy(sock)) return sock;
  Endpoint tcp{"", "http://127.0.0.1:49134", ep.token};
  if (Healthy(tcp)) return tcp;
  if (!autostart) return Error(Code::kS300, "platform failure: sandbox: no skiff daemon is running");

  // Start one in the background: unix socket only (plus an ephemeral
  // loopback port), logging to a file next to the socket.
  std::string dir = paths::RuntimeDir();
  ::mkdir(dir.c_str(), 0700);
  std::string log = dir + "/skiffd.log";
  std::string self = paths::SelfDir() + "/skiff";
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) self.assign(exe, static_cast<size_t>(n));
  pid_t pid = ::fork();
  if (pid < 0) return Error::Sys(Code::kS300, "fork", "skiff serve", errno);
  if (pid == 0) {
    // Child: detach into its own session; a second fork makes the daemon a
    // child of init so the CLI never has to reap it.
    ::setsid();
    if (::fork() != 0) ::_exit(0);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0) ::dup2(null, 0);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    std::string sock_path = sock.unix_socket;
    const char* args[] = {self.c_str(), "serve", "--socket", sock_path.c_str(), "--port", "0", nullptr};
    ::execv(self.c_str(), const_cast<char* const*>(args));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::fprintf(stderr, "skiff: no daemon was running; started one in the background (socket %s, log %s)\n",
               sock.unix_socket.c_str(), log.c_str());
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (Healthy(sock)) return sock;
  }
  return Error(Code::kS300, "platform failure: sandbox: the background daemon did not start; see " + log);
}

}  // namespace skiff::cli
