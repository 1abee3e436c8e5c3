// /init of the plain-QEMU peer in skiff-microvm-bench: the least a guest can
// do once the kernel hands over. It writes one line to the console (the
// kernel opened /dev/console as fds 0-2) and reboots, which the guest kernel
// (reboot=t) turns into a reset and QEMU (-no-reboot) into its exit. Static,
// so the initramfs needs nothing else.
#include <sys/reboot.h>
#include <unistd.h>

int main() {
  static const char kLine[] = "skiff-plain-init: ready\n";
  ssize_t n = ::write(1, kLine, sizeof kLine - 1);
  (void)n;  // nothing to report to: the bench times out instead
  ::reboot(RB_AUTOBOOT);
  for (;;) ::pause();  // not reached; returning from init would panic
}
