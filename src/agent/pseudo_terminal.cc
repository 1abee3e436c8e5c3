#include "agent/pseudo_terminal.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <termios.h>

#include <cerrno>
#include <string>

namespace skiff::agent {

Result<PtyPair> OpenPty(TerminalSize size) {
  PtyPair p;
  p.master.reset(::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
  if (!p.master) return Error::Sys(Code::kS300, "open", "/dev/ptmx", errno);
  int unlock = 0;
  if (::ioctl(p.master.get(), TIOCSPTLCK, &unlock) < 0)
    return Error::Sys(Code::kS300, "ioctl", "TIOCSPTLCK", errno);
  // The slave through the master itself: no path lookup, so no dependence
  // on where (or whether) this devpts instance is mounted.
  p.slave.reset(::ioctl(p.master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!p.slave && (errno == EINVAL || errno == ENOTTY)) {
    // Kernels before 4.13: by its name under /dev/pts.
    unsigned int n = 0;
    if (::ioctl(p.master.get(), TIOCGPTN, &n) < 0) return Error::Sys(Code::kS300, "ioctl", "TIOCGPTN", errno);
    std::string path = "/dev/pts/" + std::to_string(n);
    p.slave.reset(::open(path.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!p.slave) return Error::Sys(Code::kS300, "open", path, errno);
  } else if (!p.slave) {
    return Error::Sys(Code::kS300, "ioctl", "TIOCGPTPEER", errno);
  }
  SKIFF_RETURN_IF_ERROR(ResizePty(p.master.get(), size));
  return p;
}

Status ResizePty(int master, TerminalSize size) {
  winsize ws{};
  ws.ws_row = size.rows;
  ws.ws_col = size.cols;
  if (::ioctl(master, TIOCSWINSZ, &ws) < 0) return Error::Sys(Code::kS300, "ioctl", "TIOCSWINSZ", errno);
  return OkStatus();
}

std::string EofBytes(int master, bool line_empty) {
  termios t{};
  // On a master, the termios are the slave's (the line discipline's).
  if (::tcgetattr(master, &t) < 0) return std::string(1, '\x04');
  char eof = t.c_cc[VEOF] != 0 ? static_cast<char>(t.c_cc[VEOF]) : '\x04';
  if ((t.c_lflag & ICANON) != 0 && !line_empty) return std::string(2, eof);
  return std::string(1, eof);
}

}  // namespace skiff::agent
