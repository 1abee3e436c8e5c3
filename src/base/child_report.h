// Why a child failed between clone/fork and exec, in one format: the child
// fills a fixed-size ChildFailure (the call that failed, what it acted on,
// errno, and the caller's step code when it has its own numbering) with
// async-signal-safe code only, and the parent turns it into one Error, S300
// "<call>(<object>): <ERRNO>", or decodes the record itself (the agent's
// spawn, whose failures are exec results). Two transports carry it:
//   - a ChildReportPipe (close-on-exec): the child writes the record and
//     exits; an exec closes the pipe empty, which the parent reads as success;
//   - a slot in the parent's memory, for a CLONE_VM child (the jail's init),
//     filled by RecordChildFailure.
#pragma once

#include <optional>
#include <string_view>

#include "base/error.h"
#include "base/unique_fd.h"

namespace skiff {

struct ChildFailure {
  int err = 0;            // 0: no failure recorded
  int step = 0;           // the caller's own step code; 0 when it has none
  char call[32] = {};     // "mount", "execve", ...
  char object[160] = {};  // its target, possibly cut; may be ""
};

// Fills *slot. Async-signal-safe (no allocation, no locks).
void RecordChildFailure(ChildFailure* slot, int err, const char* call, const char* object,
                        int step = 0) noexcept;

// Writes one ChildFailure to `fd` and exits with status 127.
// Async-signal-safe, also in a CLONE_VM child (it writes only its own stack).
[[noreturn]] void ReportChildFailure(int fd, int err, const char* call, const char* object,
                                     int step = 0) noexcept;

// The Error for a recorded failure: S300 naming the call, the object and
// the errno, with `context` (e.g. "vmm setup") added when not empty.
Error ChildFailureError(const ChildFailure& f, std::string_view context = {});

// The parent's end of the report pipe. Create() before the clone/fork; the
// child writes to write_fd() (at any descriptor number it moves it to); the
// parent calls Read() right after the clone.
class ChildReportPipe {
 public:
  static Result<ChildReportPipe> Create();

  int write_fd() const { return write_.get(); }

  // Closes the parent's copy of the write end and waits for the child's
  // word: OkStatus() when the pipe closed empty (the child exec'ed), the
  // ChildFailureError (with `context`) when it reported, S300 for a report
  // cut short (the child died mid-write).
  Status Read(std::string_view context);

  // The same, undecoded: nullopt when the pipe closed empty, the record
  // when the child reported, S300 for a report cut short.
  Result<std::optional<ChildFailure>> ReadFailure();

 private:
  ChildReportPipe(UniqueFd r, UniqueFd w) : read_(std::move(r)), write_(std::move(w)) {}
  UniqueFd read_, write_;
};

}  // namespace skiff
