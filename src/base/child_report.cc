#include "base/child_report.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
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

void RecordChildFailure(ChildFailure* slot, int err, const char* call, const char* object) noexcept {
  if (slot == nullptr) return;
  slot->err = err != 0 ? err : EIO;  // 0 would read as "no failure"
  CopyStr(slot->call, sizeof slot->call, call);
  CopyStr(slot->object, sizeof slot->object, object);
}

void ReportChildFailure(int fd, int err, const char* call, const char* object) noexcept {
  ChildFailure f;
  RecordChildFailure(&f, err, call, object);
  // One write of less than PIPE_BUF bytes: the parent gets all or nothing.
  ssize_t r = ::write(fd, &f, sizeof f);
  (void)r;
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

Status ChildReportPipe::Read(std::string_view context) {
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
  if (got == 0) return OkStatus();
  if (got != sizeof f) {
    Error e(Code::kS300, "short report from child (" + std::to_string(got) + " bytes)");
    if (!context.empty()) e.With(context);
    return e;
  }
  return ChildFailureError(f, context);
}

}  // namespace skiff
