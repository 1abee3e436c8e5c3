// Launching one VM: its state directory, the confined QEMU (through
// vmm_launch), the wait for the agent's first bytes, and the S300 that
// names why a VM did not come up. A cold boot, a template boot and a restore
// all go through Launch(); what differs is the LaunchSpec.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/pidfd.h"
#include "base/unique_fd.h"
#include "isolation/isolator.h"
#include "isolation/microvm/qemu_cmdline.h"
#include "isolation/microvm/qmp.h"
#include "isolation/net/sandbox_net.h"

namespace skiff::microvm {

using Clock = std::chrono::steady_clock;

inline constexpr std::chrono::seconds kBootTimeout{30};
// Console and QEMU log files are capped (RLIMIT_FSIZE on the VMM).
inline constexpr uint64_t kMaxLogBytes = 4u << 20;

// The variable's value, or "" when unset or empty.
std::string Env(const char* name);
int64_t Ms(Clock::duration d);

// Where per-VM state directories live: <RuntimeDir>/microvm.
std::string StateRoot();

// A per-VM state directory, removed when its owner goes unless released.
class StateDir {
 public:
  StateDir() = default;
  explicit StateDir(std::string path) : path_(std::move(path)) {}
  StateDir(StateDir&& o) noexcept;
  StateDir& operator=(StateDir&& o) noexcept;
  StateDir(const StateDir&) = delete;
  StateDir& operator=(const StateDir&) = delete;
  ~StateDir() { Reset(); }
  const std::string& path() const { return path_; }
  std::string Release();

 private:
  void Reset();
  std::string path_;
};

// Removes a tree, logging (not returning) a failure.
void RemoveTreeLogged(const std::string& path);
// Removes a VM's state directory: renamed first to its `.removing-` name
// with this process's owner tag (orphans.h), so being killed half-way
// leaves a directory a cleanup attributes at once. A directory already
// under a `.creating-`/`.removing-` name is removed as it is.
void RemoveStateDir(const std::string& path);

// The host files a VM is made of, resolved once per start.
struct Parts {
  std::string qemu_real, kernel, initrd;
};
Result<Parts> ResolveParts();

// What to start: a cold boot, a template boot (with a QMP monitor), or a
// restore from a migration stream (with a QMP monitor).
struct LaunchSpec {
  std::string id;      // state directory name, VMM uid
  std::string append;  // kernel command line
  int cpus = 1;
  uint32_t memory_mb = 0;
  std::string block_image;
  bool kvm = false;
  bool qmp = false;
  int incoming_fd = -1;                    // restore from this stream
  uint64_t max_file_bytes = kMaxLogBytes;  // RLIMIT_FSIZE: logs, or a snapshot
  const SandboxPolicy* network = nullptr;  // network: true (cold boots only)
};

QemuMachine MachineOf(const LaunchSpec& spec);

struct Launched {
  // Declared so that the VMM dies before its state directory goes.
  StateDir state;
  std::unique_ptr<net::SandboxNet> net;
  Process proc;
  UniqueFd chan;                 // host end of the agent channel
  UniqueFd qmp;                  // host end of the QMP monitor (spec.qmp), until a client takes it
  std::unique_ptr<Qmp> monitor;  // that client, once one has spoken on it
  uint32_t uid = 0;
  Clock::time_point launched;
};

// Creates the state directory (with the owner tag, orphans.h), the logs and
// the channels, and starts the confined VMM.
Result<Launched> Launch(const LaunchSpec& spec, const Parts& parts);

// Waits until the agent has sent its first bytes (its HELLO, which stays in
// the socket for the protocol client) or the VMM has ended. Returns "" when
// ready, otherwise why not.
std::string WaitForAgent(Launched& l, Clock::time_point deadline);

// Ends a VM that did not come up and turns the reason into S300 with the
// tails of QEMU's log and the console (SKIFF_MICROVM_DEBUG=1 keeps its state).
Error BootFailure(Launched& l, const std::string& failure);

// Launch + WaitForAgent + BootFailure: a VM whose agent is up.
Result<Launched> Boot(const LaunchSpec& spec, const Parts& parts);

// "qemu exited with status 1", "qemu killed by signal SIGSEGV".
std::string DescribeWaitStatus(int status);

// The exit report of a VM: `head`, then the tails of its QEMU log and
// console in `state_dir`, bounded.
std::string VmReport(const std::string& head, const std::string& state_dir);

}  // namespace skiff::microvm
