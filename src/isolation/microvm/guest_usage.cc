#include "isolation/microvm/guest_usage.h"

#include <algorithm>
#include <thread>

#include "protocol/message_fields.h"

namespace skiff::microvm {

Status CheckGuestUsage(const proto::UsageResult& r, uint32_t vcpus, uint64_t memory_bytes) {
  if (r.cpu_count > vcpus)
    return proto::field::AnswerError(
        "usage RESULT", InvalidRequest("cpu_count: " + std::to_string(r.cpu_count) + " CPUs in a VM of " +
                                       std::to_string(vcpus)));
  if (r.mem_total_bytes > memory_bytes)
    return proto::field::AnswerError(
        "usage RESULT",
        InvalidRequest("mem_total_bytes: more than the VM's " + std::to_string(memory_bytes >> 20) + " MiB"));
  return OkStatus();
}

Result<proto::UsageResult> GuestUsage::Ask(const UsageProbe& probe) const {
  SKIFF_ASSIGN_OR_RETURN(proto::UsageResult r, probe());
  SKIFF_RETURN_IF_ERROR(CheckGuestUsage(r, vcpus_, memory_bytes_));
  return r;
}

ResourceUsage GuestUsage::From(const proto::UsageResult& r, double cpu_pct) const {
  ResourceUsage u;
  u.cpu_count = vcpus_;
  u.cpu_used_pct = std::clamp(cpu_pct, 0.0, 100.0);
  u.mem_used_bytes = r.mem_used_bytes;
  u.mem_total_bytes = r.mem_total_bytes;
  u.disk_used_bytes = r.disk_used_bytes;
  u.disk_total_bytes = r.disk_total_bytes;
  return u;
}

Result<ResourceUsage> GuestUsage::Read(const UsageProbe& probe) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!has_base_) {
    SKIFF_ASSIGN_OR_RETURN(proto::UsageResult first, Ask(probe));
    base_busy_ = first.cpu_busy_ticks;
    base_total_ = first.cpu_total_ticks;
    has_base_ = true;
    last_ = first;
    std::this_thread::sleep_for(first_sample_);
  }
  SKIFF_ASSIGN_OR_RETURN(proto::UsageResult now, Ask(probe));
  last_ = now;
  if (now.cpu_total_ticks < base_total_ || now.cpu_busy_ticks < base_busy_) {
    // Counters that went back are no measure of anything: start again.
    base_busy_ = now.cpu_busy_ticks;
    base_total_ = now.cpu_total_ticks;
    last_pct_ = 0;
    return From(now, 0);
  }
  const uint64_t total = now.cpu_total_ticks - base_total_;
  if (total == 0) return From(now, last_pct_);  // no tick since: the previous share stands
  const uint64_t busy = now.cpu_busy_ticks - base_busy_;
  last_pct_ = std::clamp(100.0 * static_cast<double>(busy) / static_cast<double>(total), 0.0, 100.0);
  base_busy_ = now.cpu_busy_ticks;
  base_total_ = now.cpu_total_ticks;
  return From(now, last_pct_);
}

Status GuestUsage::Remember(const UsageProbe& probe) {
  std::lock_guard<std::mutex> lk(mu_);
  SKIFF_ASSIGN_OR_RETURN(proto::UsageResult now, Ask(probe));
  last_ = now;
  if (!has_base_) {
    base_busy_ = now.cpu_busy_ticks;
    base_total_ = now.cpu_total_ticks;
    has_base_ = true;
  }
  return OkStatus();
}

Result<ResourceUsage> GuestUsage::Paused(const std::string& sandbox) const {
  std::lock_guard<std::mutex> lk(mu_);
  if (!last_)
    return Error(Code::kS005, "sandbox " + sandbox +
                                  " is paused and its guest was not sampled before: resume it to read its "
                                  "metrics");
  return From(*last_, 0);
}

}  // namespace skiff::microvm
