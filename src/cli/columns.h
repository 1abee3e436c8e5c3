// Left-aligned text columns, for the tables `skiff ls` and `skiff catalog` print.
#pragma once

#include <cstddef>
#include <string>

namespace skiff::cli {

// `s` padded with spaces to width `w` (unchanged when already that wide).
inline std::string Pad(std::string s, size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s;
}

}  // namespace skiff::cli
