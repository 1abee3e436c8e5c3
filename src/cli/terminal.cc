#include "cli/terminal.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "base/thread.h"
#include "cli/cli.h"
#include "cli/report.h"

namespace skiff::cli {
namespace {

// The self-pipe the signal handlers and the output thread wake the input
// loop through: one byte per event (the signal number, or 0 for "output ended").
int g_wake[2] = {-1, -1};

void OnSignal(int sig) {
  unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_wake[1], &b, 1);
}

// Raw mode for the session's lifetime.
class RawMode {
 public:
  explicit RawMode(bool on) {
    if (!on || ::tcgetattr(0, &saved_) != 0) return;
    termios raw = saved_;
    ::cfmakeraw(&raw);
    if (::tcsetattr(0, TCSADRAIN, &raw) == 0) active_ = true;
  }
  ~RawMode() { Restore(); }
  void Restore() {
    if (active_) ::tcsetattr(0, TCSADRAIN, &saved_);
    active_ = false;
  }
  bool active() const { return active_; }

 private:
  termios saved_{};
  bool active_ = false;
};

// Output to the terminal: the process's bytes as they come.
class ScreenSink final : public ProcessOutputSink {
 public:
  explicit ScreenSink(const std::atomic<bool>& stop) : stop_(stop) {}
  bool OnStart(int64_t, int64_t) override { return !stop_; }
  bool OnData(uint8_t channel, int64_t, std::string_view bytes) override {
    WriteAll(channel == 2 ? 2 : 1, bytes);
    return !stop_;
  }
  bool OnGap(uint8_t, int64_t from, int64_t to) override {
    std::fprintf(stderr, "\r\nskiff: %lld bytes of output were lost (the process's buffer wrapped)\r\n",
                 static_cast<long long>(to - from));
    return !stop_;
  }
  bool Wanted() override { return !stop_; }

 private:
  const std::atomic<bool>& stop_;
};

}  // namespace

proto::TermSize CurrentTermSize() {
  winsize ws{};
  for (int fd : {0, 1}) {
    if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
      return proto::TermSize{std::min<int>(ws.ws_row, proto::kMaxTermSize),
                             std::min<int>(ws.ws_col, proto::kMaxTermSize)};
  }
  return proto::TermSize{};
}

void AddStartEnvAndTerminal(nlohmann::json& start, bool tty, const std::vector<std::string>& env) {
  nlohmann::json all = nlohmann::json::array();
  if (tty) {
    proto::TermSize size = CurrentTermSize();
    start["pty"] = {{"rows", size.rows}, {"cols", size.cols}};
    if (const char* term = std::getenv("TERM"); term != nullptr && *term != '\0')
      all.push_back(std::string("TERM=") + term);
  }
  for (const auto& e : env) all.push_back(e);
  if (!all.empty()) start["env"] = all;
}

int RunTerminal(ProcessEndpoint& ep, const TerminalOptions& opt) {
  if (::pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    std::perror("skiff: pipe");
    return kExitSkiffError;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  ::sigemptyset(&sa.sa_mask);
  struct sigaction old_winch = {}, old_term = {}, old_hup = {}, old_quit = {}, old_int = {};
  ::sigaction(SIGWINCH, &sa, &old_winch);
  ::sigaction(SIGTERM, &sa, &old_term);
  ::sigaction(SIGHUP, &sa, &old_hup);
  // In raw mode Ctrl-\ is a byte for the process; a SIGQUIT from elsewhere
  // ends the session with the terminal restored, as the others do.
  ::sigaction(SIGQUIT, &sa, &old_quit);
  if (!opt.raw) ::sigaction(SIGINT, &sa, &old_int);  // raw mode turns Ctrl-C into a byte
  RawMode raw(opt.raw && ::isatty(0));

  std::atomic<bool> stop{false};
  std::optional<Result<proto::ProcInfo>> ended;
  ScreenSink sink(stop);
  auto out = StartThread("terminal output", [&] {
    ended = ep.Output(opt.from, sink);
    unsigned char zero = 0;
    [[maybe_unused]] ssize_t n = ::write(g_wake[1], &zero, 1);
  });
  if (!out.ok()) {
    raw.Restore();
    return ReportError(out.error());
  }
  if (opt.raw) (void)ep.Resize(CurrentTermSize());

  bool detached = false, input_open = opt.input;
  int signalled = 0;
  unsigned char prev = 0;
  std::optional<Error> input_error;
  for (;;) {
    pollfd p[2] = {{g_wake[0], POLLIN, 0}, {0, static_cast<short>(input_open ? POLLIN : 0), 0}};
    int n = ::poll(p, input_open ? 2 : 1, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    bool output_done = false;
    if (p[0].revents & POLLIN) {
      unsigned char ev[64];
      ssize_t k = ::read(g_wake[0], ev, sizeof ev);
      for (ssize_t i = 0; i < k; ++i) {
        if (ev[i] == 0) output_done = true;
        if (ev[i] == SIGWINCH) (void)ep.Resize(CurrentTermSize());
        if (ev[i] == SIGTERM || ev[i] == SIGHUP || ev[i] == SIGINT || ev[i] == SIGQUIT) signalled = ev[i];
      }
    }
    if (output_done || signalled) break;
    if (input_open && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      char buf[4096];
      ssize_t k = ::read(0, buf, sizeof buf);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) {  // end of our stdin: end the process's (a terminal: its end-of-file character)
        input_open = false;
        if (auto st = ep.Input({}, true); !st.ok()) input_error = st.error();
        continue;
      }
      std::string bytes(buf, static_cast<size_t>(k));
      if (raw.active()) {
        // Ctrl-P Ctrl-Q detaches.
        for (size_t i = 0; i < bytes.size(); ++i) {
          unsigned char c = static_cast<unsigned char>(bytes[i]);
          if (prev == 0x10 && c == 0x11) {
            detached = true;
            bytes.erase(i);
            break;
          }
          prev = c;
        }
      }
      if (!bytes.empty()) {
        if (auto st = ep.Input(bytes, false); !st.ok()) {
          input_error = st.error();
          input_open = false;
        }
      }
      if (detached) break;
    }
  }
  stop = true;
  raw.Restore();
  if (!ended) {
    // Detached or signalled: the output thread ends at its next event or
    // within a second (Wanted()).
  }
  out->join();
  ::sigaction(SIGWINCH, &old_winch, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGHUP, &old_hup, nullptr);
  ::sigaction(SIGQUIT, &old_quit, nullptr);
  if (!opt.raw) ::sigaction(SIGINT, &old_int, nullptr);
  ::close(g_wake[0]);
  ::close(g_wake[1]);
  if (detached) {
    std::fprintf(stderr, "skiff: detached; the process goes on (skiff attach to come back)\n");
    return 0;
  }
  if (opt.interrupted != nullptr) *opt.interrupted = signalled != 0;
  if (signalled) return 128 + signalled;
  if (!ended || !ended->ok()) {
    if (ended && !ended->ok()) return ReportError(ended->error());
    return kExitSkiffError;
  }
  if (input_error && (*ended)->running) return ReportError(*input_error);
  const proto::ProcInfo& info = **ended;
  if (opt.timeout_error_ms && info.timed_out)
    return ReportError(
        Error(Code::kS200, "exec timed out after " + std::to_string(*opt.timeout_error_ms) + " ms"));
  return info.running ? 0 : info.exit_code;
}

}  // namespace skiff::cli
