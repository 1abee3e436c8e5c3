// The cgroup warm-up of the jail backend.
//
// Moving a process between cgroups takes the kernel's global
// cgroup_threadgroup_rwsem for writing, and the first such move after a
// quiet spell waits for a full RCU grace period (3-16 ms measured here, ~8
// typical) while moves that follow within a few tens of milliseconds take
// ~0.05 ms. A one-shot `skiff run` would pay that wait in the sandbox init's
// first step, on its critical path. So, as soon as the isolator exists, a
// throwaway child moves itself into the skiff/ cgroup (paying the grace
// period while the rest of start-up runs) and again every 5 ms, which keeps
// moves fast, until the first sandbox init has entered its cgroups (or 2 s
// have passed, or the isolator goes); this thread then kills and reaps it.
// Nothing of the sandbox's confinement changes: its init still enters its
// own cgroups before anything else. Failures only lose the head start.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace skiff::jail {

class CgroupWarmup {
 public:
  CgroupWarmup() = default;
  CgroupWarmup(const CgroupWarmup&) = delete;
  CgroupWarmup& operator=(const CgroupWarmup&) = delete;
  ~CgroupWarmup() { End(/*join=*/true); }

  // Starts the thread whose child moves itself into the cgroup whose
  // cgroup.procs is `procs`. Without a thread to be had, does nothing.
  void Start(std::string procs);
  // Stops the warm-up; with `join`, also waits for the thread (exactly one
  // caller joins).
  void End(bool join);

 private:
  void Run();

  std::thread thread_;
  std::string procs_;  // <skiff/>/cgroup.procs
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

}  // namespace skiff::jail
