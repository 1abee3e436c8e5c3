// The guest kernel's command line (KernelCmdline and HostTscKhz are declared
// in microvm.h): boot arguments tuned for a fast boot under emulation, and
// the sandbox's hostname and /tmp size as plain tokens.
#pragma once

#include <string>

namespace skiff::microvm {

// The hostname as handed to the guest (kernel command line or resume):
// letters, digits, '-' and '.' only, at most 63; "" when nothing is left.
std::string GuestHostname(const std::string& name);

}  // namespace skiff::microvm
