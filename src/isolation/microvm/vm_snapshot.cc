#include "isolation/microvm/vm_snapshot.h"

#include <sys/stat.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "base/file_io.h"
#include "isolation/microvm/migration.h"
#include "isolation/microvm/snapshot_template.h"

namespace skiff::microvm {
namespace {

constexpr const char* kFormat = "skiff-vm-snapshot-1";
constexpr auto kSaveTimeout = std::chrono::seconds(120);

Error Mismatch(const std::string& what) {
  return Platform("snapshot", "microvm: this snapshot cannot be restored here: " + what);
}

}  // namespace

Result<SnapshotContents> SaveVmSnapshot(Qmp& qmp, const VmShape& shape, const Parts& parts,
                                        const std::string& dir, uint64_t max_bytes, bool was_paused) {
  auto deadline = Clock::now() + kSaveTimeout;
  uint64_t bytes = 0;
  SKIFF_RETURN_IF_ERROR(SaveVmState(qmp, dir + "/state", max_bytes, was_paused, deadline, &bytes));
  nlohmann::json meta = {{"format", kFormat},
                         {"cpus", shape.cpus},
                         {"memory_mb", shape.memory_mb},
                         {"accel", shape.kvm ? "kvm" : "tcg"},
                         {"block_image", shape.block_image},
                         {"block_image_id", FileIdentity(shape.block_image)},
                         {"qemu_id", FileIdentity(parts.qemu_real)},
                         {"append", shape.append},
                         {"network", shape.network}};
  std::string text = meta.dump() + "\n";
  SKIFF_RETURN_IF_ERROR(WriteFileAtomic(dir + "/vm.json", text, 0600));
  return SnapshotContents{true, bytes + text.size()};
}

Result<LaunchSpec> RestoreSpec(const std::string& dir, const SandboxPolicy& policy, const Parts& parts,
                               bool kvm) {
  SKIFF_ASSIGN_OR_RETURN(std::string text, ReadFile(dir + "/vm.json"));
  nlohmann::json m = nlohmann::json::parse(text, nullptr, false);
  if (!m.is_object() || m.value("format", std::string()) != kFormat) return Mismatch("unknown format");
  auto str = [&](const char* k) {
    auto it = m.find(k);
    return it != m.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto num = [&](const char* k) {
    auto it = m.find(k);
    return it != m.end() && it->is_number_unsigned() ? it->get<uint64_t>() : uint64_t{0};
  };
  if (str("accel") != (kvm ? "kvm" : "tcg"))
    return Mismatch("it was saved under " + str("accel") + ", this host runs VMs under " +
                    (kvm ? "kvm" : "tcg"));
  if (num("cpus") != policy.cpus || num("memory_mb") != policy.memory_mb)
    return Mismatch("its machine has " + std::to_string(num("cpus")) + " vCPU and " +
                    std::to_string(num("memory_mb")) + " MiB");
  if (str("block_image") != policy.rootfs.block_image ||
      str("block_image_id") != FileIdentity(policy.rootfs.block_image))
    return Mismatch("its image has been rebuilt or replaced since");
  if (str("qemu_id") != FileIdentity(parts.qemu_real)) return Mismatch("QEMU has changed since");
  // Absent in saves from before networked VMs could be saved: none had a NIC.
  auto net = m.find("network");
  if (net != m.end() && !net->is_boolean()) return Mismatch("unknown format");
  const bool network = net != m.end() && net->get<bool>();
  if (network != policy.network)
    return Mismatch(network ? "it was saved with network: true; create from it with network: true"
                            : "it was saved without network; create from it without network");
  struct stat st {};
  if (::stat((dir + "/state").c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return Mismatch("its state file is missing");
  LaunchSpec spec;
  spec.id = policy.id;
  spec.cpus = static_cast<int>(policy.cpus);
  spec.memory_mb = policy.memory_mb;
  spec.block_image = policy.rootfs.block_image;
  spec.kvm = kvm;
  spec.append = str("append");
  spec.network = network ? &policy : nullptr;
  return spec;
}

}  // namespace skiff::microvm
