// sandbox::metrics on the microVM (Instance::Usage): the guest's own
// counters, asked of its agent (protocol op "usage"), checked as hostile
// input (the guest's root controls its agent) against the VM's shape, and
// the CPU share computed from the guest's busy and total ticks since this
// VM's previous sample, or over a short first sample. Ticks are guest time:
// a pause (vCPUs stopped) adds none, so the share is of the time the VM ran.
//
// A paused VM cannot answer (its agent does not run): Remember() takes a
// sample just before the pause, and Paused() answers it, CPU 0 (nothing
// runs). Memory and disk cannot change while the vCPUs are stopped, so that
// sample is the truth; without one (it failed) Paused() is S005.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "base/error.h"
#include "isolation/isolator.h"
#include "protocol/messages.h"

namespace skiff::microvm {

// One call of op "usage" to the guest's agent, its answer decoded
// (UsageResult::FromJson) or the error.
using UsageProbe = std::function<Result<proto::UsageResult>()>;

// OK when `r` fits a VM of `vcpus` vCPUs and `memory_bytes` of RAM (the
// guest cannot see more of either), else S300 "... agent sent a malformed
// usage RESULT (...)".
Status CheckGuestUsage(const proto::UsageResult& r, uint32_t vcpus, uint64_t memory_bytes);

class GuestUsage {
 public:
  static constexpr std::chrono::milliseconds kFirstSample{200};

  GuestUsage(uint32_t vcpus, uint64_t memory_bytes, std::chrono::milliseconds first_sample = kFirstSample)
      : vcpus_(vcpus), memory_bytes_(memory_bytes), first_sample_(first_sample) {}

  // A running VM: asks `probe` (twice, `first_sample` apart, when there is
  // no earlier sample) and answers the use now, CPU since the previous
  // sample. cpu_count is the VM's vCPUs (the host's number, not the
  // guest's); memory and disk are the guest's.
  Result<ResourceUsage> Read(const UsageProbe& probe);
  // Just before a pause: one sample, kept for Paused() (and as the CPU
  // baseline of the next Read).
  Status Remember(const UsageProbe& probe);
  // A paused VM: the last sample, CPU 0; S005 naming `sandbox` without one.
  Result<ResourceUsage> Paused(const std::string& sandbox) const;

 private:
  Result<proto::UsageResult> Ask(const UsageProbe& probe) const;
  ResourceUsage From(const proto::UsageResult& r, double cpu_pct) const;

  const uint32_t vcpus_;
  const uint64_t memory_bytes_;
  const std::chrono::milliseconds first_sample_;
  mutable std::mutex mu_;
  std::optional<proto::UsageResult> last_;  // the latest sample
  // The CPU baseline: the sample the next share is measured from (kept
  // across samples too close to tell, which saw no tick).
  uint64_t base_busy_ = 0;
  uint64_t base_total_ = 0;
  bool has_base_ = false;
  double last_pct_ = 0;
};

}  // namespace skiff::microvm
