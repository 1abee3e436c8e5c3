// A classic-BPF interpreter for seccomp programs, for tests: runs a filter
// over a `struct seccomp_data` the way the kernel would, without a kernel.
//
//   auto r = bpf::Run(policy.filter, bpf::SyscallData(AUDIT_ARCH_X86_64, __NR_read));
//   // r.ok() → r.verdict is the filter's SECCOMP_RET_* value
//
// Every malformed program is an error, never undefined behaviour: an unknown
// opcode, a load outside seccomp_data or not 4-byte aligned, a scratch slot
// out of range, a jump past the end, falling off the end, division by zero.
#pragma once

#include <linux/filter.h>
#include <linux/seccomp.h>

#include <cstdint>
#include <string>
#include <vector>

namespace skiff::bpf {

struct RunResult {
  uint32_t verdict = 0;  // the value of the RET instruction reached
  std::string error;     // empty when the program ran to a RET
  bool ok() const { return error.empty(); }
};

// Runs `prog` on `data`. At most prog.size() instructions execute (classic
// BPF jumps only forward).
RunResult Run(const std::vector<sock_filter>& prog, const seccomp_data& data);

// A seccomp_data for syscall `nr` on `arch` with the given arguments.
seccomp_data SyscallData(uint32_t arch, int nr, uint64_t a0 = 0, uint64_t a1 = 0, uint64_t a2 = 0,
                         uint64_t a3 = 0, uint64_t a4 = 0, uint64_t a5 = 0);

}  // namespace skiff::bpf
