#include "isolation/microvm/qemu_cmdline.h"

#include <algorithm>

#include "isolation/net/sandbox_net.h"

namespace skiff::microvm {

std::vector<std::string> MachineArgs(const QemuMachine& m) {
  // clang-format off
  return {
      // PIT + PIC: the guest's tick (the local APIC timer is not used under
      // TCG, and is verified against the PIT under KVM).
      // RTC: the wall clock (1970 otherwise) and no 1 s failed RTC read.
      "-M", "microvm,x-option-roms=off,pit=on,pic=on,isa-serial=on,rtc=on,acpi=off",
      // TCG's translation cache grows to 1 GiB of host memory by default,
      // per VM; 128 MiB holds what a sandbox's programs translate (boot and
      // a python start are well under it) and bounds the worst case (past
      // it QEMU flushes and translates again).
      "-accel", m.kvm ? "kvm" : "tcg,tb-size=128",
      "-cpu", m.kvm ? "host" : "max",
      "-smp", std::to_string(m.cpus),
      "-m", std::to_string(m.memory_mb),
      "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
      "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
      "-kernel", "/vm/kernel", "-initrd", "/vm/initrd", "-append", m.append,
      "-chardev", "stdio,id=con,signal=off", "-serial", "chardev:con",
      "-add-fd", "fd=4,set=1,opaque=rootfs",
      "-drive", "id=root,if=none,file=/dev/fdset/1,format=raw,readonly=on,file.locking=off",
      "-device", "virtio-blk-device,drive=root",
      "-device", "virtio-serial-device,max_ports=2",
      "-chardev", "socket,id=agent,fd=3",
      "-device", "virtserialport,chardev=agent,name=skiff.agent",
      // Seeds the guest's CRNG during boot, so getrandom() never blocks.
      "-object", "rng-builtin,id=rng0", "-device", "virtio-rng-device,rng=rng0"};
  // clang-format on
}

std::vector<std::string> QemuArgv(const QemuCommand& c) {
  std::vector<std::string> a = {
      c.exec_path, "-name",
      "skiff-" + c.id.substr(0, std::min<size_t>(8, c.id.size())) + ",process=skiff-vm"};
  for (auto& arg : MachineArgs(c.machine)) a.push_back(std::move(arg));
  if (c.tap_fd >= 0) {
    a.insert(a.end(), {"-netdev", "tap,id=net0,fd=" + std::to_string(c.tap_fd) + ",vhost=off", "-device",
                       std::string("virtio-net-device,netdev=net0,mac=") + net::kGuestMac});
  }
  if (c.qmp_fd >= 0) {
    a.insert(a.end(), {"-chardev", "socket,id=qmp,fd=" + std::to_string(c.qmp_fd), "-mon",
                       "chardev=qmp,mode=control"});
  }
  if (c.incoming_fd >= 0) a.insert(a.end(), {"-incoming", "fd:" + std::to_string(c.incoming_fd)});
  return a;
}

}  // namespace skiff::microvm
