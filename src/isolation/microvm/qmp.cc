#include "isolation/microvm/qmp.h"

#include <poll.h>
#include <sys/socket.h>

#include <cstring>

#include "base/fd_passing.h"

namespace skiff::microvm {

using json = nlohmann::json;

namespace {
// QMP messages are small; a larger line is a broken or hostile peer.
constexpr size_t kMaxLine = 1u << 20;
}  // namespace

Status Qmp::Send(const std::string& line, int pass_fd) {
  size_t off = 0;
  while (off < line.size()) {
    // The descriptor goes with the first byte.
    ssize_t n = SendWithFd(fd_.get(), line.data() + off, line.size() - off, off == 0 ? pass_fd : -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys(Code::kS300, "sendmsg", "qmp", errno);
    off += static_cast<size_t>(n);
  }
  return OkStatus();
}

Result<json> Qmp::ReadMessage(Deadline deadline) {
  for (;;) {
    auto nl = buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
      json j = json::parse(line, nullptr, false);
      if (!j.is_object()) return Platform("qmp", "QEMU sent a message that is not a JSON object");
      return j;
    }
    if (buf_.size() > kMaxLine) return Platform("qmp", "QEMU sent an oversized message");
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Platform("qmp", "QEMU did not answer in time");
    pollfd p{fd_.get(), POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 60000)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Error::Sys(Code::kS300, "poll", "qmp", errno);
    if (r == 0) continue;
    char tmp[8192];
    ssize_t n = ::recv(fd_.get(), tmp, sizeof tmp, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys(Code::kS300, "recv", "qmp", errno);
    if (n == 0) return Platform("qmp", "QEMU closed its monitor (it exited)");
    buf_.append(tmp, static_cast<size_t>(n));
  }
}

Status Qmp::Handshake(Deadline deadline) {
  SKIFF_ASSIGN_OR_RETURN(json greeting, ReadMessage(deadline));
  if (!greeting.contains("QMP")) return Platform("qmp", "no QMP greeting from QEMU");
  SKIFF_ASSIGN_OR_RETURN(json r, Execute("qmp_capabilities", json::object(), deadline));
  (void)r;
  negotiated_ = true;
  return OkStatus();
}

Result<json> Qmp::Execute(const std::string& command, const json& arguments, Deadline deadline, int pass_fd) {
  int id = next_id_++;
  json cmd = {{"execute", command}, {"id", id}};
  if (!arguments.empty()) cmd["arguments"] = arguments;
  SKIFF_RETURN_IF_ERROR(Send(cmd.dump() + "\n", pass_fd));
  for (;;) {
    SKIFF_ASSIGN_OR_RETURN(json m, ReadMessage(deadline));
    if (m.contains("event")) continue;                 // asynchronous events are not needed
    if (!m.contains("id") || m["id"] != id) continue;  // not ours (cannot happen: one at a time)
    if (m.contains("error")) {
      std::string desc = m["error"].is_object() ? m["error"].value("desc", std::string("?")) : "?";
      std::string message = command;
      message.append(": ").append(desc);
      return Platform("qmp", message);
    }
    return m.value("return", json::object());
  }
}

}  // namespace skiff::microvm
