#include "isolation/microvm/vm_restore.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>

#include "isolation/microvm/qmp.h"
#include "protocol/hello.h"

namespace skiff::microvm {
namespace {

using namespace std::chrono_literals;

Status SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys(Code::kS300, "send", "agent channel", errno);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return OkStatus();
}

// Entropy for a restored guest, hex-encoded.
Result<std::string> FreshSeedHex() {
  unsigned char seed[32];
  size_t got = 0;
  while (got < sizeof seed) {
    ssize_t n = ::getrandom(seed + got, sizeof seed - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys(Code::kS300, "getrandom", "snapshot seed", errno);
    got += static_cast<size_t>(n);
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : seed) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

// Waits for QEMU to load the stream and lets the guest run: the stream
// carries the template's run state (stopped before it was saved), so once
// loaded QEMU waits paused and `cont` starts the guest.
Status ResumeLoaded(Qmp& qmp, Clock::time_point deadline) {
  SKIFF_RETURN_IF_ERROR(qmp.Handshake(deadline));
  for (;;) {
    SKIFF_ASSIGN_OR_RETURN(nlohmann::json s, qmp.Execute("query-status", {}, deadline));
    std::string status = s.value("status", std::string());
    if (status == "running") return OkStatus();
    if (status == "paused") {
      SKIFF_ASSIGN_OR_RETURN(nlohmann::json c, qmp.Execute("cont", {}, deadline));
      (void)c;
      return OkStatus();
    }
    if (status != "inmigrate")
      return Platform("snapshot", "QEMU is " + status + " after loading the template");
    if (Clock::now() > deadline) return Platform("snapshot", "loading the template took too long");
    std::this_thread::sleep_for(2ms);
  }
}

// Whether a VMM whose restore failed was SIGKILLed by someone else (the
// OOM killer, an operator): skiff sends its SIGKILL only after this check,
// and a template makes QEMU fail or hang, never die of a SIGKILL. Such a
// failure says nothing about the template.
bool KilledFromOutside(Launched& l) {
  using namespace std::chrono_literals;
  if (!l.proc.exited()) (void)l.proc.Wait(200ms);  // a closed channel: it is dying
  std::optional<int> st = l.proc.status();
  return st && WIFSIGNALED(*st) && WTERMSIG(*st) == SIGKILL;
}

}  // namespace

Result<Launched> RestoreVm(const Parts& parts, LaunchSpec spec, const std::string& state_path,
                           const std::string& hostname, bool* killed) {
  *killed = false;
  UniqueFd in(::open(state_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!in) return Error::Sys(Code::kS300, "open", state_path, errno);
  spec.incoming_fd = in.get();
  spec.qmp = true;
  SKIFF_ASSIGN_OR_RETURN(Launched l, Launch(spec, parts));
  in.reset();
  auto deadline = l.launched + kBootTimeout;
  // The monitor stays with the VM (pause, resume and snapshots use it).
  l.monitor = std::make_unique<Qmp>(std::move(l.qmp));
  if (Status st = ResumeLoaded(*l.monitor, deadline); !st.ok()) {
    *killed = KilledFromOutside(l);
    return BootFailure(l, "restoring the snapshot failed: " + st.error().message());
  }
  SKIFF_ASSIGN_OR_RETURN(std::string seed, FreshSeedHex());
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  proto::Resume resume{seed, int64_t{now.tv_sec} * 1000000000 + now.tv_nsec, hostname};
  std::string frame = proto::EncodeResumeHello(resume);
  if (!SendAll(l.chan.get(), frame).ok()) {
    *killed = KilledFromOutside(l);
    return BootFailure(l, "restoring the snapshot failed: the agent channel closed");
  }
  std::string failure = WaitForAgent(l, deadline);
  if (!failure.empty()) {
    *killed = KilledFromOutside(l);
    return BootFailure(l, "restoring the snapshot failed: " + failure);
  }
  return l;
}

}  // namespace skiff::microvm
