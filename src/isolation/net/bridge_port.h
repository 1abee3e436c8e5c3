// A bridge port that learns nothing: learning off and one static
// forwarding entry, over rtnetlink (what `bridge link set dev PORT learning
// off` and `bridge fdb add MAC dev PORT master static` do).
//
// The microVM guest's tap is such a port: whatever source addresses its
// frames carry, the bridge's forwarding table (host kernel memory, charged
// to no cgroup) never grows because of them.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "base/error.h"

namespace skiff::net {

// "aa:bb:cc:dd:ee:ff" → bytes (false when it is not one).
bool ParseMac(const std::string& text, std::array<uint8_t, 6>* out);

// In the calling thread's network namespace: turns MAC learning off on the
// bridge port `port` and adds a static forwarding entry for `mac` on it.
// Errors are S300.
Status PinPortAddress(const char* port, const std::array<uint8_t, 6>& mac);

}  // namespace skiff::net
