#include "isolation/microvm/migration.h"

#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <thread>

#include "base/fd_pair.h"
#include "base/log.h"
#include "base/thread.h"
#include "base/unique_fd.h"

namespace skiff::microvm {
namespace {

using namespace std::chrono_literals;

// Copies `in` (a pipe) into `out` until end of file, at most `max_bytes`.
// Returns S400 past the cap; the writer then fails on a closed pipe.
Status Drain(int in, int out, uint64_t max_bytes, uint64_t* copied) {
  char buf[1 << 16];
  *copied = 0;
  for (;;) {
    ssize_t n = ::read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys(Code::kS300, "read", "migration pipe", errno);
    if (n == 0) return OkStatus();
    if (*copied + static_cast<uint64_t>(n) > max_bytes)
      return Error(Code::kS400,
                   "resource limit exceeded: the VM's state is larger than the snapshot size cap (" +
                       std::to_string(max_bytes >> 20) + " MiB)");
    size_t off = 0;
    while (off < static_cast<size_t>(n)) {
      ssize_t w = ::write(out, buf + off, static_cast<size_t>(n) - off);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return Error::Sys(Code::kS300, "write", "snapshot state", errno);
      off += static_cast<size_t>(w);
    }
    *copied += static_cast<uint64_t>(n);
  }
}

}  // namespace

Status MigrateToFd(Qmp& qmp, int fd, Qmp::Deadline deadline) {
  if (!qmp.negotiated()) SKIFF_RETURN_IF_ERROR(qmp.Handshake(deadline));
  // QEMU's default migration bandwidth limit (32 MiB/s) is for live
  // migration over a network; a stopped VM saved locally wants none.
  SKIFF_RETURN_IF_ERROR(
      qmp.Execute("migrate-set-parameters", {{"max-bandwidth", int64_t{1} << 40}}, deadline));
  SKIFF_RETURN_IF_ERROR(qmp.Execute("getfd", {{"fdname", "snapshot"}}, deadline, fd));
  SKIFF_RETURN_IF_ERROR(qmp.Execute("migrate", {{"uri", "fd:snapshot"}}, deadline));
  for (;;) {
    SKIFF_ASSIGN_OR_RETURN(nlohmann::json st, qmp.Execute("query-migrate", {}, deadline));
    std::string status = st.value("status", std::string());
    if (status == "completed") return OkStatus();
    if (status == "failed" || status == "cancelled")
      return Platform("snapshot",
                      "migration " + status + ": " + st.value("error-desc", std::string("no reason given")));
    if (std::chrono::steady_clock::now() > deadline) {
      (void)qmp.Execute("migrate_cancel", {}, deadline + 5s);
      return Platform("snapshot", "saving the VM's state took too long");
    }
    std::this_thread::sleep_for(10ms);
  }
}

Status SaveVmState(Qmp& qmp, const std::string& path, uint64_t max_bytes, bool was_paused,
                   Qmp::Deadline deadline, uint64_t* bytes) {
  *bytes = 0;
  UniqueFd out(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!out) return Error::Sys(Code::kS300, "open", path, errno);
  SKIFF_ASSIGN_OR_RETURN(FdPair pipe, MakePipe());
  if (!qmp.negotiated()) SKIFF_RETURN_IF_ERROR(qmp.Handshake(deadline));
  Status drained = OkStatus();
  // The drain owns the read end: when it stops early (the cap), closing it
  // fails QEMU's next write (EPIPE) and so the migration, at once.
  auto in = std::make_shared<UniqueFd>(std::move(pipe.first));
  SKIFF_ASSIGN_OR_RETURN(std::thread drain, StartThread("snapshot drain", [&, in] {
                           drained = Drain(in->get(), out.get(), max_bytes, bytes);
                           in->reset();
                         }));
  Status st = OkStatus();
  if (!was_paused) {
    Result<nlohmann::json> stop = qmp.Execute("stop", {}, deadline);
    if (!stop.ok()) st = std::move(stop).error();
  }
  if (st.ok()) st = MigrateToFd(qmp, pipe.second.get(), deadline);
  // QEMU holds its own copy of the write end until the migration ends; ours
  // goes now, so the drain sees end of file once QEMU's does.
  pipe.second.reset();
  drain.join();
  if (!was_paused) {
    Result<nlohmann::json> cont = qmp.Execute("cont", {}, deadline + 5s);
    if (!cont.ok()) SKIFF_LOG(Warn) << "microvm: cont after a snapshot failed: " << cont.error().message();
  }
  if (st.ok() && drained.ok() && ::fsync(out.get()) != 0)
    drained = Error::Sys(Code::kS300, "fsync", path, errno);
  if (!drained.ok() || !st.ok()) {
    ::unlink(path.c_str());
    return !drained.ok() ? drained : st;
  }
  return OkStatus();
}

}  // namespace skiff::microvm
