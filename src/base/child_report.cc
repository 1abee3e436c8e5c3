#include "base/child_report.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <string>

#include "base/fd_pair.h"

namespace skiff {
namespace {

void CopyStr(char* dst, size_t cap, const char* src) noexcept {
  size_t i = 0;
  if (src != nullptr)
    for (; src[i] != '\0' && i + 1 < cap; ++i) dst[i] = src[i];
  dst[i] = '\0';
}

}  // namespace

void RecordChildFailure(ChildFailure* slot, int err, const char* call, const char* object,
                        int step) noexcept {
  if (slot == nullptr) return;
  slot->err = err != 0 ? err : EIO;  // 0 would read as "no failure"
  slot->step = step;
  CopyStr(slot->call, sizeof slot->call, call);
  CopyStr(slot->object, sizeof slot->object, object);
}

void ReportChildFailure(int fd, int err, const char* call, const char* object, int step) noexcept {
  ChildFailure f;
  RecordChildFailure(&f, err, call, object, step);
  // One write of less than PIPE_BUF bytes: the parent gets all or nothing.
  static_assert(sizeof f <= PIPE_BUF);
  ssize_t r;
  do {
    r = ::write(fd, &f, sizeof f);
  } while (r < 0 && errno == EINTR);
  ::syscall(SYS_exit_group, 127);
  __builtin_unreachable();
}

Error ChildFailureError(const ChildFailure& f, std::string_view context) {
  ChildFailure c = f;
  c.call[sizeof c.call - 1] = '\0';
  c.object[sizeof c.object - 1] = '\0';
  Error e = Error::Sys(Code::kS300, c.call, c.object, c.err);
  if (!context.empty()) e.With(context);
  return e;
}

Result<ChildReportPipe> ChildReportPipe::Create() {
  SKIFF_ASSIGN_OR_RETURN(FdPair p, MakePipe(O_CLOEXEC));
  return ChildReportPipe(std::move(p.first), std::move(p.second));
}

Result<std::optional<ChildFailure>> ChildReportPipe::ReadFailure() {
  write_.reset();
  ChildFailure f;
  size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(&f);
  while (got < sizeof f) {
    ssize_t n = ::read(read_.get(), bytes + got, sizeof f - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys(Code::kS300, "read", "child report", errno);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  read_.reset();
  if (got == 0) return std::optional<ChildFailure>();
  if (got != sizeof f)
    return Error(Code::kS300, "short report from child (" + std::to_string(got) + " bytes)");
  f.call[sizeof f.call - 1] = '\0';
  f.object[sizeof f.object - 1] = '\0';
  return std::optional<ChildFailure>(f);
}

Status ChildReportPipe::Read(std::string_view context) {
  Result<std::optional<ChildFailure>> r = ReadFailure();
  if (!r.ok()) {
    Error e = std::move(r).error();
    if (!context.empty()) e.With(context);
    return e;
  }
  if (!r->has_value()) return OkStatus();
  return ChildFailureError(**r, context);
}

}  // namespace skiff
