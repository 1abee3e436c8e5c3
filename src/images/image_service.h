// A long-running service an image declares (a preset recipe's `services`,
// kept in the store's image.json): what starts it inside a sandbox and how
// to tell it is ready. The E2B create starts them (docs/images.md#services).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace skiff {

struct ImageService {
  std::string name;                  // [a-z0-9-], unique in the image
  std::vector<std::string> command;  // argv, started as a live process
  // argv run once after the start; exit 0 = ready. Empty: no check.
  std::vector<std::string> ready;
  uint32_t ready_timeout_secs = 30;  // bound on `ready` (1..600)

  bool operator==(const ImageService&) const = default;
};

}  // namespace skiff
